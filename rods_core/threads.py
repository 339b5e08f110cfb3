"""The thread rule of CPU runs: one torch intra-op thread per process; parallelism comes from processes.

Why (figures in docs/measurements.md): beside any other busy process, a second intra-op thread makes the
demo model's SFT slower (spinning OpenMP threads fight for the cores), while one thread per
process keeps its speed under load.
Every entry point that runs torch calls `apply_thread_policy` first: `rods train`, `rods sft`, `rods model
demo`, `rods eval`, runs launched from the app, and the benchmarks.
"""

from __future__ import annotations

import os

DEFAULT_THREADS = 1


def apply_thread_policy(threads: int | None = None) -> int:
    """Set torch's intra-op threads (and OpenMP/MKL's for child processes); returns the number set.

    `threads` None takes RODS_THREADS from the environment, else the default of 1."""
    n = threads or int(os.environ.get("RODS_THREADS", DEFAULT_THREADS))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)  # children (accelerate workers, synthesis processes) inherit the rule
    import torch

    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only settable before the first parallel op; the intra-op count is what matters
        pass
    return n

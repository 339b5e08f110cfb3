"""The thread rule of CPU runs: one torch intra-op thread per process; parallelism comes from processes.

Measured on 2 cores (README "Measured here"): a second intra-op thread buys nothing for the 3.9M demo
model (SFT ~2.0k tokens/s at 1 thread, ~1.85k at 2) and collapses 20x as soon as any other process runs
beside it (spinning OpenMP threads fight for the cores); one thread per process stays fast under load.
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

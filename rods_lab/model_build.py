"""A run that must build its model hands the build to `rods model demo --for-run`, in as many processes as
the machine has cores: the warm start is data-parallel, and a one-process run (each run of the app's
pair) would build on one core while the others idle."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rods_core.config import RunConfig
from rods_core.policy.build import build_processes, usable_cores
from rods_core.policy.tiny import ModelFolderError


def every_core_build(cfg: RunConfig, run_dir: Path) -> Callable[[], None] | None:
    """The delegate `ensure_model` calls to build the run's missing model with every core, or None when the
    run's own processes already use them (or it trains on GPUs, where the build's processes are its GPUs)."""
    n = build_processes(cfg, usable_cores())
    if n == cfg.compute.processes:
        return None
    cmd = [sys.executable, "-m", "rods_lab.cli", "model", "demo", "--config", str(run_dir / "config.yaml")]
    cmd += ["--processes", str(n), "--for-run", str(run_dir)]

    def build() -> None:
        # same stdout/stderr as the run (its log), same process group (the app's Stop ends both)
        rc = subprocess.run(cmd, check=False).returncode
        if rc != 0:
            raise ModelFolderError(
                f"the model build `rods {' '.join(cmd[3:])}` exited with code {rc} (its log is above)"
            )

    return build

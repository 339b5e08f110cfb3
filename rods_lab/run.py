"""A training run wired to its record: the library's loop (rods_core.loop) with the storage recorder
(storage.run_recorder). The `rods train` command and the tests start runs here."""

from __future__ import annotations

from pathlib import Path

from rods_core.benchmarks.protocols import Benchmark
from rods_core.config import RunConfig
from rods_core.loop import StepWatcher
from rods_core.loop import train as train_loop
from rods_lab.model_build import every_core_build
from storage.run_recorder import open_run_recorder


def train(
    cfg: RunConfig,
    *,
    run_id: str | None = None,
    resume: bool = False,
    log=print,
    watcher: StepWatcher | None = None,
    benchmark: Benchmark | None = None,
) -> Path:
    """Run (or resume) one training run recorded in the run folder and the control store; returns its folder.
    A one-process run that must build its model builds it with every core (rods_lab/model_build.py).
    `benchmark` (any Benchmark object) replaces the one `cfg.benchmark` names."""
    return train_loop(
        cfg,
        open_recorder=open_run_recorder,
        run_id=run_id,
        resume=resume,
        log=log,
        watcher=watcher,
        build_delegate=every_core_build,
        benchmark=benchmark,
    )

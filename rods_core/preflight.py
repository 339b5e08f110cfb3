"""A training run's pre-flight: its ids, resume target, seed file and model folder are checked before anything
is created, so a bad input is a DoorError naming it, never a half-made run folder."""

from __future__ import annotations

from pathlib import Path

from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.task_files import load_task_file
from rods_core.config import RunConfig
from rods_core.config.inputs import DoorError
from rods_core.ids import check_run_id
from rods_core.policy.model_folders import check_model_dir, model_folder


def check_ids(run_id: str | None, resume: str | None) -> None:
    """The run ids given by the rule, and not two different ones: checked on every rank of a launched run too,
    where the rest of the pre-flight (run folders, seed file, model) has been done once, or is rank 0's."""
    if run_id and resume and run_id != resume:
        raise DoorError(f"--run-id {run_id} and --resume {resume} differ; give one of them")
    for given in (run_id, resume):
        if given:
            check_run_id(given)


def preflight(cfg: RunConfig, run_id: str | None, resume: str | None) -> str | None:
    """Check a run's inputs before anything is created: ids by the rule, the resume target exists, a new
    id names no existing run, the seed file passes the task-file door, the model folder holds a model.
    Returns the run id to use (None: a new one is made)."""
    runs = Path(cfg.output_dir).resolve()
    check_ids(run_id, resume)
    if resume:
        if not (runs / resume).is_dir():
            raise DoorError(f"--resume {resume}: no such run in the runs folder {runs}")
    elif run_id:
        if (runs / run_id / "config.yaml").exists():
            raise DoorError(f"--run-id {run_id}: the run exists in {runs}; resume it with --resume {run_id}")
    if cfg.seeds.subset == "file":
        bench = make_benchmark(cfg.benchmark, options=cfg.benchmark_options)  # the run's: its schema and verifier
        load_task_file(cfg.seeds.file, "seeds.file", benchmark=bench)
    model = model_folder(cfg.model.path, cfg.model.build_if_missing)
    if not cfg.model.build_if_missing or (model / "config.json").exists():
        check_model_dir(model)
    elif model.exists() and not model.is_dir():
        raise DoorError(f"model.path: {model}: is a file; give a folder to build the tiny model in")
    return resume or run_id

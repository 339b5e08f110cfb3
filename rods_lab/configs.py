"""The Launch form's run config: the configs on offer, a base config with the form's overrides validated
into a RunConfig under the app's folders, and validation errors keyed by field for showing beside each."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rods_core.benchmarks.registry import make_benchmark
from rods_core.config import RunConfig, read_config_data, set_dotted
from rods_core.model_folders import HUB_ID, check_model_dir, model_folder
from rods_core.task_files import load_task_file
from rods_lab.paths import PROJECT_ROOT, AppPaths, confine


def list_configs(folder: str | Path = PROJECT_ROOT / "configs") -> list[Path]:
    return sorted(Path(folder).glob("*.yaml"))


def field_errors(err: ValidationError) -> dict[str, str]:
    """Field path -> message, for showing each error beside its field."""
    out: dict[str, str] = {}
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        hint = " (unknown field)" if e["type"] == "extra_forbidden" else ""
        out[loc] = out.get(loc, "") + ("; " if loc in out else "") + e["msg"] + hint
    return out


def default_processes(cfg: RunConfig) -> int:
    """Launch's default: every core on a CPU run (one torch thread a process), the config's count on GPUs."""
    return max(1, os.cpu_count() or 1) if cfg.grpo.use_cpu else cfg.compute.processes


def build_config(
    base: str | Path | dict, overrides: dict[str, Any], paths: AppPaths, *, check_seeds: bool = True
) -> RunConfig:
    """The base config (a file or a mapping) with dotted overrides, validated; output_dir and workspace
    are always the app's, user-typed file paths are confined, the seed file passes the task-file door
    (unless check_seeds=False: the caller writes it next) and the model folder holds a model.
    Raises ValidationError or a DoorError (ConfigError, OutsideWorkspace, TaskFileError, TestSplitRefused)."""
    data = copy.deepcopy(base) if isinstance(base, dict) else read_config_data(base)
    for k, v in overrides.items():
        set_dotted(data, k, v)
    data["output_dir"], data["workspace"] = str(paths.runs), str(paths.workspace)
    cfg = RunConfig.model_validate(data)
    if cfg.seeds.file:
        cfg.seeds.file = str(confine(cfg.seeds.file, paths.workspace))
        if check_seeds and cfg.seeds.subset == "file":  # through the run's benchmark: its schema and verifier
            load_task_file(cfg.seeds.file, "seeds.file", benchmark=make_benchmark(cfg.benchmark, prereq=cfg.prereq))
    # The trainer runs in the project folder: a relative model path means the project's models/. A hub id
    # (no such folder there) names a model in the local Hugging Face cache and is kept as typed.
    local = PROJECT_ROOT / cfg.model.path
    if not cfg.model.build_if_missing and HUB_ID.fullmatch(cfg.model.path) and not local.parent.exists():
        check_model_dir(model_folder(cfg.model.path))
        return cfg
    cfg.model.path = str(confine(cfg.model.path, paths.workspace, PROJECT_ROOT / "models", base=PROJECT_ROOT))
    if not cfg.model.build_if_missing:
        check_model_dir(cfg.model.path)
    return cfg

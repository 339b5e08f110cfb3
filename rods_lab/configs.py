"""The Launch form's run config: the configs on offer, a base config with the form's overrides validated
into a RunConfig under the app's folders, and validation errors keyed by field for showing beside each.

Every field of the run config that names a file or folder is listed in PATH_FIELDS and confined to the
workspace before the config is validated (validation reads some: prompt files); every other text field is
listed in TEXT_FIELDS, and tests/test_hostile_lab.py walks the schema so that a new text field must be put in
one list or the other. TRL's pass-through options name paths and remote services of their own (`*_dir`,
`hub_*`, `deepspeed`): the app refuses those (TRAINER_ARGS_REFUSED); a config file run with `rods train` on
the host may set them.
"""

from __future__ import annotations

import copy
import os
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.task_files import load_task_file
from rods_core.config import RunConfig, read_config_data, set_dotted
from rods_core.config.benchmark_entries import LEGACY_OPTIONS, benchmark_entry
from rods_core.policy.model_folders import HUB_ID, check_model_dir, model_folder
from rods_lab.paths import PROJECT_ROOT, AppPaths, OutsideWorkspace, confine

# Fields naming files or folders the run reads or writes. output_dir and workspace are the app's own (set
# below); model.path may also name the project's models/ or a hub id in the local cache (build_config).
PATH_FIELDS = (
    "output_dir",
    "workspace",
    "model.path",
    "seeds.file",
    "eval.file",
    "synthesis.exclude",
    "synthesis.prompts_dir",
)
# Text fields that name no file or folder (URLs, names, prompts, ids); grpo.trainer_args is checked apart.
TEXT_FIELDS = (
    "name",
    "benchmark",
    "model.tiny.prompt.system_prompt",
    "model.attn_implementation",
    "model.lora.target_modules",
    "seeds.categories",
    "seeds.ids",
    "episode.prompt.system_prompt",
    "grpo.vllm_server_url",
    "grpo.trainer_args",
    "benchmark_options",  # a benchmark's own options: those its schema types as paths are confined (path_options)
    "eval.categories",
    "synthesis.endpoint_url",
    "synthesis.endpoint_model",
    "synthesis.api_key_env",
    "report.project",
)
TRAINER_ARGS_REFUSED = re.compile(r"dir$|path$|file$|hub|token|deepspeed|fsdp|accelerator_config|resume|report_to")


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
    if "benchmark_options" in overrides:  # the form's options replace the file's, an older top-level one too
        data = {k: v for k, v in data.items() if k not in LEGACY_OPTIONS}
    for k, v in overrides.items():
        set_dotted(data, k, v)
    data["output_dir"], data["workspace"] = str(paths.runs), str(paths.workspace)
    confine_workspace_files(data, paths)
    cfg = RunConfig.model_validate(data)
    if cfg.seeds.file:
        if check_seeds and cfg.seeds.subset == "file":  # through the run's benchmark: its schema and verifier
            load_task_file(
                cfg.seeds.file, "seeds.file", benchmark=make_benchmark(cfg.benchmark, options=cfg.benchmark_options)
            )
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


def _section(data: dict, dotted: str) -> tuple[dict | None, str]:
    """(the mapping that holds `dotted`'s last key, that key), or (None, key) when a section is absent."""
    *parents, leaf = dotted.split(".")
    node: Any = data
    for p in parents:
        node = node.get(p) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), leaf


def path_options(benchmark: str) -> list[str]:
    """The options of a benchmark's own schema typed as a path (pathlib.Path, alone or in a union): a run
    launched from the app has them confined like the config's file fields. None for an unknown benchmark (the
    config's validation names it)."""
    try:
        model = benchmark_entry(benchmark).load_options_model()
    except (KeyError, ValueError):
        return []
    return [n for n, f in model.model_fields.items() if Path in (typing.get_args(f.annotation) or (f.annotation,))]


def confine_workspace_files(data: dict, paths: AppPaths) -> None:
    """Confine, in place, every file field of a config mapping (seeds.file, eval.file, each of
    synthesis.exclude, synthesis.prompts_dir, a benchmark option its schema types as a path) to the workspace (a
    relative path is taken there); refuse
    grpo.trainer_args that name TRL's own paths or remote services. Raises OutsideWorkspace naming the field."""
    for dotted in ("seeds.file", "eval.file", "synthesis.exclude", "synthesis.prompts_dir"):
        node, key = _section(data, dotted)
        if node is None or node.get(key) is None:
            continue
        try:
            value = node[key]
            node[key] = (
                [str(confine(v, paths.workspace)) for v in value]
                if isinstance(value, list)
                else str(confine(value, paths.workspace))
            )
        except OutsideWorkspace as e:
            raise OutsideWorkspace(f"{dotted}: {e}") from e
    options = data.get("benchmark_options") or {}
    for name in path_options(str(data.get("benchmark") or "")):
        if options.get(name) is not None:
            try:
                options[name] = str(confine(options[name], paths.workspace))
            except OutsideWorkspace as e:
                raise OutsideWorkspace(f"benchmark_options.{name}: {e}") from e
    args, _ = _section(data, "grpo.trainer_args")
    refused = sorted(k for k in ((args or {}).get("trainer_args") or {}) if TRAINER_ARGS_REFUSED.search(str(k)))
    if refused:
        raise OutsideWorkspace(
            f"grpo.trainer_args: {', '.join(refused)} name(s) TRL's own files, folders or remote services, which a "
            "run launched from the app may not set; put them in a config run with `rods train` on the host"
        )

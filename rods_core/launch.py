"""Launching training runs from the app: workspace confinement, config building, background processes,
the log's tail and progress/ETA.

A run is started as `python -m rods_lab.cli train --config <runs/<id>/launch.yaml> --run-id <id>` in its
own session (start_new_session=True), so it survives page reloads and app restarts; its Run row is
created as `queued` first with the id we pass, then the trainer registers itself as `running`. A
process that dies before registering (bad model path, crash at import) is reported `failed` by
`effective_status` from its pid and start time, with the log's tail as the message.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rods_core.config import RunConfig, dump_config, read_config_data, set_dotted
from rods_core.ids import check_run_id, new_run_id
from rods_core.inputs import DoorError, read_bytes
from rods_core.model_folders import HUB_ID, check_model_dir, model_folder
from rods_core.task_files import load_task_file

PROJECT_ROOT = Path(__file__).resolve().parent.parent
LOG_FILE = "train.log"
LAUNCH_FILE = "launch.yaml"


class OutsideWorkspace(DoorError):
    """A path the user typed resolves outside the folders the app may read or write."""


def confine(path: str | Path, root: str | Path, *extra_roots: str | Path, base: str | Path | None = None) -> Path:
    """Resolve `path` (a relative path is taken under `base`, default `root`) and refuse it unless it lies
    inside `root` or one of `extra_roots`. Symlinks and `..` are resolved first, so neither escapes."""
    roots = [Path(r).resolve() for r in (root, *extra_roots)]
    p = Path(os.path.expanduser(str(path)))
    resolved = (p if p.is_absolute() else Path(base or roots[0]).resolve() / p).resolve()
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        allowed = ", ".join(str(r) for r in roots)
        raise OutsideWorkspace(f"{path}: outside the workspace; use a path under {allowed}")
    return resolved


@dataclass(frozen=True)
class AppPaths:
    """Where the app keeps things: the workspace (control DB, user files) and the runs folder."""

    workspace: Path
    runs: Path

    @classmethod
    def from_env(cls) -> AppPaths:
        ws = Path(os.environ.get("RODS_WORKSPACE", "workspace")).resolve()
        runs = Path(os.environ.get("RODS_RUNS", "runs")).resolve()
        return cls(ws, runs)

    @property
    def experiments(self) -> Path:
        """Where `rods bench curriculum` experiments are read from (the Compare page)."""
        from rods_core.experiments import EXPERIMENTS

        return Path(os.environ.get("RODS_EXPERIMENTS", PROJECT_ROOT / EXPERIMENTS)).resolve()

    @property
    def control_db(self) -> str | Path:
        """The control store: $RODS_CONTROL_DB (a file or a URL), else <workspace>/control.sqlite."""
        from storage.store_engine import store_target

        return store_target(self.workspace)

    def db(self):
        from storage.control import open_store

        return open_store(self.workspace)


# ----- configs -----------------------------------------------------------------------------------------
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
        if check_seeds and cfg.seeds.subset == "file":
            load_task_file(cfg.seeds.file, "seeds.file")
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


# ----- processes ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Launched:
    run_id: str
    pid: int
    run_dir: Path
    log_path: Path


def launch_run(cfg: RunConfig, paths: AppPaths, run_id: str | None = None) -> Launched:
    """Create the Run row (queued), write the config, start `rods train` in its own session."""
    from storage.control import process_start

    run_id = check_run_id(run_id) if run_id else new_run_id(cfg.name)
    run_dir = Path(cfg.output_dir) / run_id
    if run_dir.exists():
        raise FileExistsError(f"run folder {run_dir} exists already; pick another run id")
    run_dir.mkdir(parents=True)
    config_path = run_dir / LAUNCH_FILE
    config_path.write_text(dump_config(cfg), encoding="utf-8")
    db = paths.db()
    db.create_run(run_id, run_dir, cfg.model_dump(mode="json"), cfg.method, name=cfg.name)
    log_path = run_dir / LOG_FILE
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rods_lab.cli", "train", "--config", str(config_path), "--run-id", run_id],
            cwd=PROJECT_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    db.update_run(run_id, pid=proc.pid, proc_start=process_start(proc.pid))
    return Launched(run_id, proc.pid, run_dir, log_path)


def pair_configs(cfg: RunConfig, twin: str = "static") -> list[RunConfig]:
    """The configured run and its twin under another method: same seeds, seed, model and batch, the cores
    split between them (half the processes each, at least one). The batch stays the config's (tasks_per_step
    is per process, so it grows as the processes halve): the twins run the demo's design, not half of it."""
    if cfg.method == twin:
        raise ValueError(f"the run's method is {twin} already; pick another method to pair it with {twin}")
    share = max(1, cfg.compute.processes // 2)
    batch = cfg.grpo.tasks_per_step * cfg.compute.processes
    per_process = batch // share if batch % share == 0 else cfg.grpo.tasks_per_step
    out = []
    for method, name in ((cfg.method, cfg.name), (twin, f"{cfg.name}_{twin}"[:80])):
        data = cfg.model_dump()
        data.update(method=method, name=name)
        data["compute"]["processes"] = share
        data["grpo"]["tasks_per_step"] = per_process
        out.append(RunConfig.model_validate(data))
    return out


def launch_pair(cfg: RunConfig, paths: AppPaths, twin: str = "static") -> list[Launched]:
    """Launch `pair_configs(cfg, twin)`: the run and its twin, side by side."""
    return [launch_run(c, paths) for c in pair_configs(cfg, twin)]


def launch_on_seeds(
    db, task_ids: list[str], base: str | Path, name: str, overrides: dict[str, Any], paths: AppPaths
) -> tuple[Launched, Path]:
    """Write the chosen catalog seeds to <workspace>/subsets/ and launch `base` on them (seeds.subset=file).
    The config and the seeds are checked first, so a refusal leaves no subset file behind."""
    from rods_core.seeds import refuse_test_tasks
    from rods_core.tasks import write_tasks
    from storage.catalog import catalog_tasks

    tasks = catalog_tasks(db, task_ids)
    if not tasks:
        raise ValueError("choose at least one seed")
    refuse_test_tasks(tasks, "a run on catalog seeds")
    file = paths.workspace / "subsets" / f"{new_run_id(name)}.jsonl"
    cfg = build_config(
        base,
        {"name": name, "seeds.subset": "file", "seeds.file": str(file), "seeds.limit": None, **overrides},
        paths,
        check_seeds=False,
    )
    write_tasks(file, tasks)
    return launch_run(cfg, paths), file


def save_upload(paths: AppPaths, name: str, data: bytes) -> Path:
    """Keep an uploaded file under <workspace>/imports/ (only its base name, in safe characters, is used)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).name, flags=re.ASCII).lstrip(".") or "upload.jsonl"
    target = confine(Path("imports") / safe, paths.workspace)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def import_upload(paths: AppPaths, db, name: str, data: bytes, tags: list[str]):
    """An uploaded seed file, verified as `rods seeds import` verifies one (schema, replay, leak guard)
    before anything is written; then kept under imports/. Returns storage.catalog's ImportReport."""
    from storage.catalog import import_seeds

    report = import_seeds(db, data, Path(name).name or "upload", "the Seeds page upload", tags=tags)
    save_upload(paths, name, data)
    return report


def import_workspace_file(paths: AppPaths, db, typed: str, tags: list[str]):
    """A seed file typed as a path: confined to the workspace, then verified and imported whole."""
    from storage.catalog import import_seeds

    path = confine(typed, paths.workspace)
    return import_seeds(db, read_bytes(path, "task file"), str(path), "the Seeds page import", tags=tags)


def effective_status(db, run) -> str:
    """The run's status as the UI should show it: a queued run whose process is gone has failed (the
    row is updated, with the log's tail as message); a running one whose process vanished is `lost`."""
    from storage.control import process_alive

    status = db.run_status(run)
    if status == "queued" and run.pid and not process_alive(run.pid, run.proc_start):
        msg = tail(Path(run.out_dir) / LOG_FILE, 5) or "the process exited before it registered"
        db.update_run(run.id, status="failed", message=msg[-1000:])
        return "failed"
    return status


def tail(path: str | Path, lines: int = 40, max_bytes: int = 64_000) -> str:
    """The last `lines` lines of a (possibly growing) text file; "" when it does not exist."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    return "\n".join(text.splitlines()[-lines:])


# ----- progress ----------------------------------------------------------------------------------------
def progress(
    step: int | None, max_steps: int, step_seconds: list[float], window: int = 10
) -> tuple[float, float | None]:
    """(fraction done, seconds left) from the mean of the last `window` step durations; None before a step."""
    if not step or max_steps <= 0:
        return 0.0, None
    done = min(step / max_steps, 1.0)
    recent = [s for s in step_seconds[-window:] if s == s and s > 0]  # drop NaN and zeros
    if not recent:
        return done, None
    return done, max(max_steps - step, 0) * sum(recent) / len(recent)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA —"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"ETA {h}h{m:02d}m" if h else f"ETA {m}m{s:02d}s"


# ----- app preferences (defaults for new runs) ---------------------------------------------------------
PREFS_FILE = "app_prefs.json"


def read_prefs(paths: AppPaths) -> dict[str, Any]:
    import json

    try:
        return json.loads((paths.workspace / PREFS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def write_prefs(paths: AppPaths, **values: Any) -> dict[str, Any]:
    """Merge values into the workspace's app preferences (e.g. review="gated" for new runs)."""
    import json

    prefs = {**read_prefs(paths), **values}
    paths.workspace.mkdir(parents=True, exist_ok=True)
    (paths.workspace / PREFS_FILE).write_text(json.dumps(prefs, indent=2), encoding="utf-8")
    return prefs

"""Where the app keeps things (workspace, runs, experiments) and the confinement of every path a user types
or uploads: nothing the app reads or writes for a user lies outside the folders named here."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from rods_core.benchmarks.protocols import Benchmark
from rods_core.config.inputs import DoorError, read_bytes
from rods_lab.results import EXPERIMENTS
from storage.catalog import ImportReport, import_seeds
from storage.control import ControlDB, open_store
from storage.store_engine import store_target

PROJECT_ROOT = Path(__file__).resolve().parent.parent


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
        return Path(os.environ.get("RODS_EXPERIMENTS", PROJECT_ROOT / EXPERIMENTS)).resolve()

    @property
    def control_db(self) -> str | Path:
        """The control store: $RODS_CONTROL_DB (a file or a URL), else <workspace>/control.sqlite."""
        return store_target(self.workspace)

    def db(self) -> ControlDB:
        return open_store(self.workspace)


# ----- uploads -----------------------------------------------------------------------------------------
def save_upload(paths: AppPaths, name: str, data: bytes) -> Path:
    """Keep an uploaded file under <workspace>/imports/ (only its base name, in safe characters, is used)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).name, flags=re.ASCII).lstrip(".") or "upload.jsonl"
    target = confine(Path("imports") / safe, paths.workspace)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def import_upload(
    paths: AppPaths,
    db: ControlDB,
    name: str,
    data: bytes,
    tags: list[str],
    benchmark: Benchmark | None = None,
    by: str | None = None,
) -> ImportReport:
    """An uploaded seed file of `benchmark`'s tasks (BFCL multi-turn's when None), verified as `rods seeds
    import` verifies one (schema, verification by execution, leak guard) before anything is written; then
    kept under imports/."""
    where = Path(name).name or "upload"
    report = import_seeds(db, data, where, "the Seeds page upload", tags=tags, benchmark=benchmark, by=by)
    save_upload(paths, name, data)
    return report


def import_workspace_file(
    paths: AppPaths,
    db: ControlDB,
    typed: str,
    tags: list[str],
    benchmark: Benchmark | None = None,
    by: str | None = None,
) -> ImportReport:
    """A seed file typed as a path: confined to the workspace, then verified and imported whole."""
    path = confine(typed, paths.workspace)
    data = read_bytes(path, "task file")
    return import_seeds(db, data, str(path), "the Seeds page import", tags=tags, benchmark=benchmark, by=by)

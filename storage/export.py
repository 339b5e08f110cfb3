"""Export a run's pools as JSONL and import seed files into the catalog.

An export line is `Task.to_record()` (BFCL's question fields + ground_truth + provenance) plus `pool`
and `stats` (the task's latest reward statistics in the run; every key present, null when unknown, so
Arrow infers one schema). `rods_core.tasks.read_tasks` ignores those two fields, so an export imports
back unchanged, and `datasets.load_dataset("json", data_files=...)` loads it (datasets types the
heterogeneous `initial_config` as Json). Pool membership comes from the run's pools.json snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rods_core.tasks import Task, read_tasks, write_tasks
from storage.control import ControlDB
from storage.pools import read_pools_snapshot

STATS_FIELDS = ("step", "n", "mean", "var", "smoothed_mean", "smoothed_var", "region")


def _clean(v: Any) -> Any:
    """JSON has no NaN: missing statistics become null; numpy scalars become Python numbers."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def task_stats_map(run_dir: str | Path) -> dict[str, dict]:
    """task_id -> its latest statistics in the run's event log (empty if none were logged)."""
    from storage.reader import RunReader  # DuckDB only when statistics are read

    df = RunReader(run_dir).latest_task_stats()
    return {r["task_id"]: {f: _clean(r.get(f)) for f in STATS_FIELDS} for r in df.to_dict("records")}


def export_tasks(
    tasks: Iterable[Task], out_path: str | Path, pool: str | Mapping[str, str], stats: Mapping[str, dict] | None = None
) -> int:
    """Write tasks with their pool (one name, or task_id -> pool) and statistics; returns lines."""
    stats = stats or {}
    empty = dict.fromkeys(STATS_FIELDS)
    tasks = list(tasks)
    extra = {
        t.id: {
            "pool": pool if isinstance(pool, str) else pool.get(t.id),
            "stats": {**empty, **{k: v for k, v in stats.get(t.id, {}).items() if k in empty}},
        }
        for t in tasks
    }
    return write_tasks(out_path, tasks, extra)


def export_pool(run_dir: str | Path, pool: str, out_path: str | Path) -> int:
    """Export one pool of a run (seeds | staged | active | retired | all) as JSONL; returns lines."""
    snap = read_pools_snapshot(run_dir)
    tasks = snap.tasks(pool)
    return export_tasks(tasks, out_path, snap.pool_of(), task_stats_map(run_dir))


class ImportRefused(ValueError):
    """Valid tasks that may not become seeds (e.g. held-out test tasks); nothing was imported."""

    def __init__(self, path: str | Path, refused: list[tuple[str, str]]):
        self.refused = refused
        shown = "\n".join(f"  {tid}: {why}" for tid, why in refused[:20])
        more = f"\n  ... and {len(refused) - 20} more" if len(refused) > 20 else ""
        super().__init__(f"{len(refused)} task(s) in {path} refused; nothing was imported:\n{shown}{more}")


@dataclass(frozen=True)
class ImportReport:
    path: str
    added: int
    updated: int


def import_seeds(
    path: str | Path, db: ControlDB, refuse: Callable[[Task], str | None] | None = None, tags: Iterable[str] = ()
) -> ImportReport:
    """Validate the whole file (TaskFileError names file:line:field), check every task with `refuse`
    (returns a reason or None), and only then add the tasks to the seed catalog in one transaction."""
    tasks = read_tasks(path)
    if refuse:
        refused = [(t.id, why) for t in tasks if (why := refuse(t))]
        if refused:
            raise ImportRefused(path, refused)
    added, updated = db.upsert_seeds(tasks, source="import", tags=tags)
    return ImportReport(str(path), added, updated)

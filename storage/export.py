"""Export a run's pools as JSONL (seed files are imported by storage.catalog.import_seeds).

An export line is the task's `to_record()` (BFCL multi-turn: its question fields + ground_truth + provenance;
another benchmark's task model, by the run's `benchmark:`, its own fields) plus `pool`
and `stats` (the task's latest reward statistics in the run; every key present, null when unknown, so
Arrow infers one schema). `rods_core.benchmarks.task_files.read_tasks` ignores those two fields, so an export imports
back unchanged, and `datasets.load_dataset("json", data_files=...)` loads it (datasets types the
heterogeneous `initial_config` as Json). Pool membership comes from the run's pools.json snapshot.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.benchmarks.task_files import iter_records, write_tasks
from storage.pools import read_pools_snapshot
from storage.schema import POOLS

STATS_FIELDS = ("step", "n", "mean", "var", "smoothed_mean", "smoothed_var", "region")


def json_safe(v: Any) -> Any:
    """JSON has no NaN or infinity: they become null; numpy scalars become Python numbers; mappings and
    sequences are cleaned through (keys as strings)."""
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # a numpy scalar
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def task_stats_map(run_dir: str | Path) -> dict[str, dict]:
    """task_id -> its latest statistics in the run's event log (empty if none were logged)."""
    from storage.reader import RunReader  # DuckDB only when statistics are read

    df = RunReader(run_dir).latest_task_stats()
    return {r["task_id"]: {f: json_safe(r.get(f)) for f in STATS_FIELDS} for r in df.to_dict("records")}


def _extra(tasks: list[TaskRecord], pool: str | Mapping[str, str], stats: Mapping[str, dict] | None) -> dict[str, dict]:
    """Each task's `pool` and `stats` fields of an export line."""
    stats, empty = stats or {}, dict.fromkeys(STATS_FIELDS)
    return {
        t.id: {
            "pool": pool if isinstance(pool, str) else pool.get(t.id),
            "stats": {**empty, **{k: v for k, v in stats.get(t.id, {}).items() if k in empty}},
        }
        for t in tasks
    }


def export_tasks(
    tasks: Iterable[TaskRecord],
    out_path: str | Path,
    pool: str | Mapping[str, str],
    stats: Mapping[str, dict] | None = None,
) -> int:
    """Write tasks with their pool (one name, or task_id -> pool) and statistics; returns lines."""
    tasks = list(tasks)
    return write_tasks(out_path, tasks, _extra(tasks, pool, stats))


class EmptyPool(ValueError):
    """The pool holds no task: nothing is written, since `datasets` cannot load an empty JSONL file."""


def _pool(run_dir: str | Path, pool: str) -> tuple[list[TaskRecord], dict[str, dict]]:
    """(the pool's tasks, their export fields); PoolsFileError before the first snapshot, EmptyPool when empty."""
    snap = read_pools_snapshot(run_dir)
    tasks = snap.tasks(pool)
    if not tasks:
        raise EmptyPool(
            f"the {pool} pool of {Path(run_dir).name} holds no task; nothing was written "
            "(an empty JSONL file cannot be loaded by datasets)"
        )
    return tasks, _extra(tasks, snap.pool_of(), task_stats_map(run_dir))


def export_pool(run_dir: str | Path, pool: str, out_path: str | Path) -> int:
    """Export one pool of a run (seeds | staged | active | retired | all) as JSONL; returns lines.
    Raises PoolsFileError before the first snapshot and EmptyPool for an empty pool (no file written)."""
    tasks, extra = _pool(run_dir, pool)
    return write_tasks(out_path, tasks, extra)


def pool_jsonl(run_dir: str | Path, pool: str) -> tuple[bytes, int]:
    """(export_pool's file as bytes, its lines), made in memory: a page that offers the download writes nothing."""
    if pool not in (*POOLS, "all"):
        raise ValueError(f"unknown pool {pool!r}")
    tasks, extra = _pool(run_dir, pool)
    lines = [json.dumps(rec, ensure_ascii=False) + "\n" for rec in iter_records(tasks, extra)]
    return "".join(lines).encode(), len(lines)


def export_to_folder(run_dir: str | Path, pool: str, folder: str | Path, run_id: str) -> tuple[Path, int]:
    """export_pool to <folder>/<run id>-<pool>.jsonl; the file name keeps only letters, digits and _ of the
    run id (a run id from an older database may hold anything), so the file always lands in `folder`."""
    if pool not in (*POOLS, "all"):
        raise ValueError(f"unknown pool {pool!r}")
    out = Path(folder) / f"{re.sub(r'[^A-Za-z0-9_]', '_', run_id, flags=re.ASCII)[:128]}-{pool}.jsonl"
    return out, export_pool(run_dir, pool, out)

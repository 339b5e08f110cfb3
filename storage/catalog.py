"""The seed catalog as the app's Seeds page uses it: a table, tags, and a chosen subset written as JSONL.

Complements storage.control (which adds, lists and enables seeds). A catalog entry without a record is a
built-in BFCL seed and is read from the BFCL data by id.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rods_core.benchmarks.protocols import Benchmark, TaskFacts, TaskRecord
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, loadable_task_types, make_benchmark
from rods_core.benchmarks.task_files import parse_task_bytes
from storage.control import ControlDB, Seed


@dataclass(frozen=True)
class ImportReport:
    source: str
    added: int
    updated: int


def import_seeds(
    db: ControlDB | Callable[[], ControlDB],
    data: bytes,
    source: str,
    where: str,
    *,
    tags: Iterable[str] = (),
    allow_test: bool = False,
    benchmark: Benchmark | None = None,
    by: str | None = None,
) -> ImportReport:
    """Verify a whole seed file's bytes (schema naming file:line:field, replay by execution, and the leak
    guard unless allow_test), and only then add its tasks to the catalog in one transaction. `db` may be
    a factory, so a refused file does not even create the database. `benchmark` (BFCL multi-turn when None)
    gives the schema, the verifier and the guard; `by` names who imported (the app's user). Raises DoorError
    subclasses."""
    bench = benchmark or make_benchmark(DEFAULT_BENCHMARK)
    tasks = parse_task_bytes(data, source, where, guard=not allow_test, benchmark=bench)
    cdb = db() if callable(db) else db
    added, updated = cdb.upsert_seeds(tasks, source="import", tags=tags, by=by)
    return ImportReport(source, added, updated)


@functools.cache
def _facts_of(kind: type) -> Callable[[Any], TaskFacts]:
    """`facts` of the first benchmark whose tasks are of this model (memory's for every backend)."""
    return make_benchmark(next(n for n, k in loadable_task_types() if k is kind)).facts


@functools.cache
def _benchmarks_of(kind: type) -> str:
    """The benchmarks whose tasks are of this model, comma separated (memory's backends share one model)."""
    return ", ".join(n for n, k in loadable_task_types() if k is kind)


def benchmark_of(seed: Seed, task: Any) -> str:
    """The catalog's benchmark column for an entry and its task (`_catalog_task`): a built-in seed's benchmark,
    the benchmarks whose task model reads the record, or "" for a record none reads."""
    if not seed.record:
        return DEFAULT_BENCHMARK
    return _benchmarks_of(type(task)) if task is not None else ""


def seed_frame(db: ControlDB) -> pd.DataFrame:
    """task_id, benchmark, enabled, tags (comma separated), source, category, turns, calls, added_at: the
    task's `Benchmark.facts` (memory's: its scenario, no turns or calls); empty and 0 for an entry without a
    readable record (a built-in BFCL seed)."""
    rows = []
    for s in db.list_seeds():
        task = _catalog_task(s)
        facts = _facts_of(type(task))(task) if task is not None else TaskFacts("")
        rows.append(
            {
                "task_id": s.task_id,
                "benchmark": benchmark_of(s, task),
                "enabled": bool(s.enabled),
                "tags": ", ".join(json.loads(s.tags or "[]")),
                "source": s.source,
                "category": facts.group,
                "turns": facts.turns,
                "calls": facts.calls,
                "added_at": s.added_at,
            }
        )
    return pd.DataFrame(
        rows, columns=["task_id", "benchmark", "enabled", "tags", "source", "category", "turns", "calls", "added_at"]
    )


def _catalog_task(seed: Seed) -> Any:
    """The entry's task, or None for a built-in BFCL seed and for a record no task model reads (shown as is)."""
    try:
        return seed.task()
    except ValueError:
        return None


def catalog_tasks(db: ControlDB, task_ids: Iterable[str]) -> list[TaskRecord]:
    """The catalog's tasks for these ids, in the given order; unknown ids raise KeyError."""
    seeds = {s.task_id: s for s in db.list_seeds()}
    builtin = None
    out = []
    for tid in task_ids:
        if tid not in seeds:
            raise KeyError(f"{tid!r} is not in the seed catalog")
        task = seeds[tid].task()
        if task is None:
            if builtin is None:  # an entry without a record is a BFCL multi-turn seed (the default benchmark's)
                builtin = {t.id: t for t in make_benchmark(DEFAULT_BENCHMARK).seeds("all")}
            task = builtin[tid]
        out.append(task)
    return out

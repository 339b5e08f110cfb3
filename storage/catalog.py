"""The seed catalog as the app's Seeds page uses it: a table, tags, and a chosen subset written as JSONL.

Complements storage.control (which adds, lists and enables seeds). A catalog entry without a record is a
built-in BFCL seed and is read from the BFCL data by id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from rods_core.tasks import Task, write_tasks
from storage.control import ControlDB


def retag(db: ControlDB, task_ids: Iterable[str], tag: str, add: bool = True) -> int:
    """Add (or remove) one tag on several seeds; returns how many seeds changed."""
    tag, changed = tag.strip(), 0
    tags = {s.task_id: json.loads(s.tags or "[]") for s in db.list_seeds()}
    for tid in task_ids:
        old = tags.get(tid)
        if old is None or (tag in old) == add:
            continue
        changed += db.set_seed_tags(tid, [*old, tag] if add else [t for t in old if t != tag])
    return changed


def seed_frame(db: ControlDB) -> pd.DataFrame:
    """task_id, enabled, tags (comma separated), source, category, turns, calls, added_at."""
    rows = []
    for s in db.list_seeds():
        rec = json.loads(s.record) if s.record else {}
        rows.append(
            {
                "task_id": s.task_id,
                "enabled": bool(s.enabled),
                "tags": ", ".join(json.loads(s.tags or "[]")),
                "source": s.source,
                "category": rec.get("category", ""),
                "turns": len(rec.get("question", [])),
                "calls": sum(len(c) for c in rec.get("ground_truth", [])),
                "added_at": s.added_at,
            }
        )
    return pd.DataFrame(
        rows, columns=["task_id", "enabled", "tags", "source", "category", "turns", "calls", "added_at"]
    )


def catalog_tasks(db: ControlDB, task_ids: Iterable[str]) -> list[Task]:
    """The catalog's tasks for these ids, in the given order; unknown ids raise KeyError."""
    seeds = {s.task_id: s for s in db.list_seeds()}
    builtin = None
    out = []
    for tid in task_ids:
        if tid not in seeds:
            raise KeyError(f"{tid!r} is not in the seed catalog")
        task = seeds[tid].task()
        if task is None:
            if builtin is None:
                from rods_core.seeds import load_seeds

                builtin = {t.id: t for t in load_seeds("all")}
            task = builtin[tid]
        out.append(task)
    return out


def write_subset(db: ControlDB, task_ids: Iterable[str], path: str | Path) -> int:
    """Write the chosen seeds as a JSONL a run reads with seeds.subset=file; returns lines."""
    tasks = catalog_tasks(db, task_ids)
    if not tasks:
        raise ValueError("choose at least one seed")
    return write_tasks(path, tasks)

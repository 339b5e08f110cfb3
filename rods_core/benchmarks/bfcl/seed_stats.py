"""Descriptive statistics of a task set (the app's Seeds page and `rods seeds stats`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.tasks import Task


def task_rows(tasks: Iterable[Task]) -> list[dict]:
    """One flat row per task: id, category, classes, turns, calls, depth, topology hash, source."""
    rows = []
    for t in tasks:
        s = signature(t).summary()
        rows.append(
            {
                "id": t.id,
                "category": t.category,
                "class_combo": s["class_combo"],
                "turns": t.n_turns,
                "calls": t.n_calls,
                "depth": s["depth"],
                "topology_hash": s["topology_hash"],
                "source": t.provenance.source,
            }
        )
    return rows


def seed_stats(tasks: Iterable[Task]) -> dict:
    rows = task_rows(tasks)

    def count(key: str) -> dict:
        return dict(sorted(Counter(r[key] for r in rows).items(), key=lambda kv: (-kv[1], str(kv[0]))))

    return {
        "tasks": len(rows),
        "by_category": count("category"),
        "by_class_combo": count("class_combo"),
        "by_depth": dict(sorted(Counter(r["depth"] for r in rows).items())),
    }

"""The near-duplicate audit of held-out sets (docs/experiments/pool-replicates/design.md): how close each held-out
task is to the nearest task a run trained on, by the Jaccard similarity of its ground truth's calls as
`function(argument=value)` items and of its function names alone, summarised as a distribution and the count at or
above a threshold. Pure functions over tasks, and one reader of a run's training tasks from its folder.

No held-out task equals a training task by content (synthesis.exclude refuses those); this measures how near the
ones that differ come. A call that does not parse counts as one opaque item (its text), never as no call.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.benchmarks.task_files import read_tasks
from rods_core.benchmarks.toolcalls.parsing import CallParseError, parse_python_calls
from storage.reader import RunReader

THRESHOLD = 0.8  # the design's count of held-out tasks "at or above 0.8"
QUANTILES = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)


def call_items(task: TaskRecord) -> frozenset[str]:
    """Every `function(argument=value)` of the task's ground truth (positional arguments by position; a call
    without arguments as `function()`); values by their Python repr, so quoting never matters."""
    items = set()
    for call in _calls(task):
        if isinstance(call, str):
            items.add(call)
            continue
        args = [(str(i), v) for i, v in enumerate(call.args)] + list(call.kwargs.items())
        items.update([f"{call.name}({k}={v!r})" for k, v in args] or [f"{call.name}()"])
    return frozenset(items)


def function_names(task: TaskRecord) -> frozenset[str]:
    """The function names the task's ground truth calls."""
    return frozenset(c if isinstance(c, str) else c.name for c in _calls(task))


def _calls(task: TaskRecord) -> list:
    out = []
    for turn in task.ground_truth:
        for text in turn:
            try:
                out += parse_python_calls(text)
            except CallParseError:
                out.append(text)
    return out


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a & b| / |a | b|; two empty sets are the same set (1.0)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def nearest(held: list[TaskRecord], training: list[TaskRecord]) -> dict[str, tuple[float, float]]:
    """Per held-out task id: (the highest item similarity, the highest name similarity) over the training tasks,
    each measure's nearest found apart; (0, 0) against no training task."""
    train = [(call_items(t), function_names(t)) for t in training]
    out = {}
    for task in held:
        items, names = call_items(task), function_names(task)
        out[task.id] = (
            max((jaccard(items, ti) for ti, _ in train), default=0.0),
            max((jaccard(names, tn) for _, tn in train), default=0.0),
        )
    return out


def distribution(values: list[float], threshold: float = THRESHOLD) -> dict:
    """n, mean, the QUANTILES (nearest rank) and the count at or above `threshold` of similarities."""
    v = sorted(values)
    if not v:
        return {"n": 0, "mean": math.nan, "quantiles": {}, "at_or_above": 0, "threshold": threshold}
    qs = {str(q): v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))] for q in QUANTILES}
    return {
        "n": len(v),
        "mean": sum(v) / len(v),
        "quantiles": qs,
        "at_or_above": sum(x >= threshold for x in v),
        "threshold": threshold,
    }


def audit(sets: dict[str, list[TaskRecord]], training: list[TaskRecord], threshold: float = THRESHOLD) -> dict:
    """Per held-out set: each task's nearest similarities (`nearest`: id -> [items, names]) and the distribution
    of each measure (`items`, `names`)."""
    out = {}
    for name, held in sets.items():
        near = nearest(held, training)
        out[name] = {
            "nearest": {k: [round(a, 4), round(b, 4)] for k, (a, b) in near.items()},
            "items": distribution([a for a, _ in near.values()], threshold),
            "names": distribution([b for _, b in near.values()], threshold),
        }
    return out


def below(audited: dict, threshold: float = THRESHOLD) -> set[str]:
    """The ids of an audited set's tasks whose nearest item similarity is below `threshold`."""
    return {k for k, (items, _) in audited["nearest"].items() if items < threshold}


def training_tasks(run_dir: Path, pool: list[TaskRecord], seeds_file: Path | None = None) -> list[TaskRecord]:
    """The tasks a run trained on: its pool's seeds and every other task it played in a group (task_stats), their
    content read from its accepted variant events or, for an offline arm, its seeds file, by the pool's task model."""
    kind = type(pool[0]) if pool else None
    reader = RunReader(run_dir)
    played = set(reader.query("SELECT DISTINCT task_id FROM task_stats").task_id)
    known = {t.id: t for t in pool}
    if kind is not None and seeds_file is not None and Path(seeds_file).is_file():
        known.update({t.id: t for t in read_tasks(seeds_file, kind)})
    if kind is not None and reader.counts().get("variant"):
        rows = reader.query(
            "SELECT variant_id, any_value(task) AS task FROM variant WHERE accepted GROUP BY variant_id"
        )
        for r in rows.itertuples():
            if r.variant_id in played and r.variant_id not in known and r.task:
                known[r.variant_id] = kind.model_validate(json.loads(r.task) if isinstance(r.task, str) else r.task)
    return [*pool, *(t for i, t in sorted(known.items()) if i in played and i not in {p.id for p in pool})]

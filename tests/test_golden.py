"""The golden check (bench/golden.py) over two small event logs: identical runs pass; a float one ulp apart, a
row more or a field only one run filled fail; wall-clock columns never count, and a column a change adds can be
left out by name."""

from __future__ import annotations

import math

from bench.golden import compare, main
from storage.events import EventLog


def log(run, steps: list[dict], evals: list[dict]):
    ev = EventLog(run)
    ev.append("step", steps)
    ev.append("eval", evals)
    ev.flush()
    ev.close()
    return run


def step(i: int, reward: float, wall: float) -> dict:
    return {"step": i, "wall_s": wall, "time/step_s": wall, "reward/mean": reward}


def evals(per_task: dict | None = None) -> list[dict]:
    row = {"step": 2, "split": "variants", "accuracy": 0.5, "progress": 0.25, "tasks": 4}
    return [{**row, **({"per_task": per_task} if per_task is not None else {})}]


def test_identical_runs_pass_and_wall_clock_never_counts(tmp_path):
    a = log(tmp_path / "a", [step(1, 0.5, 1.0), step(2, 0.6, 2.0)], evals())
    b = log(tmp_path / "b", [step(1, 0.5, 9.0), step(2, 0.6, 7.0)], evals())
    assert compare(a, b, ("step", "eval")) == {"step": [], "eval": []}
    assert main([str(a), str(b), "--tables", "step,eval"]) == 0


def test_one_ulp_a_missing_row_or_an_added_column_differ(tmp_path):
    a = log(tmp_path / "a", [step(1, 0.5, 1.0), step(2, 0.6, 2.0)], evals())
    ulp = log(tmp_path / "ulp", [step(1, 0.5, 1.0), step(2, math.nextafter(0.6, 1.0), 2.0)], evals())
    short = log(tmp_path / "short", [step(1, 0.5, 1.0)], evals())
    added = log(tmp_path / "added", [step(1, 0.5, 1.0), step(2, 0.6, 2.0)], evals({"t1": 0.25}))
    assert compare(a, ulp, ("step",))["step"][0].startswith("row 1 reward/mean")
    assert compare(a, short, ("step",))["step"] == ["rows: 2 vs 1"]
    assert compare(a, added, ("eval",))["eval"] == ["""row 0 per_task: None vs '{"t1": 0.25}'"""]  # null before
    assert compare(a, added, ("eval",), ignore=("per_task",)) == {"eval": []}
    assert main([str(a), str(ulp), "--tables", "step"]) == 1

"""The near-duplicate audit (rods_lab.experiments.audit): call items and function names of a task's ground truth, Jaccard
similarity, each held-out task's nearest training task by each measure, and the distribution with its count at or
above 0.8; table-driven on hand-made tasks."""

from __future__ import annotations

import math

import pytest

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_lab.experiments.audit import audit, below, call_items, distribution, function_names, jaccard, nearest


def task(tid: str, *turns: list[str]):
    return demo_seeds()[0].model_copy(update={"id": tid, "ground_truth": [list(t) for t in turns]})


@pytest.mark.parametrize(
    "turns, items, names",
    [
        ((["cd(folder='a')"],), {"cd(folder='a')"}, {"cd"}),
        ((['cd(folder="a")'], ["ls()"]), {"cd(folder='a')", "ls()"}, {"cd", "ls"}),  # quoting never matters
        ((["mv(source='x', destination='y')"],), {"mv(source='x')", "mv(destination='y')"}, {"mv"}),
        ((["f(1, b=[1, 2])"],), {"f(0=1)", "f(b=[1, 2])"}, {"f"}),  # positional arguments by position
        ((["cd(folder='a')", "cd(folder='a')"],), {"cd(folder='a')"}, {"cd"}),  # a set: repeats count once
        ((["not a call("],), {"not a call("}, {"not a call("}),  # unparsed: one opaque item
    ],
)
def test_call_items_and_function_names(turns, items, names):
    t = task("t", *turns)
    assert call_items(t) == items and function_names(t) == names


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ({"x"}, {"x"}, 1.0),
        ({"x"}, {"y"}, 0.0),
        ({"x", "y"}, {"y", "z"}, 1 / 3),
        (set(), set(), 1.0),
        ({"x"}, set(), 0.0),
    ],
)
def test_jaccard(a, b, expected):
    assert jaccard(frozenset(a), frozenset(b)) == pytest.approx(expected)


def test_nearest_takes_each_measures_best_training_task_apart():
    held = task("h", ["cd(folder='a')", "ls(a=True)"])
    same_names = task("n", ["cd(folder='zz')", "ls(a=False)"])  # names 1.0, items 0.0
    half_items = task("i", ["cd(folder='a')", "pwd()"])  # items 1/3, names 1/3
    assert nearest([held], [same_names, half_items]) == {"h": (pytest.approx(1 / 3), 1.0)}
    assert nearest([held], []) == {"h": (0.0, 0.0)}


@pytest.mark.parametrize(
    "values, n, at_or_above, median",
    [([0.1, 0.5, 0.8, 0.9], 4, 2, 0.5), ([0.79], 1, 0, 0.79), ([1.0, 1.0, 0.2], 3, 2, 1.0)],
)
def test_distribution_counts_at_or_above_the_threshold(values, n, at_or_above, median):
    d = distribution(values)
    assert (d["n"], d["at_or_above"], d["quantiles"]["0.5"]) == (n, at_or_above, median)
    assert d["quantiles"]["0.0"] == min(values) and d["quantiles"]["1.0"] == max(values)


def test_an_empty_set_has_no_distribution():
    d = distribution([])
    assert d["n"] == 0 and math.isnan(d["mean"]) and d["at_or_above"] == 0


def test_audit_per_set_and_the_tasks_below_the_threshold():
    training = [task("s", ["cd(folder='a')", "ls()"])]
    sets = {"H1": [task("copy", ["cd(folder='a')", "ls()"]), task("far", ["pwd()"])], "H1b": [task("x", ["ls()"])]}
    got = audit(sets, training)
    assert got["H1"]["nearest"] == {"copy": [1.0, 1.0], "far": [0.0, 0.0]}
    assert got["H1"]["items"]["at_or_above"] == 1 and got["H1b"]["names"]["quantiles"]["1.0"] == 0.5
    assert below(got["H1"]) == {"far"}

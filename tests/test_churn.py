"""Pool churn (rods_lab.experiments.churn) on synthetic buffer events, groups and step rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rods_lab.experiments.churn import churn_methods, churn_runs, depletion, groups_before_retirement, retired_per_step


def _buffer(run: str, method: str, events: list[tuple]) -> pd.DataFrame:
    cols = ["step", "task_id", "from_pool", "to_pool", "reason"]
    return pd.DataFrame(events, columns=cols).assign(run=run, method=method)


def _groups(run: str, plays: list[tuple[int, str]]) -> pd.DataFrame:
    return pd.DataFrame(plays, columns=["step", "task_id"]).assign(run=run)


def _steps(run: str, method: str, active: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"step": range(1, len(active) + 1), "pool_active": active, "run": run, "method": method})


# A one-shot buffer: v1 probed once and retired; v2 promoted, played twice more, retired at its first flat group.
ONE_SHOT = _buffer(
    "rods_r0",
    "rods",
    [
        (1, "v1", None, "staged", "offer/staged"),
        (1, "v2", None, "staged", "offer/staged"),
        (2, "v1", "staged", "retired", "probe/hard"),
        (2, "v2", "staged", "active", "promote/boundary"),
        (4, "v2", "active", "retired", "retire/mastered"),
        (4, "s1", "active", "dormant", "dormant/mastered"),
    ],
)
ONE_SHOT_GROUPS = _groups("rods_r0", [(1, "s1"), (2, "v1"), (2, "v2"), (3, "v2"), (4, "v2"), (4, "s1"), (5, "v2")])


def test_groups_before_retirement_counts_the_groups_up_to_the_retiring_step():
    played = groups_before_retirement(ONE_SHOT, ONE_SHOT_GROUPS)
    assert dict(zip(played.task_id, played.groups, strict=True)) == {"v1": 1, "v2": 3}
    assert set(played.reason) == {"probe/hard", "retire/mastered"}


def test_retired_per_step_fills_steps_without_retirements_with_zero():
    per = retired_per_step(ONE_SHOT, _steps("rods_r0", "rods", [2, 3, 3, 2]))
    assert per.retired.tolist() == [0, 1, 0, 1]


def test_churn_runs_summarises_each_run_and_a_static_run_retires_nothing():
    buffer = pd.concat([ONE_SHOT, _buffer("static_r0", "static", [])], ignore_index=True)
    steps = pd.concat([_steps("rods_r0", "rods", [2, 3, 3, 2]), _steps("static_r0", "static", [4, 4, 4, 4])])
    runs = churn_runs(buffer, ONE_SHOT_GROUPS, steps).set_index("run")
    rods = runs.loc["rods_r0"]
    assert rods.retired_per_step == 0.5 and rods.groups_per_retired == 2.0
    assert rods.one_shot_share == 0.5 and rods.probe_retired_share == 0.5
    assert (rods.active_mean, rods.active_min, rods.active_max) == (2.5, 2.0, 3.0)
    static = runs.loc["static_r0"]
    assert static.retired_per_step == 0.0 and math.isnan(static.groups_per_retired)


def test_churn_methods_gives_an_interval_over_runs():
    buffer = pd.concat([ONE_SHOT, ONE_SHOT.assign(run="rods_r1")], ignore_index=True)
    groups = pd.concat([ONE_SHOT_GROUPS, ONE_SHOT_GROUPS.assign(run="rods_r1").iloc[:3]], ignore_index=True)
    steps = pd.concat([_steps("rods_r0", "rods", [2, 3, 3, 2]), _steps("rods_r1", "rods", [2, 2, 2, 2])])
    table = churn_methods(churn_runs(buffer, groups, steps)).set_index("metric")
    assert table.at["groups_per_retired", "n"] == 2
    assert table.at["groups_per_retired", "mean"] == pytest.approx((2.0 + 1.0) / 2)  # r1 saw v2 played once
    assert table.at["groups_per_retired", "ci95"] > 0


def test_depletion_says_whether_the_share_fell_by_a_third():
    runs = pd.DataFrame(
        {"run": ["static_r0", "static_r1", "rods_r0"], "method": ["static", "static", "rods"],
         "informative_share_first_half": [0.6, 0.3, 0.5], "informative_share_last_half": [0.3, 0.3, 0.5]}
    )  # fmt: skip
    d = depletion(runs, "static")
    assert d["per_run"] == {"static_r0": pytest.approx(0.5), "static_r1": pytest.approx(0.0)}
    assert d["fall"] == pytest.approx(0.25) and d["fell_by_third"] is False and d["n"] == 2
    assert depletion(runs[runs.run == "static_r0"], "static")["fell_by_third"] is True
    assert depletion(runs, "dapo_filter") == {}

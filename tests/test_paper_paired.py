"""Paired views of held-out progress (rods_lab.experiments.paired) on synthetic frames: the per-seed difference curve and its
paired t band, which arms are read against which reference, and the distinct synthesized tasks by each evaluation."""

from __future__ import annotations

import pandas as pd
import pytest

from rods_lab.experiments.paired import distinct_tasks, paired_curve, paired_curves, reference_pairs


def _evals(curves: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"run": f"{arm}_r{seed}", "method": arm, "seed": seed, "step": 2 * j, "trajectories": 20.0 * j,
          "progress": y} for (arm, seed), ys in curves.items() for j, y in enumerate(ys)]
    )  # fmt: skip


def test_the_difference_curve_pairs_by_seed_and_a_shared_seed_level_leaves_no_spread():
    # seed levels differ by 0.2 but rods is +0.05 over static in each: the paired band is a point
    ev = _evals({("rods", 0): [0.1, 0.25], ("rods", 1): [0.3, 0.45], ("static", 0): [0.1, 0.2],
                 ("static", 1): [0.3, 0.4], ("static", 2): [0.5, 0.6], ("rods", 3): [0.0, 0.9]})  # fmt: skip
    c = paired_curve(ev, "rods", "static")
    assert list(c.step) == [0, 2] and list(c.n) == [2, 2]  # seeds 2 and 3 ran one arm only
    assert c["diff"].tolist() == pytest.approx([0.0, 0.05])
    assert (c.lo.iat[1], c.hi.iat[1]) == (pytest.approx(0.05), pytest.approx(0.05)) and c.above.iat[1] == 2
    # spread within seeds widens it: differences 0.04, 0.06 -> 12.706 x 0.01414 / sqrt(2) = 0.127
    ev.loc[(ev.run == "rods_r1") & (ev.step == 2), "progress"] = 0.46
    ev.loc[(ev.run == "rods_r0") & (ev.step == 2), "progress"] = 0.24
    c = paired_curve(ev, "rods", "static")
    assert c.hi.iat[1] - c["diff"].iat[1] == pytest.approx(12.706 * 0.01, abs=1e-4)


def test_every_arm_is_read_against_static_and_the_online_arms_against_each_offline_arm():
    arms = ["rods", "static", "uniform_parents", "offline_small", "offline_large"]
    assert reference_pairs(arms) == [
        ("rods", "static"), ("uniform_parents", "static"), ("offline_small", "static"), ("offline_large", "static"),
        ("rods", "offline_small"), ("uniform_parents", "offline_small"),
        ("rods", "offline_large"), ("uniform_parents", "offline_large"),
    ]  # fmt: skip
    assert reference_pairs(["rods"]) == [] and reference_pairs(["rods", "offline_small"]) == [("rods", "offline_small")]
    ev = _evals({("rods", 0): [0.1, 0.3], ("static", 0): [0.1, 0.2]})
    assert list(paired_curves(ev)) == ["static"]


def test_distinct_tasks_count_first_entries_into_training_and_an_offline_run_holds_its_m_from_the_start():
    ev = _evals({("rods", 0): [0.1, 0.2, 0.3], ("offline_small", 0): [0.1, 0.2, 0.3], ("static", 0): [0.1, 0.1, 0.1]})
    groups = pd.DataFrame(
        [("rods_r0", 1, "s1"), ("rods_r0", 1, "v1"), ("rods_r0", 2, "v1"), ("rods_r0", 3, "v2"), ("rods_r0", 4, "v1"),
         ("static_r0", 1, "s1"), ("offline_small_r0", 1, "o1")], columns=["run", "step", "task_id"]
    )  # fmt: skip
    dt = distinct_tasks(ev, groups, {"s1"}, {"offline_small_r0": 5})
    got = {(r.run, r.step): r.distinct_synthesized for r in dt.itertuples()}
    assert [got[("rods_r0", s)] for s in (0, 2, 4)] == [0, 1, 2]  # v1 at step 1 counts once
    assert [got[("static_r0", s)] for s in (0, 2, 4)] == [0, 0, 0]
    assert [got[("offline_small_r0", s)] for s in (0, 2, 4)] == [5, 5, 5]
    assert distinct_tasks(ev, groups, set(), {}).empty  # no pool recorded: a seed cannot be told from a variant

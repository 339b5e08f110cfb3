"""Sample-efficiency curves and the cost to reach a target (rods_lab.experiments.efficiency), on synthetic frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rods_lab.experiments.efficiency import (
    at_equal_cost,
    attach_costs,
    curve_band,
    describe_reach,
    eval_cost,
    first_reach,
    reach_cost,
    reach_table,
    run_matrix,
)


def _evals(curves: dict[str, list[list[float]]], per_step: int = 10) -> pd.DataFrame:
    """Eval rows at steps 0, 1, 2, ... of runs <method>_r<k> with the given progress curves."""
    rows = []
    for method, runs in curves.items():
        for k, ys in enumerate(runs):
            for step, y in enumerate(ys):
                rows.append(
                    {"run": f"{method}_r{k}", "method": method, "seed": k, "step": step,
                     "trajectories": step * per_step, "progress": y, "accuracy": y / 2}
                )  # fmt: skip
    return pd.DataFrame(rows)


def test_first_reach_interpolates_between_points_and_is_inf_when_never_reached():
    x, y = np.array([0.0, 10, 20]), np.array([0.1, 0.3, 0.5])
    assert first_reach(x, y, 0.2) == pytest.approx(5.0)
    assert first_reach(x, y, 0.5) == pytest.approx(20.0)
    assert first_reach(x, y, 0.05) == 0.0
    assert first_reach(x, y, 0.6) == math.inf
    # the first crossing counts, even when the curve dips below the target afterwards
    assert first_reach(np.array([0.0, 10, 20]), np.array([0.0, 0.4, 0.1]), 0.2) == pytest.approx(5.0)


def test_rods_reaching_statics_final_score_at_half_the_trajectories_gives_a_fraction_of_one_half():
    ev = _evals(
        {
            "rods": [[0.1, 0.3, 0.5, 0.5, 0.5], [0.1, 0.3, 0.5, 0.5, 0.5]],
            "static": [[0.1, 0.2, 0.25, 0.27, 0.3], [0.1, 0.2, 0.25, 0.27, 0.3]],
        }
    )
    r = reach_cost(ev, "rods", "static", boots=200)
    assert r.target == pytest.approx(0.3)
    assert r.reached_at == pytest.approx(10.0) and r.reference_total == pytest.approx(40.0)
    assert r.fraction == pytest.approx(0.25)
    assert r.ci95 == pytest.approx((0.25, 0.25))  # identical runs: no spread
    assert r.reached_share == 1.0 and r.n == (2, 2)
    assert "0.25 of its trajectories consumed" in describe_reach(r) and "under the goal" in describe_reach(r)


def test_a_method_that_never_reaches_the_target_is_reported_as_such_with_an_infinite_fraction():
    ev = _evals({"rods": [[0.1, 0.15, 0.2]], "static": [[0.1, 0.2, 0.4]]})
    r = reach_cost(ev, "rods", "static", boots=100)
    assert r.fraction == math.inf and r.reached_share == 0.0
    assert "never reached" in describe_reach(r)


def test_the_reach_interval_widens_with_run_to_run_spread_and_resamples_whole_runs():
    ev = _evals(
        {
            "rods": [[0.1, 0.4, 0.5], [0.1, 0.1, 0.35], [0.1, 0.3, 0.4], [0.1, 0.2, 0.45]],
            "static": [[0.1, 0.2, 0.3], [0.1, 0.25, 0.35], [0.1, 0.2, 0.25], [0.1, 0.3, 0.3]],
        }
    )
    r = reach_cost(ev, "rods", "static", boots=500)
    lo, hi = r.ci95
    assert lo < r.fraction < hi
    assert 0 < lo and hi <= 1.0


def test_a_method_already_above_the_target_before_training_is_not_called_efficient():
    ev = _evals({"rods": [[0.5, 0.5]], "static": [[0.1, 0.3]]})
    assert "say nothing" in describe_reach(reach_cost(ev, boots=50))


def test_curve_band_gives_the_mean_curve_and_a_band_that_holds_it():
    ev = _evals({"rods": [[0.1, 0.3], [0.3, 0.5], [0.2, 0.4]]})
    band = curve_band(ev, "progress", boots=300)
    assert list(band.step) == [0, 1] and list(band.n) == [3, 3]
    assert band.progress.tolist() == pytest.approx([0.2, 0.4])
    assert (band.lo <= band.progress).all() and (band.progress <= band.hi).all() and (band.lo < band.hi).all()
    single = curve_band(_evals({"static": [[0.1, 0.2]]}), "progress")
    assert (single.lo == single.progress).all() and (single.hi == single.progress).all()


def test_run_matrix_keeps_only_the_evaluation_points_every_run_reached():
    ev = _evals({"rods": [[0.1, 0.2, 0.3], [0.1, 0.2]]})
    steps, X, Y = run_matrix(ev, "rods", "progress", "trajectories")
    assert steps.tolist() == [0, 1] and Y.shape == (2, 2) and X[:, 1].tolist() == [10, 10]


def test_attach_costs_adds_the_tokens_and_step_seconds_spent_by_each_evaluation():
    steps = pd.DataFrame(
        {"run": ["a"] * 3, "method": ["rods"] * 3, "step": [1, 2, 3], "tokens": [100.0, 150.0, 50.0],
         "step_s": [2.0, 3.0, 1.0]}
    )  # fmt: skip
    ev = pd.DataFrame({"run": ["a", "a", "a"], "method": ["rods"] * 3, "step": [0, 2, 3], "progress": [0.1, 0.2, 0.3]})
    out = attach_costs(ev, steps)
    assert out.tokens.tolist() == [0.0, 250.0, 300.0] and out.train_s.tolist() == [0.0, 5.0, 6.0]
    axes = [r.axis for r in reach_table(out.assign(trajectories=out.step * 10), "rods", "rods", boots=20)]
    assert axes == ["trajectories", "tokens", "train_s"]


def test_reach_on_tokens_charges_a_method_whose_steps_generate_more():
    # rods reaches static's final score at step 2 of 4 (half the trajectories), but its steps generate 3x the tokens
    ev = _evals({"rods": [[0.1, 0.2, 0.3, 0.3, 0.3]], "static": [[0.1, 0.15, 0.2, 0.25, 0.3]]})
    steps = pd.DataFrame(
        [{"run": r, "method": m, "step": s, "tokens": t, "step_s": 1.0} for r, m, t in
         (("rods_r0", "rods", 300.0), ("static_r0", "static", 100.0)) for s in range(1, 5)]
    )  # fmt: skip
    ev = attach_costs(ev, steps)
    by_axis = {r.axis: r.fraction for r in reach_table(ev, boots=20)}
    assert by_axis["trajectories"] == pytest.approx(0.5) and by_axis["tokens"] == pytest.approx(1.5)


def test_eval_cost_is_the_time_from_the_step_row_to_the_eval_event():
    t0 = pd.Timestamp("2026-01-01T00:00:00Z")
    ev = pd.DataFrame(
        {"run": ["a", "a"], "method": ["rods"] * 2, "step": [0, 2], "time": [t0, t0 + pd.Timedelta(seconds=30)]}
    )
    steps = pd.DataFrame(
        {"run": ["a", "a"], "step": [1, 2], "time": [t0 + pd.Timedelta(seconds=5), t0 + pd.Timedelta(seconds=20)]}
    )
    assert eval_cost(ev, steps).to_dict("records") == [{"run": "a", "method": "rods", "step": 2, "eval_s": 10.0}]


def test_at_equal_cost_reads_every_run_at_the_least_any_run_spent():
    ev = pd.DataFrame(
        {"run": ["a"] * 3 + ["b"] * 3, "step": [0, 1, 2] * 2, "tokens": [0, 100, 200, 0, 300, 600],
         "progress": [0.0, 0.2, 0.4, 0.0, 0.3, 0.6]}
    )  # fmt: skip
    values, common = at_equal_cost(ev, "progress", "tokens")
    assert common == 200.0
    assert dict(zip(values.run, values.value, strict=True)) == pytest.approx({"a": 0.4, "b": 0.2})


def test_the_reach_interval_is_paired_by_run_seed_when_both_methods_ran_the_same_seeds():
    # seed levels differ widely; rods reaches static's final at half its trajectories in every seed
    levels = [0.1, 0.4, 0.2, 0.5]
    ev = _evals(
        {
            "rods": [[v, v + 0.2, v + 0.2] for v in levels],
            "static": [[v, v + 0.1, v + 0.2] for v in levels],
        }
    )
    paired = reach_cost(ev, "rods", "static", boots=400)
    unpaired = reach_cost(ev.assign(seed=ev.seed + 10 * (ev.method == "rods")), "rods", "static", boots=400)
    assert paired.paired and not unpaired.paired and paired.fraction == unpaired.fraction == pytest.approx(0.5)
    assert paired.ci95 == pytest.approx((0.5, 0.5))  # one shift per seed: no spread left once paired
    assert unpaired.ci95[1] - unpaired.ci95[0] > 0.1
    assert "paired bootstrap over run seeds" in describe_reach(paired)

"""rods_lab.compare and charts.by_run: the Compare page's x axes, held-out intervals and smoothed curves."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rods_core.statistics import wilson
from rods_lab import charts, compare
from rods_lab.results import Frames


def test_t_band_is_the_mean_plus_minus_t_sd_over_root_n_clipped():
    lo, hi = compare.t_band(0.5, 0.2, 19)
    assert hi - 0.5 == pytest.approx(2.101 * 0.2 / math.sqrt(19), abs=1e-3) and lo == pytest.approx(1 - hi)
    assert compare.t_band(0.98, 0.3, 4)[1] == 1.0
    assert all(math.isnan(v) for v in compare.t_band(0.5, None, 19) + compare.t_band(0.5, 0.1, 1))


def frames() -> Frames:
    steps = pd.DataFrame(
        {
            "run": ["a", "a", "a", "b"],
            "step": [1, 2, 3, 1],
            "trajectories_total": [12.0, 24.0, 36.0, 12.0],
            "tokens": [100.0, 200.0, float("nan"), 50.0],
            "step_s": [2.0, 3.0, 4.0, 1.0],
            "informative_share": [0.1, 0.9, 0.2, 0.5],
        }
    )
    evals = pd.DataFrame(
        {
            "run": ["a", "a", "b"],
            "step": [0, 2, 0],
            "trajectories": [0, 24, 0],
            "accuracy": [0.0, 10 / 19, 0.5],
            "progress": [0.2, 0.5, 0.5],
            "tasks": [19, 19, None],  # b: a log from before the size was recorded
            "progress_sd": [0.1, 0.2, None],
        }
    )
    return Frames(evals, steps, pd.DataFrame(), pd.DataFrame())


def test_every_axis_is_cumulative_per_run_and_evaluations_sit_at_their_step():
    f = compare.with_axes(frames())
    a = f.steps[f.steps.run == "a"]
    assert a.tokens_total.tolist() == [100.0, 300.0, 300.0] and a.seconds_total.tolist() == [2.0, 5.0, 9.0]
    ev = f.evals.set_index(["run", "step"])
    assert ev.loc[("a", 2), ["trajectories_total", "tokens_total", "seconds_total"]].tolist() == [24, 300, 5]
    assert ev.loc[("a", 0), "tokens_total"] == 0.0  # before the first step
    assert ev.loc[("a", 2), "accuracy_lo"] == pytest.approx(0.3171, abs=1e-4)
    assert math.isnan(ev.loc[("b", 0), "accuracy_lo"])  # no size, no band
    assert compare.held_out_note(f.evals, "Wilson") == (
        "19 held-out tasks; band: 95% Wilson interval; 1 run(s) recorded no held-out size"
    )


def test_smoothed_curves_keep_the_raw_points_faint_and_bands_shade_each_run():
    f = compare.with_axes(frames())
    fig = charts.by_run(f.steps, "seconds_total", "informative_share", "t", smooth=2, x_title="seconds")
    raw = [t for t in fig.data if t.mode == "markers"]
    lines = [t for t in fig.data if t.mode != "markers"]  # b's one point keeps its marker: a lone line draws nothing
    assert {t.opacity for t in raw} == {0.25} and [t.mode for t in lines] == ["lines", "lines+markers"]
    a = next(t for t in lines if t.name == "a")
    assert list(a.y) == pytest.approx([0.1, 0.5, 0.55])  # trailing mean of 2
    assert fig.layout.xaxis.title.text == "seconds" and "rolling mean of 2" in fig.layout.yaxis.title.text
    banded = charts.by_run(f.evals, "trajectories_total", "accuracy", "t", band=("accuracy_lo", "accuracy_hi"))
    assert [t.fill for t in banded.data].count("toself") == 1  # run a only: b recorded no size


def test_a_run_with_one_evaluation_shows_its_interval_as_an_error_bar_not_a_band():
    """At step 0 a run has one held-out point: no area to shade, so its Wilson interval is an error bar (a
    band's polygon would collapse to dots at its ends); two or more points shade a band drawn without markers."""
    f = compare.with_axes(frames())
    one = f.evals[(f.evals.run == "a") & (f.evals.step == 0)]
    fig = charts.by_run(one, "trajectories_total", "accuracy", "t", band=("accuracy_lo", "accuracy_hi"))
    (point,) = fig.data
    lo, hi = wilson(0, 19)
    assert point.mode == "lines+markers" and list(point.error_y.array) == pytest.approx([hi])
    assert list(point.error_y.arrayminus) == pytest.approx([0.0 - lo])
    two = f.evals[f.evals.run == "a"]
    band, line = charts.by_run(two, "trajectories_total", "accuracy", "t", band=("accuracy_lo", "accuracy_hi")).data
    assert band.fill == "toself" and band.mode == "lines" and line.error_y.array is None

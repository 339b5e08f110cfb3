"""The Compare page: runs of the lab side by side, and a `rods bench curriculum` experiment's tables."""

from __future__ import annotations

import json

from app_helpers import RUN_ID, page


def test_compare_plots_the_runs(app_env):
    at = page("pages/6_Compare.py").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 5  # accuracy, progress, informative share, training reward, pool
    at.multiselect(key="compare_runs").set_value([RUN_ID]).run()
    assert not at.exception
    assert at.dataframe[0].value.run.tolist() == [RUN_ID]  # one summary row per chosen run


def test_compare_reads_a_curriculum_experiment(app_env, tmp_path, monkeypatch):
    from test_bench import write_run

    for name in ("20260101-000000", "20260102-000000"):
        runs = tmp_path / name / "runs"
        write_run(runs, "rods-r0", "rods", 0, [0.2, 0.4, 0.6, 0.8], [0.1, 0.3, 0.5], [(1, "boundary", 0.2)])
        write_run(runs, "static-r0", "static", 0, [0.3, 0.3, 0.2, 0.2], [0.1, 0.2, 0.2], [(1, "hard", 0.1)])
    monkeypatch.setenv("RODS_EXPERIMENTS", str(tmp_path))
    at = page("pages/6_Compare.py").run()
    at.radio(key="compare_source").set_value("a curriculum experiment").run()
    assert not at.exception
    assert at.selectbox(key="compare_experiment").value.name == "20260102-000000"  # the newest first
    assert len(at.get("plotly_chart")) == 5
    runs, methods, goals = (d.value for d in at.dataframe)
    assert sorted(runs.run) == ["rods-r0", "static-r0"]
    assert methods.loc["informative_share_last_half", "rods"].startswith("0.700")  # mean of 0.6 and 0.8
    ratio_goal = goals[goals.goal.str.startswith("informative share (last half): rods / static")]
    assert len(ratio_goal) == 1 and "paired 95% CI (Fieller) n/a: fewer than 2" in ratio_goal.detail.iat[0]


def test_compare_smooths_per_step_curves_bands_held_out_ones_and_titles_the_axis(app_env):
    at = page("pages/6_Compare.py")
    at.session_state["compare_runs"] = [RUN_ID]
    at.run()
    assert not at.exception and at.toggle(key="compare_smooth").value  # smoothing is on by default
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    share = next(c for c in charts if c["layout"]["title"]["text"].startswith("Share of informative groups"))
    assert [t.get("opacity") for t in share["data"]] == [0.25, None]  # the raw points, faint, then the mean
    assert "rolling mean of 5" in share["layout"]["yaxis"]["title"]["text"]
    accuracy = next(c for c in charts if c["layout"]["title"]["text"].startswith("Held-out accuracy"))
    assert accuracy["data"][0]["fill"] == "toself"  # the interval band
    assert any(c.value.startswith("2 held-out tasks; band: 95% Wilson interval") for c in at.caption)
    assert accuracy["layout"]["xaxis"]["title"]["text"].startswith("trajectories")
    at.radio(key="compare_axis").set_value("seconds").run()
    at.toggle(key="compare_smooth").set_value(False).run()
    assert not at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert all(c["layout"]["xaxis"]["title"]["text"].startswith("training seconds") for c in charts)
    share = next(c for c in charts if c["layout"]["title"]["text"].startswith("Share of informative groups"))
    assert len(share["data"]) == 1  # raw only

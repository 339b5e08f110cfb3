"""Boundary, Review, Buffer and Compare pages over a real run's store, and every button's effect."""

from __future__ import annotations

import json

from app_helpers import RUN_ID, page

from rods_core import lab
from rods_core.launch import AppPaths, read_prefs


def test_boundary_renders_and_steps_back(app_env):
    at = page("pages/2_Boundary.py").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 5
    at.toggle(key="boundary_follow").set_value(False).run()
    slider = at.select_slider(key="boundary_step")
    assert slider.value == 3
    slider.set_value(1).run()
    assert not at.exception
    combo = at.selectbox(key="boundary_combo")
    assert combo.options[0] == "all" and len(combo.options) > 1
    combo.select(combo.options[1]).run()
    assert not at.exception


def review(reviewer: str = "ana"):
    at = page("pages/3_Review.py")
    at.session_state["review_reviewer"] = reviewer
    return at.run()


def test_review_buttons_write_decisions(app_env):
    _, _, _, run_dir = app_env
    db = AppPaths.from_env().db()
    queue = [i.task.id for i in lab.review_queue(run_dir) if i.status == "awaiting_review"]
    assert len(queue) >= 4
    n = len(db.decisions(RUN_ID))
    at = review()
    assert not at.exception
    first = at.selectbox(key="review_focus").value
    at.button(key="review_focus_approve").click().run()
    assert any("1 decision(s) approve by ana" in s.value for s in at.success)
    at.checkbox(key="review_all").check().run()
    at.button(key="review_bulk_more").click().run()
    assert not at.exception
    got = [(x.task_id, x.action, x.payload_dict(), x.status, x.author) for x in db.decisions(RUN_ID)[n:]]
    assert got[0] == (first, "approve", {}, "pending", "ana")
    assert [g[1:] for g in got[1:]] == [("reseed", {"mode": "synthesize"}, "pending", "ana")] * len(queue)
    assert len({d.batch_id for d in db.decisions(RUN_ID)[n + 1 :]}) == 1


def submit(at, form: str):
    return next(b for b in at.button if b.proto.form_id == form)


def test_review_edit_is_verified_first(app_env):
    db = AppPaths.from_env().db()
    n = len(db.decisions(RUN_ID))
    at = review()
    tid = at.selectbox(key="review_focus").value
    at.button(key="review_focus_edit").click().run()
    at.text_area(key=f"review_c_{tid}_0").input("rm(file_name='no_such_file.txt')")
    submit(at, f"review_fix_{tid}").click().run()
    assert not at.exception
    assert any("Not submitted" in e.value for e in at.error)
    assert len(db.decisions(RUN_ID)) == n  # nothing recorded for a failing edit
    at = review()
    at.button(key="review_focus_edit").click().run()
    said = at.text_area(key=f"review_u_{tid}_0").value
    at.text_area(key=f"review_u_{tid}_0").input(said + " Thanks a lot!")
    submit(at, f"review_fix_{tid}").click().run()
    assert not at.exception and not at.error
    last = db.decisions(RUN_ID)[-1]
    assert (last.task_id, last.action) == (tid, "edit")
    assert last.payload_dict()["task"]["question"][0][0]["content"].endswith("Thanks a lot!")


def test_review_switch_sets_the_mode_for_new_runs(app_env):
    at = page("pages/3_Review.py").run()
    at.toggle(key="review_gated").set_value(True).run()
    assert read_prefs(AppPaths.from_env())["review"] == "gated"
    assert any("launched **gated**" in m.value for m in at.caption)
    at.toggle(key="review_gated").set_value(False).run()
    assert read_prefs(AppPaths.from_env())["review"] == "auto"


def test_buffer_filters_history_and_export(app_env):
    ws, _, _, run_dir = app_env
    at = page("pages/4_Buffer.py").run()
    assert not at.exception
    total = len(lab.pool_table(run_dir))
    at.multiselect(key="buffer_pools").set_value(["staged"]).run()
    staged = len(lab.snapshot(run_dir).tasks("staged"))
    assert any(m.value == f"{staged} of {total} tasks" for m in at.markdown)
    at.selectbox(key="buffer_task").select(at.selectbox(key="buffer_task").options[0]).run()
    assert not at.exception
    at.selectbox(key="buffer_export_pool").select("staged").run()
    lines = (ws / "exports" / f"{RUN_ID}-staged.jsonl").read_text().splitlines()
    assert len(lines) == staged and {json.loads(ln)["pool"] for ln in lines} == {"staged"}
    assert "provenance" in json.loads(lines[0])


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
    assert len(ratio_goal) == 1 and "bootstrap 95% CI" in ratio_goal.detail.iat[0]

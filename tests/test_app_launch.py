"""The Launch page: field errors beside the fields, paths outside the workspace refused, a background run
started (a renamed key noted) and its log shown."""

from __future__ import annotations

from app_helpers import kill_group, page
from polling import wait_until

from rods_lab.paths import AppPaths
from rods_lab.processes import process_alive


def test_launch_shows_field_errors_and_refuses_paths_outside(app_env):
    db = AppPaths.from_env().db()
    before = {r.id for r in db.list_runs()}
    try:
        field_errors_shown()
    finally:  # a refused launch starts nothing; end anything that did start
        new = [r for r in db.list_runs() if r.id not in before]
        for r in new:
            kill_group(r.pid)
    assert not new


def field_errors_shown() -> None:
    at = page("pages/1_Launch.py").run()
    assert not at.exception
    at.text_area(key="launch_more").input("grpo.learning_rate=-1")
    at.button[0].click().run()  # the form's submit button
    assert not at.exception
    assert any("grpo.learning_rate" in e.value and "greater than 0" in e.value for e in at.error)
    at.text_area(key="launch_more").input("")
    at.text_input(key="launch_model").input("/etc")
    at.button[0].click().run()
    assert any("outside the workspace" in e.value for e in at.error)


def test_launch_starts_a_background_run(app_env):
    ws, runs, model, _ = app_env
    db = AppPaths.from_env().db()
    before = {r.id for r in db.list_runs()}
    at = page("pages/1_Launch.py").run()
    at.text_input(key="launch_name").input("launched")
    at.text_input(key="launch_model").input(str(model))
    at.number_input(key="launch_steps").set_value(1)
    at.text_area(key="launch_more").input("synth.seed=5")  # the former section name still works, with a note
    at.button[0].click().run()
    assert not at.exception and not at.error
    assert any("synth.seed was renamed synthesis.seed" in i.value for i in at.info)
    new = [r for r in db.list_runs() if r.id not in before]
    assert len(new) == 1 and new[0].status in ("queued", "running")
    run = new[0]
    try:
        assert process_alive(run.pid, run.proc_start)
        assert (runs / run.id / "launch.yaml").exists()
        assert run.config_dict()["grpo"]["max_steps"] == 1 and run.config_dict()["workspace"] == str(ws)
        assert run.config_dict()["synthesis"]["seed"] == 5 and "synth" not in run.config_dict()
        log = runs / run.id / "train.log"
        wait_until(lambda: log.exists() and log.stat().st_size, "the new run's log to fill")
        at.run()  # the log panel now shows the new run and its log
        assert at.selectbox(key="launch_run").value == run.id
        assert at.code and at.code[-1].value.strip()
    finally:
        kill_group(run.pid)


def test_launch_with_no_runs_says_where_the_log_will_show(tmp_path, monkeypatch):
    import streamlit as st
    from app_helpers import ROOT
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RODS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RODS_RUNS", str(tmp_path / "runs"))
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "pages/1_Launch.py"), default_timeout=60).run()
    assert not at.exception
    assert [i.value for i in at.info] == ["No runs yet: the log of the run you launch above shows here."]

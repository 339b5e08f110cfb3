"""Home over a real run's store: status, progress and curves, Stop, and the record of a run that died
before it registered."""

from __future__ import annotations

import subprocess

from app_helpers import RUN_ID, kill_group, page

from rods_lab.paths import AppPaths
from storage.control import process_start


def test_home_lists_the_run_with_progress_and_curves(app_env):
    at = page("app.py").run()
    assert not at.exception
    assert any(RUN_ID in m.value and "finished" in m.value for m in at.markdown)
    assert int(at.metric[2].value) >= 1  # finished runs
    bars = at.get("progress")
    assert bars and "step 3 / 3" in bars[0].proto.text
    assert at.get("plotly_chart")


def test_home_stop_button_stops_a_running_run(app_env):
    ws, runs, _, _ = app_env
    db = AppPaths.from_env().db()
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        db.create_run("fx-sleeper", runs / "fx-sleeper", {"grpo": {"max_steps": 10}}, "rods")
        db.update_run("fx-sleeper", status="running", pid=proc.pid, proc_start=process_start(proc.pid))
        db.heartbeat("fx-sleeper", 1)
        at = page("app.py").run()
        assert not at.exception
        at.button(key="home_stop_fx-sleeper").click().run()
        assert not at.exception
        assert db.get_run("fx-sleeper").status == "stopped"
        assert proc.wait(timeout=10) == -15  # SIGTERM reached the process group
    finally:
        kill_group(proc.pid)


def test_home_records_a_run_that_died_before_registering(app_env):
    """The runs table only derives `failed`; Home's refresh is what stores it, with the log's tail."""
    _, runs, _, _ = app_env
    db = AppPaths.from_env().db()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (runs / "fx-dead").mkdir()
    (runs / "fx-dead" / "train.log").write_text("ValueError: model.path: no model here\n")
    db.create_run("fx-dead", runs / "fx-dead", {"grpo": {"max_steps": 2}}, "rods")
    db.update_run("fx-dead", pid=dead.pid, proc_start=process_start(dead.pid))
    at = page("app.py").run()
    assert not at.exception
    stored = db.get_run("fx-dead")
    assert (stored.status, stored.message) == ("failed", "ValueError: model.path: no model here")
    assert any("fx-dead" in m.value and "failed" in m.value for m in at.markdown)

"""Home over a real run's store: status, progress and curves, Stop, and the record of a run that died
before it registered."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

from app_helpers import ROOT, RUN_ID, kill_group, page

from rods_core.process_identity import process_start
from rods_lab.paths import AppPaths
from rods_lab.status import STATES
from storage.build_progress import write_build_progress
from storage.control import ControlDB
from storage.events import EventLog


def test_home_lists_the_run_with_progress_and_curves(app_env):
    at = page("app.py").run()
    assert not at.exception
    assert any(RUN_ID in m.value and "finished" in m.value for m in at.markdown)
    assert int(next(m.value for m in at.metric if m.label.endswith(" Finished"))) >= 1
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


def test_home_counts_every_state_and_each_card_says_its_counter(tmp_path, monkeypatch):
    """One run in each state a run can be in (two failed: a failed one and a lost one); the counters sum to
    the cards shown, and each card's icon and word are those of the counter it is counted in."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    ws, runs = tmp_path / "ws", tmp_path / "runs"
    monkeypatch.setenv("RODS_WORKSPACE", str(ws))
    monkeypatch.setenv("RODS_RUNS", str(runs))
    db = ControlDB(ws / "control.sqlite")
    alive = subprocess.Popen(["sleep", "120"], start_new_session=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = {"status": "running", "pid": alive.pid, "proc_start": process_start(alive.pid)}
    now = datetime.now(UTC)
    setups = {  # run -> (store fields, build phase, steps logged), one per state
        "s-queued": ({}, None, False),
        "s-building": ({**live, "heartbeat_at": now}, "sft", False),
        "s-waiting": ({**live, "heartbeat_at": now}, "waiting", False),
        "s-starting": ({**live, "heartbeat_at": now}, "done", False),
        "s-running": ({**live, "heartbeat_at": now}, "done", True),
        "s-stale": ({**live, "heartbeat_at": now - timedelta(minutes=10)}, "done", True),
        "s-finished": ({"status": "finished"}, None, True),
        "s-failed": ({"status": "failed", "message": "ValueError"}, "failed", False),
        "s-lost": ({"status": "running", "pid": dead.pid, "proc_start": 1, "heartbeat_at": now}, None, True),
        "s-stopped": ({"status": "stopped"}, None, True),
    }
    try:
        for run_id, (fields, phase, steps) in setups.items():
            db.create_run(run_id, runs / run_id, {"grpo": {"max_steps": 30}}, "rods")
            db.update_run(run_id, **fields)
            if phase:
                write_build_progress(runs / run_id, phase)
            if steps:
                log = EventLog(runs / run_id)
                log.append("step", [{"step": 1, "wall_s": 1.0, "time/step_s": 1.0, "reward/mean": 0.5}])
                log.flush()
                log.close()
        st.cache_data.clear()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
        assert not at.exception
        counters = {m.label: int(m.value) for m in at.metric}
        heads = [m.value for m in at.markdown if m.value.startswith("**s-")]
        assert len(heads) == len(setups) == sum(counters.values())
        expected = {"Failed": 2} | {label: 1 for label, _ in STATES.values() if label != "Failed"}
        assert {label.split(" ", 1)[1]: n for label, n in counters.items()} == expected
        for label, _ in counters.items():
            icon, name = label.split(" ", 1)
            said = [h for h in heads if f" · {icon} {name.lower()}" in h]
            assert len(said) == counters[label], (label, heads)
    finally:
        kill_group(alive.pid)

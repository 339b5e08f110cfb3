"""A run's process beats while it is alive and working before its first step (building the model, waiting
for another run's build, starting the trainer), so `stale` means only a live process that stopped reporting.

The driver (tests/heartbeat_driver.py) is a run process held in each phase with a short beat; the last test is
a real `rods train` held waiting for a build lock this test holds, beating at the production period."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml
from app_helpers import ROOT, kill_group, smoke_config
from polling import wait_until

from rods_core.build import build_lock
from rods_lab import views
from rods_lab.status import run_status
from storage.control import ControlDB
from storage.reader import RunReader
from storage.run_recorder import HEARTBEAT_S

TIMEOUT_S = 3.0  # the liveness timeout the driver's phases are read with (its beat: every 0.25 s)


def state_of(db: ControlDB, run_id: str, timeout_s: float = TIMEOUT_S) -> str:
    """The state Home counts the run in, as the app derives it (with a short liveness timeout)."""
    run = db.get_run(run_id)
    if run is None:
        return "not registered"
    has_steps = RunReader(run.out_dir).latest_step() is not None
    return views.run_view(run.out_dir, run_status(db, run, heartbeat_timeout_s=timeout_s), has_steps)[0].state


def holds(db: ControlDB, run_id: str, state: str, span_s: float = 2 * TIMEOUT_S) -> None:
    """The run reaches `state` and stays in it (never stale) for `span_s`, longer than the liveness timeout."""
    wait_until(lambda: state_of(db, run_id) == state, f"the run to be {state}", timeout=120, every=0.1)
    end = time.monotonic() + span_s
    while time.monotonic() < end:
        assert state_of(db, run_id) == state
        time.sleep(0.1)


def test_a_run_beats_in_every_phase_before_its_first_step_and_while_it_evaluates_and_goes_stale_after(tmp_path):
    model = tmp_path / "models" / "demo"
    cfg = smoke_config(tmp_path, model, **{"model.build_if_missing": True})
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    signals = tmp_path / "go"
    signals.mkdir()
    db = ControlDB(Path(cfg["workspace"]) / "control.sqlite")
    driver = [sys.executable, str(ROOT / "tests" / "heartbeat_driver.py"), str(tmp_path / "cfg.yaml"), "hb"]
    proc = subprocess.Popen([*driver, str(signals)], cwd=ROOT, start_new_session=True)
    try:
        holds(db, "hb", "starting")
        (signals / "build").touch()
        holds(db, "hb", "building")
        with build_lock(model, "run other", lambda holder: None):  # another run builds the same folder
            (signals / "wait").touch()
            holds(db, "hb", "waiting")
            model.mkdir(parents=True)
            (model / "config.json").write_text("{}")  # ... and finishes it
        holds(db, "hb", "starting")  # model built: the policy and the trainer load
        (signals / "step").touch()
        wait_until(lambda: state_of(db, "hb") == "running", "the first step", timeout=60, every=0.05)
        (signals / "work").touch()  # an evaluation between steps: no step for longer than the timeout
        holds(db, "hb", "running")
        (signals / "worked").touch()
        wait_until(lambda: state_of(db, "hb") == "stale", "the run to go stale once its steps stop", timeout=30)
        assert proc.poll() is None  # alive: stale is a live process that stopped reporting
        (signals / "end").touch()
        assert proc.wait(timeout=60) == 0
        assert state_of(db, "hb") == "finished"
    finally:
        kill_group(proc.pid)


def test_a_real_run_waiting_for_another_build_keeps_beating(tmp_path):
    """`rods train` on a model folder another process is building: it registers, waits (in the delegated
    build, or in itself on a one-core machine) and its heartbeat keeps advancing at the production period."""
    model = tmp_path / "models" / "demo"
    cfg = smoke_config(tmp_path, model, **{"model.build_if_missing": True})
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    db_file = Path(cfg["workspace"]) / "control.sqlite"
    with build_lock(model, "run other", lambda holder: None):
        cmd = [sys.executable, "-m", "rods_lab.cli", "train", "--config", str(tmp_path / "cfg.yaml"), "--run-id", "w"]
        log = open(tmp_path / "train.log", "w")  # noqa: SIM115 (closed below, after the process)
        proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        try:
            db = wait_until(lambda: db_file.exists() and ControlDB(db_file), "the store", timeout=120, every=0.2)
            wait_until(lambda: state_of(db, "w", 120.0) == "waiting", "the run to wait", timeout=180, every=0.2)
            first = db.get_run("w").heartbeat_at
            wait_until(
                lambda: db.get_run("w").heartbeat_at > first, "a beat while waiting", timeout=3 * HEARTBEAT_S, every=0.5
            )
            assert state_of(db, "w", 120.0) == "waiting" and proc.poll() is None
        finally:
            kill_group(proc.pid)
            log.close()


def test_the_recorder_beats_before_the_first_step_and_inside_working_blocks_only(tmp_path):
    """The beat rule in one process: busy (the thread beats) from registering to the first step's heartbeat,
    and again inside each `working()` block, nested ones included; idle between steps otherwise."""
    from storage.events import EventLog
    from storage.run_recorder import StoreRecorder

    (tmp_path / "r").mkdir()
    db = ControlDB(tmp_path / "control.sqlite")
    db.create_run("r", tmp_path / "r", {}, "rods", name="r")
    rec = StoreRecorder(tmp_path / "r", "r", db, EventLog(tmp_path / "r"), startup_beat_s=0.05)
    try:
        assert rec.busy()
        with rec.working():  # the step-0 evaluation, inside start-up
            assert rec.busy()
        assert rec.busy()  # start-up goes on until a step beats
        rec.heartbeat(1)
        assert not rec.busy()
        before = db.get_run("r").heartbeat_at
        with rec.working(), rec.working():
            assert rec.busy()
            wait_until(lambda: db.get_run("r").heartbeat_at > before, "a beat while working", timeout=5, every=0.02)
        assert not rec.busy()  # between steps outside work the thread stays silent: stale can show
    finally:
        rec.close("finished")

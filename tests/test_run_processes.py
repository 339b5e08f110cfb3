"""The app's hold on a run's process (rods_lab/processes.py, rods_lab/status.py), through psutil: a status
read checks the process and its heartbeat and changes nothing (a zombie stays unreaped), reaping is its own
call (on the runs' pids, when the app launches a run), and stopping signals the run's process group and records who stopped it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from polling import wait_until

from rods_core.process_identity import START_TOLERANCE, process_start, same_process
from rods_lab.processes import process_alive, reap_children, stop_run
from rods_lab.status import run_status
from storage.control import ControlDB


@pytest.fixture
def db(tmp_path):
    return ControlDB(tmp_path / "control.sqlite")


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def _exited_unreaped(proc: subprocess.Popen) -> None:
    """Wait until `proc` has exited, leaving it unreaped (WNOWAIT): a zombie child."""
    wait_until(lambda: os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT), "the child to exit")


def test_process_start_reads_our_own_process():
    start = process_start(os.getpid())
    assert start is not None and process_alive(os.getpid(), start)
    assert not process_alive(None, None) and not process_alive(os.getpid(), None)
    assert not same_process(os.getpid(), start + 2 * START_TOLERANCE)  # another process that got the pid


def test_status_is_checked_against_the_process_and_reads_change_nothing(db):
    proc = _sleeper()
    try:
        db.create_run("r", "runs/r")
        db.register_process("r", proc.pid, process_start(proc.pid))
        assert run_status(db, "r") == "running"
        db.update_run("r", heartbeat_at=datetime.now(UTC) - timedelta(minutes=10))
        assert run_status(db, "r") == "stale" and run_status(db, "r", heartbeat_timeout_s=3600) == "running"
        db.heartbeat("r", step=7)
        assert run_status(db, "r") == "running"
        db.update_run("r", proc_start=process_start(proc.pid) + 2 * START_TOLERANCE)  # the pid was reused
        assert run_status(db, "r") == "lost"
        db.update_run("r", proc_start=process_start(proc.pid))
        proc.kill()
        _exited_unreaped(proc)
        assert run_status(db, "r") == "lost" and not process_alive(proc.pid, db.get_run("r").proc_start)
        # the reads left the zombie where it was: only reap_children collects it
        assert os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        assert reap_children({proc.pid + 1}) == []  # not a pid it was given: left for its owner
        assert reap_children({proc.pid}) == [proc.pid]
        with pytest.raises(ChildProcessError):
            os.waitpid(proc.pid, os.WNOHANG)
        assert db.get_run("r").status == "running"  # and no read wrote a row
    finally:
        proc.kill()


def test_stop_run_signals_the_process_group_and_records_who(db):
    proc = _sleeper()
    db.create_run("r", "runs/r")
    db.register_process("r", proc.pid, process_start(proc.pid))
    assert stop_run(db, "r", by="ana") is True
    assert proc.wait(timeout=10) == -signal.SIGTERM
    run = db.get_run("r")
    assert (run.status, run.stopped_by, run_status(db, run)) == ("stopped", "ana", "stopped")
    assert stop_run(db, "r") is False  # nothing left to signal
    with pytest.raises(KeyError):
        stop_run(db, "nope")


def test_a_reused_pid_is_never_signalled(db):
    proc = _sleeper()
    try:
        db.create_run("r", "runs/r")
        db.register_process("r", proc.pid, process_start(proc.pid) - 2 * START_TOLERANCE)
        assert stop_run(db, "r") is False and proc.poll() is None
        assert db.get_run("r").status == "stopped"
    finally:
        proc.kill()
        proc.wait()

"""The control database: runs and their derived status, decisions delivered exactly once across
processes, and several processes using the one DuckDB file at the same time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from polling import wait_until

from storage.control import ControlDB, process_alive, process_start

WORKERS = Path(__file__).with_name("store_workers.py")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def db(tmp_path):
    return ControlDB(tmp_path / "control.duckdb")


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_runs_round_trip_with_tz_aware_times(db):
    db.create_run("r1", "runs/r1", config={"method": "rods", "lr": 1e-5}, name="first")
    run = db.get_run("r1")
    assert run.config_dict() == {"method": "rods", "lr": 1e-5} and run.status == "queued"
    assert run.created_at.tzinfo is not None and run.created_at.utcoffset() == timedelta(0)
    db.update_run("r1", status="finished")
    assert [r.id for r in db.list_runs()] == ["r1"] and db.run_status("r1") == "finished"
    with pytest.raises(ValueError, match="status must be one of"):
        db.update_run("r1", status="done")
    with pytest.raises(KeyError):
        db.update_run("nope", status="failed")


def test_status_is_checked_against_the_process(db):
    proc = _sleeper()
    try:
        db.create_run("r", "runs/r")
        db.register_process("r", proc.pid)
        assert db.run_status("r") == "running"
        db.update_run("r", heartbeat_at=datetime.now(UTC) - timedelta(minutes=10))
        assert db.run_status("r") == "stale"
        db.heartbeat("r", step=7)
        assert db.get_run("r").step == 7 and db.run_status("r") == "running"
        # A recorded start time that does not match: the pid was reused by another process.
        db.update_run("r", proc_start=process_start(proc.pid) + 1)
        assert db.run_status("r") == "lost"
        db.update_run("r", proc_start=process_start(proc.pid))
        proc.kill()
        # Wait until it has exited but leave it unreaped (WNOWAIT): a zombie child, which run_status reaps.
        wait_until(lambda: os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT), "the child to exit")
        assert db.run_status("r") == "lost" and not process_alive(proc.pid, None)
    finally:
        proc.kill()


def test_stop_run_signals_the_process_group(db):
    proc = _sleeper()
    db.create_run("r", "runs/r")
    db.register_process("r", proc.pid)
    assert db.stop_run("r") is True
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert db.get_run("r").status == "stopped" and db.run_status("r") == "stopped"
    assert db.stop_run("r") is False  # nothing left to signal


def test_decisions_validate_and_mark_once(db):
    with pytest.raises(ValueError, match="action must be one of"):
        db.add_decision("r", "t", "promote")
    with pytest.raises(ValueError, match="edit decision needs payload"):
        db.add_decision("r", "t", "edit", {"note": "x"})
    with pytest.raises(ValueError):
        db.add_decision("r", "t", "edit", {"task": {"id": "t", "category": "base"}})
    a = db.add_decision("r", "t1", "approve")
    b = db.add_decision("r", "t2", "reject")
    assert [d.id for d in db.pending_decisions("r")] == [a.id, b.id]
    claimed = db.claim_decisions("r")
    assert [d.status for d in claimed] == ["claimed", "claimed"] and db.claim_decisions("r") == []
    assert db.mark_decision(a.id, "applied", "promoted", step=3) is True
    assert db.mark_decision(a.id, "applied", "again", step=4) is False
    assert db.mark_decision(b.id, "refused", "task already retired", step=3) is True
    got = {d.id: (d.status, d.reason, d.applied_step) for d in db.decisions("r")}
    assert got == {a.id: ("applied", "promoted", 3), b.id: ("refused", "task already retired", 3)}
    # Resume from a checkpoint at step 2: the step-3 outcomes were lost with the process.
    assert db.reopen_decisions_after("r", 2) == 2 and len(db.pending_decisions("r")) == 2


def test_decisions_reach_two_consumer_processes_exactly_once(db, tmp_path):
    out = tmp_path / "claimed.txt"
    consumers = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "consumer", str(db.path), "r", str(out)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    ids, t0 = [], time.monotonic()
    for i in range(50):  # the app adds decisions while both trainers poll
        ids.append(db.add_decision("r", f"task_{i}", "approve").id)
        time.sleep(0.02)
    print(f"add_decision under contention: {(time.monotonic() - t0) / 50 * 1000:.0f} ms each incl. 20 ms pause")
    Path(str(out) + ".stop").touch()
    for c in consumers:
        _, err = c.communicate(timeout=60)
        assert c.returncode == 0, err
    lines = out.read_text().split()
    assert "double-mark" not in lines
    assert Counter(lines) == Counter(str(i) for i in ids)  # each id claimed once, none lost
    assert {d.status for d in db.decisions("r")} == {"applied"}


def test_control_db_used_by_several_processes_at_once(db):
    db.create_run("r", "runs/r")
    n = 20
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "control", str(db.path), "r", str(n)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reads = 0
    while any(p.poll() is None for p in procs):
        db.list_runs()  # the app polling meanwhile
        db.pending_decisions("r")
        reads += 1
        time.sleep(0.05)
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err
        assert json.loads(out) == {"rounds": n}
    authors = Counter(d.author for d in db.decisions("r"))
    assert sorted(authors.values()) == [n, n] and reads > 0
    assert db.get_run("r").step == n - 1


def test_process_start_reads_our_own_process():
    assert process_start(os.getpid()) is not None
    assert process_alive(os.getpid(), process_start(os.getpid()))
    assert not process_alive(None, None)


def test_deliver_decisions_then_resume_reapplies_only_lost_ones(db, tmp_path):
    from storage.decisions import deliver_decisions, prepare_resume
    from storage.events import EventLog
    from storage.reader import RunReader

    log = EventLog(tmp_path / "run")
    a = db.add_decision("r", "t1", "approve")
    b = db.add_decision("r", "t2", "reject")

    def apply(d):
        if d.task_id == "t2":
            raise KeyError("t2 is not in the staged pool")
        return True, "promoted to active"

    def deliver(step):  # as the curriculum does: outcomes become decision_applied events
        out = deliver_decisions(db, "r", step, apply)
        log.append("decision_applied", [{"step": step, "decision_id": o.decision_id} for o in out])
        return out

    out = deliver(4)
    assert [(o.decision_id, o.outcome) for o in out] == [(a.id, "applied"), (b.id, "refused")]
    assert "KeyError" in out[1].reason and deliver(5) == []
    c = db.add_decision("r", "t3", "approve")
    deliver(6)
    log.flush()
    assert RunReader(log.root.parent).counts()["decision_applied"] == 3
    # Killed after step 6; the last checkpoint is step 5: only c's application was lost.
    assert prepare_resume(log, db, "r", 5) == {"events_dropped": 1, "decisions_reopened": 1}
    assert [d.id for d in db.pending_decisions("r")] == [c.id]
    assert [o.decision_id for o in deliver(6)] == [c.id]


def test_control_db_process_serves_the_same_methods_from_a_child(tmp_path):
    """A trainer's ControlDB lives in a child process (DuckDB trims the malloc heap of the process that opens
    a database): the same calls and answers, errors raised in the caller, the caller's pid recorded."""
    from storage.control import ControlDBProcess

    db = ControlDBProcess(tmp_path / "control.duckdb")
    try:
        db.create_run("r1", "runs/r1", {"lr": 1.0}, "rods", name="first")  # `name` is a method argument too
        assert db.get_run("r1").name == "first" and db.get_run("r1").config_dict() == {"lr": 1.0}
        assert db.register_process("r1").pid == os.getpid()  # the trainer, not the child serving the calls
        db.add_decision("r1", "t1", "approve")
        (claimed,) = db.claim_decisions("r1")
        assert claimed.claimed_by == f"pid:{os.getpid()}" and claimed.status == "claimed"
        with pytest.raises(ValueError, match="action"):
            db.add_decision("r1", "t1", "explode")
        with pytest.raises(AttributeError):
            db.no_such_method  # noqa: B018
    finally:
        child = db._proc
        db.close()
    assert not child.is_alive()
    assert ControlDB(tmp_path / "control.duckdb").get_run("r1").status == "running"  # the writes landed


@pytest.mark.parametrize("served", ["child", "in-process"])
def test_calls_sent_ahead_answer_in_order_each_with_its_own_error(tmp_path, served):
    """`later` returns before the answer: answers are matched to their calls in order, an error belongs to
    its own call only, a call made meanwhile still gets its own answer, and close() drops unread ones."""
    from storage.control import ControlDBProcess

    db = ControlDBProcess(tmp_path / "control.duckdb") if served == "child" else ControlDB(tmp_path / "c.duckdb")
    db.create_run("r1", "runs/r1")
    db.add_decision("r1", "t1", "approve")
    claim = db.later("claim_decisions", "r1", "pid:1")
    bad = db.later("add_decision", "r1", "t1", "explode")
    beat = db.later("heartbeat", "r1", 7)
    assert db.get_run("r1").step == 7  # read after the heartbeat sent before it: calls run in order
    assert claim.done and bad.done and beat.done  # ... and their answers were read on the way
    assert [(d.task_id, d.claimed_by) for d in claim.result()] == [("t1", "pid:1")]
    with pytest.raises(ValueError, match="action"):
        bad.result()
    assert beat.result() is None and db.claim_decisions("r1") == []
    db.later("heartbeat", "r1", 8)  # never read: close() takes its answer and ends the child
    if served == "child":
        child = db._proc
        db.close()
        assert not child.is_alive() and ControlDB(tmp_path / "control.duckdb").get_run("r1").step == 8


def test_control_db_process_exits_when_its_parent_dies(tmp_path):
    """No process is left behind by a trainer killed outright: the child reads EOF and ends."""
    code = (
        "import os, sys; from storage.control import ControlDBProcess;"
        f"db = ControlDBProcess({str(tmp_path / 'c.duckdb')!r}); db.get_run('x');"
        "print(db._proc.pid, flush=True); os._exit(0)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    child = int(out.stdout.split()[0])
    wait_until(lambda: not _running(child), timeout=30, what="the control-database child to exit")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(")")[-1].split()[0] == "Z")


def _use_in_daemon(path: str, out) -> None:
    from storage.control import ControlDBProcess

    db = ControlDBProcess(path)
    db.create_run("d1", "runs/d1")
    out.put((db.get_run("d1").id, db._local is not None))
    db.close()


def test_control_db_process_serves_in_process_inside_a_daemonic_process(tmp_path):
    """A daemonic process may not start children: there the database is served in-process, not refused."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_use_in_daemon, args=(str(tmp_path / "c.duckdb"), out), daemon=True)
    proc.start()
    assert out.get(timeout=120) == ("d1", True)
    proc.join(timeout=30)
    assert proc.exitcode == 0

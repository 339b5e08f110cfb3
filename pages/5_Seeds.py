"""Seeds: the seed catalog (import a task file of any benchmark, enable/disable, tag, start a run on a subset)
and the BFCL seed set."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from rods_core.benchmarks.registry import DEFAULT_BENCHMARK
from rods_core.config import parse_overrides
from rods_core.config.benchmark_entries import benchmark_names
from rods_core.config.inputs import DoorError
from rods_lab import catalog_edits, identity, ui
from rods_lab.configs import list_configs
from rods_lab.launch import launch_on_seeds
from storage.catalog import seed_frame

ui.page_setup(__file__)
paths, db, me = ui.paths(), ui.db(), identity.current()


@st.cache_data(show_spinner="Reading the BFCL seed set…")
def bfcl_table() -> pd.DataFrame:
    bench = ui.named_benchmark(DEFAULT_BENCHMARK)  # BFCL multi-turn: its seed set's rows (protocols.SeedStatistics)
    return pd.DataFrame(bench.seed_rows(bench.seeds("all")))


def import_seed_file(upload, typed: str, tags: list[str], benchmark: str) -> None:
    bench = ui.named_benchmark(benchmark)
    try:
        sent = (upload.name, upload.getvalue()) if upload is not None else None
        report = catalog_edits.import_file(paths, db, me, tags, bench, sent, typed)
    except identity.Refused as e:
        st.error(str(e))
    except DoorError as e:  # unreadable, invalid, failing replay, test-split or outside the workspace
        st.error("Nothing was imported.")
        st.code(str(e), language="text")
    else:
        st.success(f"Imported {report.added} new and {report.updated} updated seed(s).")


catalog, add, bfcl = st.tabs(["Catalog", "Import", "BFCL seed set"])
with add:
    upload = st.file_uploader("JSONL task file", type=["jsonl", "json"], key="seeds_upload")
    typed = st.text_input("…or a file in the workspace", key="seeds_path", placeholder="imports/tasks.jsonl")
    tags = [t.strip() for t in st.text_input("Tags (comma separated)", key="seeds_import_tags").split(",") if t.strip()]
    benchmark = st.selectbox(
        "Benchmark of the file's tasks (its schema, verifier and test split)", benchmark_names(), key="seeds_benchmark"
    )
    if st.button("Import", key="seeds_import", type="primary"):
        import_seed_file(upload, typed, tags, benchmark)
    if st.button("Add the BFCL train split (400 seeds)", key="seeds_add_bfcl"):
        with identity.refusals():
            added, updated = catalog_edits.add_bfcl_train(db, me)
            st.success(f"Added {added} and updated {updated} BFCL seed(s).")

with catalog:
    df = seed_frame(db)
    a, b, c = st.columns(3)
    tag = a.selectbox("Tag", ["(any)", *sorted({t for ts in df.tags for t in ts.split(", ") if t})], key="seeds_tag")
    of = b.selectbox("Benchmark", ["(any)", *sorted(set(df.benchmark) - {""})], key="seeds_of_benchmark")
    only = c.radio("Show", ["all", "enabled", "disabled"], horizontal=True, key="seeds_show")
    view = df[df.tags.str.split(", ").apply(lambda ts: tag in ts)] if tag != "(any)" else df
    view = view[view.benchmark == of] if of != "(any)" else view
    view = view[view.enabled == (only == "enabled")] if only != "all" else view
    table = st.dataframe(view, hide_index=True, height=260, on_select="rerun", key=f"seeds_table_{tag}_{of}_{only}")
    every = st.checkbox(f"Act on all {len(view)} shown", key="seeds_every")
    chosen_rows = view.task_id.iloc[table.selection.rows].tolist()
    typed = st.multiselect("…or pick seeds by id", view.task_id.tolist(), key="seeds_pick")
    picked = view.task_id.tolist() if every else list(dict.fromkeys(chosen_rows + typed))
    st.caption(f"{len(picked)} seed(s) picked: tick rows in the table, pick ids, or act on all shown.")
    c1, c2, c3, c4, c5 = st.columns([1, 1, 2, 1, 1])
    for on, col, label in ((True, c1, "Enable"), (False, c2, "Disable")):
        if col.button(label, key=f"seeds_{label.lower()}", disabled=not picked):
            with identity.refusals():
                st.success(f"{label}d {catalog_edits.set_enabled(db, picked, on, me)} seed(s).")
    new_tag = c3.text_input("Tag", key="seeds_new_tag", label_visibility="collapsed", placeholder="tag")
    for adding, col, label in ((True, c4, "Add tag"), (False, c5, "Remove tag")):
        if col.button(label, key=f"seeds_{'addtag' if adding else 'untag'}", disabled=not (picked and new_tag.strip())):
            with identity.refusals():
                st.success(
                    f"{label} {new_tag!r}: {catalog_edits.retag(db, picked, new_tag, adding, me)} seed(s) changed."
                )

    st.subheader("Start a run on the chosen seeds")
    configs = {p.stem: p for p in list_configs()}
    r1, r2, r3 = st.columns(3)
    config = r1.selectbox(
        "Config", list(configs), list(configs).index("demo-cpu") if "demo-cpu" in configs else 0, key="seeds_config"
    )
    name = r2.text_input("Run name", "subset", key="seeds_run_name")
    more = r3.text_area("More fields (key.path=value)", key="seeds_more", height=68)
    chosen = [t for t in picked if bool(df.set_index("task_id").enabled[t])]
    if st.button(f"Start a run on {len(chosen)} enabled seed(s)", key="seeds_launch", disabled=not chosen):
        try:
            overrides = parse_overrides(more, "more fields")
            run, file = launch_on_seeds(
                db, chosen, configs[config], name, overrides, paths, actor=me, policy=ui.launch_policy()
            )
        except (
            ValueError,
            KeyError,
            FileExistsError,
            identity.Refused,
        ) as e:  # config, path and catalog errors are shown
            st.error(str(e))
        else:
            ui.refresh()
            st.success(f"Launched `{run.run_id}` on {len(chosen)} seeds ({file.name}).")

with bfcl:
    t = bfcl_table()
    split = st.segmented_control("Split", ["train", "test", "all"], default="train", key="seeds_split") or "train"
    v = t if split == "all" else t[t.split == split]
    st.metric("Tasks", len(v))
    st.plotly_chart(
        px.histogram(v, y="class_combo", color="category", title="Tasks per class combination").update_yaxes(
            categoryorder="total ascending"
        ),
        key="seeds_combo",
    )
    st.dataframe(v, hide_index=True, height=300)

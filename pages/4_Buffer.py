"""Buffer: browse and filter the pools, the lineage tree, each task's history; export a pool as JSONL."""

from __future__ import annotations

import streamlit as st

from rods_core.boundary import REGIONS
from rods_lab import charts, ui, views
from storage.export import EmptyPool, pool_jsonl
from storage.pools import PoolsFileError
from storage.schema import POOLS

ui.page_setup(__file__)


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def table(run_dir: str):
    return views.pool_table(run_dir, ui.reader(run_dir), ui.structure_cache(), ui.benchmark(run_dir))


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def rendered(run_dir: str, task_id: str) -> str:
    """The task as its benchmark shows it (Markdown)."""
    tasks = {t.id: t for t in views.snapshot(run_dir).tasks("all")}
    return ui.benchmark(run_dir).render(tasks[task_id]) if task_id in tasks else f"{task_id}: no longer in the pools"


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def history(run_dir: str, task_id: str):
    return views.task_history(ui.reader(run_dir), task_id)


@st.cache_data(ttl=ui.LIVE_S, show_spinner="Exporting…")
def export_bytes(run_dir: str, pool: str) -> tuple[bytes, int, str]:
    """(file bytes, tasks, why nothing can be exported) for a pool, made in memory: viewing writes nothing."""
    try:
        data, n = pool_jsonl(run_dir, pool)
    except (PoolsFileError, EmptyPool) as e:  # before the first step, or an empty pool: nothing to export
        return b"", 0, str(e)
    return data, n, ""


run = ui.pick_run("buffer", synthesizing=True)
if run is None:
    st.stop()
structured = views.has_structure(ui.benchmark(run.out_dir))
df = table(run.out_dir)
a, b, c = st.columns([2, 2, 3])
pools = a.multiselect("Pools", POOLS, key="buffer_pools")
regions = b.multiselect("Regions", REGIONS, key="buffer_regions")
text = c.text_input("Task id contains", key="buffer_text")
keep = df.task_id.str.contains(text, regex=False)
keep &= df.pool.isin(pools) if pools else True
keep &= df.region.isin(regions) if regions else True
view = df[keep]
st.write(f"{len(view)} of {len(df)} tasks")
# another benchmark's tasks have no class combination, depth, turns or calls: those columns are left out
st.dataframe(view, hide_index=True, height=280, column_order=None if structured else views.GROUP_COLUMNS)
st.plotly_chart(charts.lineage_tree(views.lineage(df)), key="buffer_lineage")

left, right = st.columns([3, 2])
with left:
    st.subheader("Task history")
    tid = st.selectbox("Task", view.task_id.tolist(), key="buffer_task")
    if tid and not structured:
        st.markdown(rendered(run.out_dir, tid))
    if tid:
        stats, moves = history(run.out_dir, tid)
        st.plotly_chart(charts.task_history(stats), key="buffer_history")
        st.dataframe(moves, hide_index=True)
with right:
    st.subheader("Export")
    export_pools = views.pools_list()
    pool = st.selectbox("Pool", export_pools, index=export_pools.index("active"), key="buffer_export_pool")
    data, n, why = export_bytes(run.out_dir, pool)
    if why:
        st.info(why)
    st.download_button(
        f"Download {pool} ({n} tasks, JSONL)",
        data,
        f"{run.id}-{pool}.jsonl",
        mime="application/jsonl",
        key="buffer_download",
        disabled=not n,
    )

"""Compare: two or more runs side by side — held-out accuracy and progress vs trajectories, informative
groups, pool size."""

from __future__ import annotations

import streamlit as st

import lab_ui
from rods_core import charts, lab

lab_ui.page_setup("Compare", "📊")
st.title("Compare runs")


@st.cache_data(ttl=lab_ui.LIVE_S, show_spinner=False)
def frames(runs: dict[str, str]):
    return lab.compare_frames(runs)


table = lab_ui.all_runs()
if table.empty:
    st.info("No runs yet: start one on the **Launch** page.")
    st.stop()
ids = table.id.tolist()
chosen = st.multiselect("Runs", ids, default=ids[:2], key="compare_runs",
                        format_func=lambda i: f"{i} · {table.set_index('id').method[i]}")
if not chosen:
    st.stop()
dirs = table.set_index("id").out_dir
evals, steps = frames({f"{i} ({table.set_index('id').method[i]})": dirs[i] for i in chosen})
a, b = st.columns(2)
a.plotly_chart(charts.by_run(evals, "trajectories", "accuracy", "Held-out accuracy vs trajectories"),
               key="compare_acc")
b.plotly_chart(charts.by_run(evals, "trajectories", "progress", "Held-out progress reward vs trajectories"),
               key="compare_prog")
a.plotly_chart(charts.by_run(steps, "trajectories_total", "informative_share",
                             "Share of informative groups vs trajectories", markers=False), key="compare_info")
b.plotly_chart(charts.by_run(steps, "trajectories_total", "active", "Active pool size vs trajectories",
                             markers=False), key="compare_pool")
if not evals.empty:
    last = evals.sort_values("step").groupby("run").tail(1)[["run", "step", "split", "accuracy", "progress", "trajectories"]]
    st.dataframe(last, hide_index=True)

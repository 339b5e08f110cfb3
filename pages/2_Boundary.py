"""Boundary: the moving capability boundary of a run, refreshed live while it trains."""

from __future__ import annotations

import streamlit as st

from rods_lab import charts, ui, views

ui.page_setup(__file__)


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def steps(run_dir: str) -> list[int]:
    return ui.reader(run_dir).query("SELECT DISTINCT step FROM task_stats ORDER BY step").step.tolist()


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def at_step(run_dir: str, step: int):
    return ui.reader(run_dir).task_stats_at(step)


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def regions(run_dir: str):
    r = ui.reader(run_dir)
    return r.region_counts(), views.boundary_vs_others(r.variance_by_region())


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def complexity(run_dir: str):
    structure = views.structure_table(views.snapshot(run_dir), ui.structure_cache(), ui.benchmark(run_dir))
    return views.success_by_complexity(ui.reader(run_dir), structure)


run = ui.pick_run("boundary", synthesizing=True)


@st.fragment(run_every=ui.LIVE_S)
def live(run_dir: str) -> None:
    done = steps(run_dir)
    if not done:
        st.info("No task statistics yet: the first step is still running.")
        return
    follow = st.toggle("Follow the latest step", True, key="boundary_follow")
    step = done[-1] if follow or len(done) == 1 else st.select_slider("Step", done, done[-1], key="boundary_step")
    left, right = st.columns(2)
    left.plotly_chart(charts.boundary_scatter(at_step(run_dir, step), step), key="boundary_scatter")
    counts, var = regions(run_dir)
    right.plotly_chart(charts.region_counts(counts), key="boundary_regions")
    left.plotly_chart(charts.variance_ratio(var), key="boundary_variance")
    ratio = var.ratio.dropna()
    right.metric("Boundary / other variance (latest)", f"{ratio.iloc[-1]:.2f}×" if len(ratio) else "—")
    cx = complexity(run_dir)
    if not views.has_structure(ui.benchmark(run_dir)):  # no class combinations, depth or turns: success by group
        st.plotly_chart(charts.group_lines(cx), key="boundary_groups")
        return
    combos = ["all", *sorted(cx.class_combo.unique())] if not cx.empty else ["all"]
    combo = st.selectbox("Class combination", combos, key="boundary_combo")
    a, b = st.columns(2)
    a.plotly_chart(charts.complexity_lines(cx, None if combo == "all" else combo), key="boundary_cx_lines")
    b.plotly_chart(
        charts.complexity_heatmap(cx if combo == "all" else cx[cx.class_combo == combo], step), key="boundary_cx_heat"
    )


if run is not None:
    ui.benchmark(run.out_dir)  # a config.yaml naming no benchmark stops the page here, with the reason
    live(run.out_dir)

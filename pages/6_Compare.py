"""Compare: runs side by side — held-out accuracy and progress vs trajectories, informative groups, pool
size — either runs of this lab or a `rods bench curriculum` experiment (the same tables its report uses)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bench import experiments
from rods_lab import charts, ui

ui.page_setup(__file__)


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def load(refs: tuple[tuple[str, str, int, str], ...]) -> experiments.Frames:
    return experiments.load_runs([experiments.RunRef(r, m, s, Path(d)) for r, m, s, d in refs])


def lab_runs() -> tuple | None:
    table = ui.all_runs()
    if table.empty:
        st.info("No runs yet: start one on the **Launch** page.")
        return None
    by_id = table.set_index("id")
    ids = table.id.tolist()
    if [i for i in st.session_state.get("compare_runs", []) if i not in ids]:
        del st.session_state["compare_runs"]  # runs that are gone (another workspace) are not a selection
    chosen = st.multiselect(
        "Runs",
        ids,
        default=ids[:2],
        key="compare_runs",
        format_func=lambda i: f"{i} · {by_id.method[i]}",
    )
    return tuple((i, by_id.method[i], 0, by_id.out_dir[i]) for i in chosen)


def experiment_runs() -> tuple | None:
    folders = experiments.list_experiments(ui.paths().experiments)
    if not folders:
        st.info("No experiments yet: `rods bench curriculum --budget N` writes them to bench/results/curriculum/.")
        return None
    folder = st.selectbox("Experiment", folders, key="compare_experiment", format_func=lambda p: p.name)
    return tuple((r.run, r.method, r.seed, str(r.run_dir)) for r in experiments.discover_runs(folder / "runs"))


source = st.radio("Compare", ["runs of this lab", "a curriculum experiment"], horizontal=True, key="compare_source")
refs = lab_runs() if source == "runs of this lab" else experiment_runs()
if not refs:
    st.stop()


@st.fragment(run_every=ui.LIVE_S)
def side_by_side(refs: tuple, source: str) -> None:
    """The curves, live while the runs train (a method pair launched together shows up here as it runs)."""
    frames = load(refs)
    color = "run" if source == "runs of this lab" else "method"
    plots = [
        (frames.evals, "trajectories", "accuracy", "Held-out accuracy vs trajectories", True, "compare_acc"),
        (frames.evals, "trajectories", "progress", "Held-out progress reward vs trajectories", True, "compare_prog"),
        (frames.steps, "trajectories_total", "informative_share", "Share of informative groups vs trajectories",
         False, "compare_info"),
        (frames.steps, "trajectories_total", "reward", "Training reward vs trajectories", False, "compare_reward"),
        (frames.steps, "trajectories_total", "pool_active", "Active pool size vs trajectories", False, "compare_pool"),
    ]  # fmt: skip
    cols = st.columns(2)
    for i, (df, x, y, title, markers, key) in enumerate(plots):
        cols[i % 2].plotly_chart(charts.by_run(df, x, y, title, markers=markers, color=color), key=key)
    runs = experiments.run_table(frames)
    st.dataframe(runs, hide_index=True)
    if source == "a curriculum experiment":
        methods = experiments.method_table(runs)
        methods["mean ± 95% CI"] = [
            experiments.fmt_ci(m, h) for m, h in zip(methods["mean"], methods.ci95, strict=True)
        ]
        st.dataframe(methods.pivot(index="metric", columns="method", values="mean ± 95% CI"), key="compare_methods")
        ratio, landing = experiments.share_ratio(frames), experiments.landing_table(frames.landing)
        st.dataframe(pd.DataFrame(experiments.goal_checks(methods, None, ratio, landing)), hide_index=True)


side_by_side(refs, source)

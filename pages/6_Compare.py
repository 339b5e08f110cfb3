"""Compare: runs side by side — held-out accuracy and progress with their intervals, informative groups,
training reward (smoothed), pool size — against trajectories, tokens or seconds, either runs of this lab or a
`rods bench curriculum` experiment (the same tables its report uses)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from rods_lab import charts, compare, results, ui

ui.page_setup(__file__)


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def load(refs: tuple[tuple[str, str, int, str], ...]) -> results.Frames:
    return results.load_runs([results.RunRef(r, m, s, Path(d)) for r, m, s, d in refs])


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
    folders = results.list_experiments(ui.paths().experiments)
    if not folders:
        st.info("No experiments yet: `rods bench curriculum --budget N` writes them to bench/results/curriculum/.")
        return None
    folder = st.selectbox("Experiment", folders, key="compare_experiment", format_func=lambda p: p.name)
    return tuple((r.run, r.method, r.seed, str(r.run_dir)) for r in results.discover_runs(folder / "runs"))


source = st.radio("Compare", ["runs of this lab", "a curriculum experiment"], horizontal=True, key="compare_source")
refs = lab_runs() if source == "runs of this lab" else experiment_runs()
if not refs:
    st.stop()


axis = st.radio("x axis", list(compare.X_AXES), horizontal=True, key="compare_axis")
a, b = st.columns([1, 3])
smooth = a.toggle("Smooth per-step curves", True, key="compare_smooth", help="raw points stay, faint, behind")
window = b.slider("Rolling mean over steps", 2, 20, 5, key="compare_window", disabled=not smooth)


@st.fragment(run_every=ui.LIVE_S)
def side_by_side(refs: tuple, source: str, axis: str, window: int) -> None:
    """The curves, live while the runs train (a method pair launched together shows up here as it runs)."""
    frames = compare.with_axes(load(refs))
    color = "run" if source == "runs of this lab" else "method"
    x, x_title = compare.X_AXES[axis]
    acc, prog = (f"Held-out {m} vs {axis}" for m in ("accuracy", "progress reward"))
    plots = [
        (frames.evals, "accuracy", acc, compare.held_out_note(frames.evals, "Wilson"), ("accuracy_lo", "accuracy_hi"), 0),
        (frames.evals, "progress", prog, compare.held_out_note(frames.evals, "Student-t"), ("progress_lo", "progress_hi"), 0),
        (frames.steps, "informative_share", f"Share of informative groups vs {axis}", "", None, window),
        (frames.steps, "reward", f"Training reward vs {axis}", "", None, window),
        (frames.steps, "pool_active", f"Active pool size vs {axis}", "", None, 0),
    ]  # fmt: skip
    cols = st.columns(2)
    for i, (df, y, title, note, band, w) in enumerate(plots):
        fig = charts.by_run(
            df, x, y, title, markers=band is not None, color=color, smooth=w, band=band, x_title=x_title
        )
        cols[i % 2].plotly_chart(fig, key=f"compare_{y}")
        if note:
            cols[i % 2].caption(note)
    runs = results.run_table(frames)
    st.dataframe(runs, hide_index=True)
    if source == "a curriculum experiment":
        methods = results.method_table(runs)
        methods["mean ± 95% CI"] = [results.fmt_ci(m, h) for m, h in zip(methods["mean"], methods.ci95, strict=True)]
        st.dataframe(methods.pivot(index="metric", columns="method", values="mean ± 95% CI"), key="compare_methods")
        ratio, landing = results.share_ratio(frames), results.landing_table(frames.landing)
        st.dataframe(pd.DataFrame(results.goal_checks(methods, None, ratio, landing)), hide_index=True)


side_by_side(refs, source, axis, window if smooth else 0)

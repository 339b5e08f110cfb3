"""Plotly figures for the app, built from DataFrames (pure: no I/O, no Streamlit)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

REGION_COLORS = {"mastered": "#2ca02c", "boundary": "#ff7f0e", "hard": "#d62728", "new": "#7f7f7f"}
# plotly express arguments that colour by region the same way in every chart
BY_REGION = {"color": "region", "color_discrete_map": REGION_COLORS, "category_orders": {"region": list(REGION_COLORS)}}
POOL_COLORS = {"seeds": "#1f77b4", "staged": "#ff7f0e", "active": "#2ca02c", "retired": "#7f7f7f"}
_LAYOUT = {"margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "legend_title_text": ""}


def _empty(title: str, note: str = "no data yet") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=note, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig.update_layout(title=title, xaxis_visible=False, yaxis_visible=False, **_LAYOUT)


def boundary_scatter(stats: pd.DataFrame, step: int | None = None) -> go.Figure:
    """Per-task mean reward against variance at one step, coloured by region."""
    title = f"Tasks at step {step}: mean reward vs variance" if step is not None else "Tasks: mean reward vs variance"
    if stats.empty:
        return _empty(title)
    fig = px.scatter(
        stats,
        x="mean",
        y="var",
        hover_data=["task_id", "n", "smoothed_mean", "smoothed_var"],
        title=title,
        **BY_REGION,
    )
    fig.update_xaxes(range=[-0.05, 1.05], title="mean progress reward")
    fig.update_yaxes(range=[-0.01, 0.27], title="reward variance")  # a [0,1] reward has variance <= 0.25
    return fig.update_layout(**_LAYOUT)


def region_counts(df: pd.DataFrame) -> go.Figure:
    if df.empty:
        return _empty("Tasks per region")
    fig = px.area(
        df,
        x="step",
        y="n",
        title="Tasks per region",
        **BY_REGION,
    )
    return fig.update_layout(**_LAYOUT)


def variance_ratio(df: pd.DataFrame) -> go.Figure:
    """Mean within-task variance of the boundary region against the other regions."""
    if df.empty:
        return _empty("Variance: boundary vs others")
    long = df.melt(id_vars="step", value_vars=["boundary", "others"], var_name="region", value_name="variance")
    fig = px.line(
        long,
        x="step",
        y="variance",
        color="region",
        markers=True,
        title="Variance: boundary vs others",
        color_discrete_map={"boundary": REGION_COLORS["boundary"], "others": "#1f77b4"},
    )
    return fig.update_layout(**_LAYOUT)


def complexity_lines(df: pd.DataFrame, class_combo: str | None = None) -> go.Figure:
    """Mean reward over steps per complexity (depth × turns), for one class combination or all."""
    title = f"Success by complexity — {class_combo or 'all class combinations'}"
    if class_combo:
        df = df[df.class_combo == class_combo]
    if df.empty:
        return _empty(title)
    agg = (
        df.assign(w=df.success * df.tasks)
        .groupby(["step", "complexity", "depth", "turns"], as_index=False)[["w", "tasks"]]
        .sum()
    )
    agg = agg.assign(success=agg.w / agg.tasks).sort_values(["depth", "turns", "step"])
    fig = px.line(agg, x="step", y="success", color="complexity", markers=True, title=title, hover_data=["tasks"])
    fig.update_yaxes(range=[-0.05, 1.05], title="mean progress reward")
    return fig.update_layout(**_LAYOUT)


def group_lines(df: pd.DataFrame) -> go.Figure:
    """Mean reward over steps per group (a benchmark without BFCL's structure: memory's scenarios), from
    `views.success_by_complexity`, whose class_combo column holds the group."""
    title = "Success by group"
    if df.empty:
        return _empty(title)
    agg = df.assign(w=df.success * df.tasks).groupby(["step", "class_combo"], as_index=False)[["w", "tasks"]].sum()
    agg = agg.assign(success=agg.w / agg.tasks).rename(columns={"class_combo": "group"}).sort_values(["group", "step"])
    fig = px.line(agg, x="step", y="success", color="group", markers=True, title=title, hover_data=["tasks"])
    fig.update_yaxes(range=[-0.05, 1.05], title="mean progress reward")
    return fig.update_layout(**_LAYOUT)


def complexity_heatmap(df: pd.DataFrame, step: int | None) -> go.Figure:
    """Mean reward by dependency depth × turns at one step (all class combinations)."""
    title = f"Success by depth × turns at step {step}"
    # Long runs arrive binned by step: show the bucket that holds `step`.
    bucket = df.step[df.step <= step].max() if step is not None and not df.empty else None
    at = df[df.step == bucket] if bucket is not None and bucket == bucket else df.iloc[0:0]
    if at.empty:
        return _empty(title)
    agg = at.assign(w=at.success * at.tasks).groupby(["depth", "turns"], as_index=False)[["w", "tasks"]].sum()
    grid = agg.assign(success=agg.w / agg.tasks).pivot(index="depth", columns="turns", values="success")
    fig = px.imshow(
        grid,
        zmin=0,
        zmax=1,
        color_continuous_scale="RdYlGn",
        text_auto=".2f",
        title=title,
        labels={"x": "turns", "y": "dependency depth", "color": "reward"},
        aspect="auto",
    )
    return fig.update_layout(**_LAYOUT)


def metric_lines(df: pd.DataFrame, metrics: list[str], title: str, x: str = "step") -> go.Figure:
    present = [m for m in metrics if m in df.columns]
    if df.empty or not present:
        return _empty(title)
    long = df[[x, *present]].melt(id_vars=x, var_name="metric", value_name="value").dropna()
    fig = px.line(long, x=x, y="value", color="metric", title=title)
    return fig.update_layout(height=220, **_LAYOUT)


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)}, {alpha})"


def by_run(
    df: pd.DataFrame,
    x: str,
    y: str,
    title: str,
    markers: bool = True,
    color: str = "run",
    *,
    smooth: int = 0,
    band: tuple[str, str] | None = None,
    x_title: str | None = None,
) -> go.Figure:
    """One line per run (the Compare page), coloured by run or by method.

    `smooth` > 1 draws each run's trailing rolling mean over that many points as its line, the raw points
    faint behind it; `band` (lo and hi columns) shades each run's interval around its line."""
    if df.empty or y not in df or df[y].isna().all():
        return _empty(title)
    data = df.dropna(subset=[y]).sort_values(["run", x])
    keys = list(dict.fromkeys(data[color]))
    palette = px.colors.qualitative.Plotly
    fig, named = go.Figure(), set()
    for _, g in data.groupby("run", sort=False):
        name = str(g[color].iat[0])
        c = palette[keys.index(g[color].iat[0]) % len(palette)]
        first, _ = name not in named, named.add(name)
        line = g[y].rolling(smooth, min_periods=1).mean() if smooth > 1 else g[y]
        error = None  # one point has no area to shade: its interval is an error bar instead
        if band and g[band[0]].notna().any():
            lo, hi = g[band[0]], g[band[1]]
            if len(g) == 1:
                error = {"type": "data", "symmetric": False, "array": hi - line, "arrayminus": line - lo, "color": c}
            else:
                fig.add_scatter(
                    x=[*g[x], *g[x][::-1]], y=[*hi, *lo[::-1]], mode="lines", fill="toself",
                    fillcolor=_rgba(c, 0.15), line={"width": 0}, hoverinfo="skip", showlegend=False,
                    legendgroup=name,
                )  # fmt: skip
        if smooth > 1:
            fig.add_scatter(
                x=g[x], y=g[y], mode="markers", marker={"color": c, "size": 5}, opacity=0.25,
                name=f"{name} (raw)", legendgroup=name, showlegend=False,
            )  # fmt: skip
        fig.add_scatter(
            x=g[x], y=line, mode="lines+markers" if (markers and smooth <= 1) or len(g) == 1 else "lines",
            line={"color": c}, error_y=error, name=name, legendgroup=name, showlegend=first,
        )  # fmt: skip
    fig.update_xaxes(title=x_title or x)
    fig.update_yaxes(title=y + (f" (rolling mean of {smooth})" if smooth > 1 else ""))
    return fig.update_layout(title=title, **_LAYOUT)


def lineage_tree(df: pd.DataFrame) -> go.Figure:
    """Parent → variants as a treemap coloured by pool."""
    if len(df) <= 1:
        return _empty("Lineage", "no tasks in the pools yet")
    colors = [POOL_COLORS.get(p, "#dddddd") for p in df["pool"]]
    fig = go.Figure(
        go.Treemap(
            ids=df["id"],
            labels=df["label"],
            parents=df["parent"],
            marker={"colors": colors},
            hovertext=df["pool"],
            maxdepth=4,
        )
    )
    return fig.update_layout(title="Lineage (parent → variants), coloured by pool", height=460, **_LAYOUT)


def task_history(stats: pd.DataFrame) -> go.Figure:
    if stats.empty:
        return _empty("Reward over steps", "never drawn yet")
    fig = px.line(stats, x="step", y=["mean", "smoothed_mean", "var"], markers=True, title="Reward over steps")
    return fig.update_layout(height=260, **_LAYOUT)

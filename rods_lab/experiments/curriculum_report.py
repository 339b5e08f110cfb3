"""The curriculum experiment's report: figures (interactive HTML, PNG when a static exporter works),
summary.md with the per-method table and intervals, the goal checks stated plainly, and summary.json.

PNG export needs kaleido's Chrome; on a machine without one (no internet to fetch it) the figures are
written as HTML only and the report says so, rather than failing the experiment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from rods_lab.experiments.machine import markdown as machine_md
from rods_lab.results import (
    RUN_METRICS,
    Frames,
    fmt_ci,
    goal_checks,
    landing_table,
    load_experiment,
    mean_curve,
    share_ratio,
)
from storage.export import json_safe

_COLORS = {
    "rods": "#d62728",
    "static": "#1f77b4",
    "dapo_filter": "#2ca02c",
    "uniform_synth": "#9467bd",
    "env_augment": "#ff7f0e",
    # the ablations of rods_lab.experiments.arms: one hue each, so seven arms stay apart in one figure
    "uniform_parents": "#17becf",
    "direct_injection": "#8c564b",
    "single_layer": "#e377c2",
    "no_budget": "#7f7f7f",
    "paper_streaks": "#bcbd22",
}
_SPARE_COLORS = ("#444444", "#aec7e8", "#ffbb78", "#98df8a")


def method_color(method: str) -> str:
    """A method's or arm's line colour: its own when it has one, else a spare picked by its name (stable)."""
    return _COLORS.get(method) or _SPARE_COLORS[sum(map(ord, method)) % len(_SPARE_COLORS)]


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def band_figure(curve: pd.DataFrame, x: str, y: str, title: str, y_title: str) -> go.Figure:
    """One line per method (mean over repeats) with a shaded 95% band where there are >= 2 repeats."""
    fig = go.Figure()
    for method, g in curve.groupby("method", sort=False):
        g = g.sort_values(x)
        color = method_color(method)
        half = g.ci95.astype(float).fillna(0.0) if "ci95" in g else 0.0
        if "ci95" in g and g.ci95.notna().any():
            fig.add_trace(
                go.Scatter(
                    x=list(g[x]) + list(g[x])[::-1],
                    y=list(g[y] + half) + list(g[y] - half)[::-1],
                    fill="toself",
                    fillcolor=_rgba(color, 0.15),
                    line={"width": 0},
                    hoverinfo="skip",
                    showlegend=False,
                    name=f"{method} 95% CI",
                )
            )
        fig.add_trace(go.Scatter(x=g[x], y=g[y], mode="lines+markers", name=method, line={"color": color}))
    fig.update_layout(
        title=title,
        xaxis_title="trajectories consumed",
        yaxis_title=y_title,
        template="plotly_white",
        width=800,
        height=450,
    )
    return fig


def ratio_figure(methods: pd.DataFrame) -> go.Figure:
    rows = methods[methods.metric == "variance_ratio"]
    fig = go.Figure(
        go.Bar(
            x=rows.method,
            y=rows["mean"],
            error_y={"type": "data", "array": rows.ci95.fillna(0)},
            marker_color=[method_color(m) for m in rows.method],
        )
    )
    fig.add_hline(y=2.0, line_dash="dash", annotation_text="goal 2x (paper 2.0-2.2x)")
    fig.update_layout(
        title="Boundary / other-region within-group reward variance",
        yaxis_title="ratio",
        template="plotly_white",
        width=800,
        height=450,
    )
    return fig


def figures(frames: Frames, methods: pd.DataFrame) -> dict[str, go.Figure]:
    steps = frames.steps.rename(columns={"trajectories_total": "traj_total"})
    return {
        "progress": band_figure(
            mean_curve(frames.evals, "progress"),
            "trajectories",
            "progress",
            "Held-out progress reward vs trajectories",
            "progress reward",
        ),
        "accuracy": band_figure(
            mean_curve(frames.evals, "accuracy"),
            "trajectories",
            "accuracy",
            "Held-out accuracy vs trajectories",
            "accuracy",
        ),
        "informative_share": band_figure(
            mean_curve(steps, "informative_share", x="traj_total"),
            "traj_total",
            "informative_share",
            "Share of informative groups (reward variance above the detector's floor)",
            "share of groups",
        ),
        "train_reward": band_figure(
            mean_curve(steps, "reward", x="traj_total"), "traj_total", "reward", "Training reward", "progress reward"
        ),
        "pool_size": band_figure(
            mean_curve(steps, "pool_active", x="traj_total"), "traj_total", "pool_active", "Active pool size", "tasks"
        ),
        "pool_staged": band_figure(
            mean_curve(steps, "pool_staged", x="traj_total"), "traj_total", "pool_staged", "Staged variants", "tasks"
        ),
        "variance_ratio": ratio_figure(methods),
    }


_PNG_SCRIPT = """
import sys
import plotly.io as pio
for src in sys.argv[1:]:
    pio.read_json(src).write_image(src[: -len(".json")] + ".png", scale=1)
"""


def export_pngs(jsons: list[Path], timeout_s: float = 180) -> str | None:
    """PNG beside each figure JSON through kaleido, in a child process group that is killed if it hangs
    (kaleido drives a headless Chromium, which can stall on a loaded machine). Returns the problem or None."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _PNG_SCRIPT, *map(str, jsons)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the exporter and its browser
        proc.wait()
        return f"kaleido did not finish within {timeout_s:.0f} s"
    if proc.returncode != 0:
        lines = [ln for ln in (err or "").strip().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit code {proc.returncode}"
    return None


def save_figures(figs: dict[str, go.Figure], out: Path) -> tuple[list[str], str | None]:
    """Write every figure as HTML (plotly.js once, beside them) and PNG; returns (files, PNG problem or None)."""
    files, jsons = [], []
    for name, fig in figs.items():
        fig.write_html(out / f"{name}.html", include_plotlyjs="directory")
        fig.write_json(out / f"{name}.json")
        (out / f"{name}.png").unlink(missing_ok=True)  # never list a PNG left by an earlier report
        files.append(f"{name}.html")
        jsons.append(out / f"{name}.json")
    png_error = export_pngs(jsons)
    files += [f"{j.stem}.png" for j in jsons if (out / f"{j.stem}.png").exists()]
    return files, png_error


def _num(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a" if v is None or math.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.3f}"


def findings(goals: list[dict], runs: pd.DataFrame, settings: dict, runs_meta: list[dict]) -> list[str]:
    """One plain sentence per goal, saying 'not met' where RODS did not beat the target, and what is missing."""
    out = []
    planned = [f"{m}_r{k}" for k in range(settings["repeats"]) for m in settings["methods"]]
    done = {m["run"] for m in runs_meta if m["status"] == "finished"}
    # A run is complete when its event log holds every step; its exit code is reported on its own.
    recorded = set(runs.run[runs.steps >= settings["max_steps"]]) if not runs.empty else set()
    missing = [r for r in planned if r not in done and r not in recorded]
    if missing:
        out.append(
            f"- **INCOMPLETE** — runs planned but not finished: {', '.join(missing)}; goals that compare "
            "methods are measured only over the finished runs."
        )
    exited_badly = [m["run"] for m in runs_meta if m["status"] != "finished" and m["run"] in recorded]
    if exited_badly:
        out.append(
            f"- **NOTE** — {', '.join(exited_badly)}: every step was recorded, but the processes exited "
            "non-zero afterwards (see the run's log below); the run's data is used."
        )
    if not runs.empty and (runs.informative_share_last_half.fillna(0) == 0).all():
        out.append(
            "- **NO SIGNAL** — no run saw a single informative group (every group's rewards were equal, "
            "here all zero): GRPO had nothing to learn from, the detector found no boundary, and every "
            "method trained on nothing. The policy needs a warm start that earns partial rewards first."
        )
    for g in goals:
        verdict = "MET" if g["met"] else ("NOT MET" if g["met"] is False else "NOT DECIDED")
        out.append(f"- **{verdict}** — {g['goal']}: {_num(g['measured'])} (target {g['target']}; {g['detail']})")
    return out


def markdown(
    settings: dict,
    runs_meta: list[dict],
    runs: pd.DataFrame,
    methods: pd.DataFrame,
    goals: list[dict],
    files: list[str],
    png_error: str | None,
    ratio: tuple[float, float, float] | None = None,
    landing: pd.DataFrame | None = None,
) -> str:
    """summary.md's text.

    Length: the sections top to bottom, in the order the reader sees them."""

    lines = [
        "# Curriculum benchmark: sample efficiency at an equal trajectory budget",
        "",
        f"Config `{settings['config']}` (overrides {settings['sets'] or 'none'}), methods "
        f"{', '.join(settings['methods'])}, {settings['repeats']} repeat(s); each run {settings['max_steps']} steps x "
        f"{settings['trajectories_per_step']} trajectories = {settings['trajectories_per_run']} trajectories "
        f"(budget {settings['budget']}), held-out eval every {settings['eval_every']} steps and at the end. "
        f"Wall time {settings.get('wall_s', 'n/a')} s ({sum(m['wall_s'] for m in runs_meta):.0f} s in runs).",
        "",
        machine_md(settings["machine"]),
        "",
        *(
            [f"Pooled from {', '.join(f'`{f}`' for f in settings['pooled_from'])} (runs renumbered in that order).", ""]
            if settings.get("pooled_from")
            else []
        ),
        *differing_lines(settings.get("differs_by_method") or {}),
        "## Findings against the goals",
        "",
        *findings(goals, runs, settings, runs_meta),
        "",
    ]
    if settings["repeats"] < 2:
        lines += [
            "With one repeat per method the intervals are n/a and differences between methods are within "
            "run-to-run noise unless large; read them as one sample each.",
            "",
        ]
    if ratio is not None:
        lines += [
            f"Informative share over the last half, rods / static: **{ratio[0]:.2f}** (95% CI "
            f"{ratio[1]:.2f} .. {ratio[2]:.2f}; Fieller, paired by run seed, each run's last-half mean its level).",
            "",
        ]
    if landing is not None and not landing.empty:
        lines += [
            "## Where variants land (first probe)",
            "",
            "| method | variant distance (changes) | variants probed | first probe boundary |",
            "|---|---|---|---|",
            *[f"| {r.method} | {r.distance} | {r.probed} | {r.boundary_share:.2f} |" for r in landing.itertuples()],
            "",
        ]
    lines += [
        "## Per method (mean ± 95% t-interval over repeats)",
        "",
        "| method | " + " | ".join(RUN_METRICS) + " |",
        "|---" * (len(RUN_METRICS) + 1) + "|",
    ]
    for method, g in methods.groupby("method", sort=False):
        cells = [
            fmt_ci(r["mean"], r["ci95"])
            for _, r in g.set_index("metric").loc[list(RUN_METRICS)].reset_index().iterrows()
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Metrics: " + "; ".join(f"`{k}` = {v}" for k, v in RUN_METRICS.items()) + ".",
        "",
        "## Runs",
        "",
        "| run | status | wall s | steps | trajectories | informative first / last half | train reward first / "
        "last half | held-out progress step 0 / last | variance ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_run = runs.set_index("run") if not runs.empty else runs
    pairs = [
        ("trajectories",),
        ("informative_share_first_half", "informative_share_last_half"),
        ("reward_first_half", "reward_last_half"),
        ("initial_progress", "final_progress"),
        ("variance_ratio",),
    ]
    for meta in runs_meta:
        r = by_run.loc[meta["run"]] if meta["run"] in by_run.index else None
        vals = [" / ".join(_num(r[c]) for c in cols) if r is not None else "n/a" for cols in pairs]
        steps = int(r["steps"]) if r is not None else "n/a"
        lines.append(f"| {meta['run']} | {meta['status']} | {meta['wall_s']} | {steps} | " + " | ".join(vals) + " |")
    failed = [m for m in runs_meta if m["status"] != "finished"]
    for m in failed:
        lines += ["", f"Run {m['run']} {m['status']}; last lines of {m['log']}:", "```", *m["log_tail"], "```"]
    lines += ["", "## Figures", "", *[f"- [{f}]({f})" for f in files]]
    if png_error:
        lines += [
            "",
            f"PNG export failed ({png_error}); the figures are interactive HTML only. Kaleido needs a "
            "Chrome (`plotly_get_chrome`), which this machine cannot download.",
        ]
    return "\n".join(lines) + "\n"


def differing_lines(differs: dict[str, dict]) -> list[str]:
    """The report's note on run settings that are not the same for every method (pooled experiments only)."""
    if not differs:
        return []
    items = "; ".join(
        f"`{k}`: " + ", ".join(f"{m} {'default' if v is None else v}" for m, v in by.items())
        for k, by in differs.items()
    )
    return [
        f"**Settings differ between methods**: {items}. A method whose runs were reused from another experiment "
        "must not read these settings, or the comparison is not like for like.",
        "",
    ]


def latest_systems_overhead(results: Path = Path("bench/results/systems")) -> dict | None:
    """The rods-over-plain step overhead of the latest `rods bench systems`, if one was run.

    The CPU-time figure when present: on a shared machine the wall-time one mostly measures the neighbours.
    """
    latest = results / "latest.json"
    if not latest.exists():
        return None
    o = json.loads(latest.read_text()).get("overhead") or {}
    if o.get("drift"):
        return {
            "pct": o.get("overhead_cpu_pct", o.get("overhead_pct")),
            "ci95": None,
            "undecided": True,
            "basis": f"not decided: load drifted between the arms; RODS hooks {o.get('direct_pct')}% of a plain step",
        }
    if "overhead_cpu_pct" in o:
        return {"pct": o["overhead_cpu_pct"], "ci95": o.get("ci95_cpu_pct"), "basis": "process CPU time per step"}
    if "overhead_pct" in o:
        return {"pct": o["overhead_pct"], "ci95": o.get("ci95_pct"), "basis": "wall time per step"}
    return None


def write_report(out: Path, settings: dict, runs_meta: list[dict], log=print) -> dict:
    """Load the runs under out/runs, aggregate, and write summary.md, summary.json and the figures."""
    frames, runs, methods = load_experiment(out)
    overhead = latest_systems_overhead()
    ratio, landing = share_ratio(frames), landing_table(frames.landing)
    goals = goal_checks(methods, overhead, ratio, landing)
    files, png_error = save_figures(figures(frames, methods), out) if not runs.empty else ([], "no finished runs")
    (out / "summary.md").write_text(
        markdown(settings, runs_meta, runs, methods, goals, files, png_error, ratio, landing)
    )
    summary = {
        "settings": settings,
        "runs_meta": runs_meta,
        "runs": runs.to_dict("records"),
        "methods": methods.to_dict("records"),
        "goals": goals,
        "figures": files,
        "png_error": png_error,
        "informative_share_ratio": list(ratio) if ratio else None,
        "landing": landing.to_dict("records"),
        "curves": {
            "progress": mean_curve(frames.evals, "progress").to_dict("records"),
            "accuracy": mean_curve(frames.evals, "accuracy").to_dict("records"),
        },
    }
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, default=str))
    log(f"report: {out / 'summary.md'}")
    return summary

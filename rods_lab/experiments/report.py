"""The figures a paper would print, from one experiment folder into a docs folder: held-out curves with bootstrap
bands against trajectories, tokens and wall time, each arm's per-seed difference from static and from each offline
arm with a paired band, progress against distinct synthesized tasks, static's depletion curve, the active pool, the
ablation table; each as PNG plus the JSON of the numbers behind it, and summary.md / summary.json with every
interval, the pre-registered criteria's verdicts, the sizes of every set and the machine's load as each run started.

Composition only: the numbers come from rods_lab.experiments.efficiency, rods_lab.experiments.churn, rods_lab.experiments.ablation, rods_lab.experiments.paired,
rods_lab.experiments.criteria and rods_lab.experiments.sizes; plotting and PNG export reuse rods_lab.experiments.curriculum_report (band_figure,
export_pngs).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from rods_core.statistics import t_interval
from rods_lab.experiments.ablation import ablation_table, comparisons, display_table, markdown_table
from rods_lab.experiments.binding import binding_checks
from rods_lab.experiments.churn import CHURN_METRICS, churn_methods, churn_runs, depletion
from rods_lab.experiments.criteria import criteria, side_checks
from rods_lab.experiments.criteria import markdown as criteria_markdown
from rods_lab.experiments.curriculum_report import band_figure, export_pngs
from rods_lab.experiments.efficiency import (
    COST_AXES,
    at_equal_cost,
    attach_costs,
    curve_band,
    describe_reach,
    eval_cost,
    reach_table,
)
from rods_lab.experiments.heldout_report import bindings_data, synthesized, transfer
from rods_lab.experiments.heldout_report import markdown as heldout_markdown
from rods_lab.experiments.offline import OFFLINE_ARMS
from rods_lab.experiments.paired import distinct_tasks, paired_curves
from rods_lab.experiments.paper_frames import PaperFrames, evals_with_times, load_paper
from rods_lab.experiments.sizes import loads, sizes
from rods_lab.experiments.sizes import markdown as sizes_markdown
from rods_lab.results import fmt_ci, run_table
from storage.export import json_safe


def machine_note(settings: dict, runs_meta: list[dict]) -> str:
    """'quiet' or 'loaded (...)': the highest 1-minute load average recorded as a run started (the manifest's
    runs), else the one recorded when the command started; a load under 0.5 counts as quiet."""
    m = settings.get("machine") or {}
    loads = [r["load_1min_at_start"] for r in runs_meta if r.get("load_1min_at_start") is not None]
    load = max(loads) if loads else m.get("load_1min")
    if load is None:
        return "machine load not recorded"
    where = "as a run started" if loads else "when the command started"
    return "quiet" if load < 0.5 else f"loaded (load average up to {load} on {m.get('cores')} cores {where})"


def band_plot(curve: pd.DataFrame, x: str, y: str, title: str, y_title: str) -> go.Figure:
    """band_figure's lines per method, with the asymmetric bootstrap band (lo, hi) of curve_band around each."""
    fig = band_figure(curve.drop(columns=["lo", "hi"]), x, y, title, y_title)
    for line in list(fig.data):
        g = curve[curve.method == line.name].sort_values(x)
        fig.add_trace(
            go.Scatter(
                x=list(g[x]) + list(g[x])[::-1],
                y=list(g.hi) + list(g.lo)[::-1],
                mode="lines",
                fill="toself",
                fillcolor=line.line.color,
                opacity=0.15,
                line={"width": 0},
                hoverinfo="skip",
                showlegend=False,
                name=f"{line.name} 95% band",
            )
        )
    fig.update_layout(xaxis_title=COST_AXES.get(x, x))
    return fig


def table_figure(shown: pd.DataFrame, comps: list[dict], title: str) -> go.Figure:
    """The ablation table (text cells) above the comparisons (rods with every other arm, every arm with static),
    as one figure for the PNG."""
    comps = [c for c in comps if c["verdict"] != "not measured"]
    verdicts = pd.DataFrame(
        {
            "comparison": [f"{c['arm']} vs {c['other']}" for c in comps],
            "figure": [c["metric"].replace("_", " ") for c in comps],
            "difference (95% CI)": [
                f"{c['diff']:+.3f} ({c['lo']:+.3f} .. {c['hi']:+.3f}; {'paired' if c['paired'] else 'unpaired'}, "
                f"n {c['n']})"
                for c in comps
            ],
            "verdict": [f"{c['arm']} {c['verdict']} {c['other']}" for c in comps],
        }
    )
    top = (len(shown) + 1) / (len(shown) + len(verdicts) + 2)

    def table(frame: pd.DataFrame, y: list[float], widths: list[float] | None = None) -> go.Table:
        return go.Table(
            domain={"y": y},
            columnwidth=widths,
            header={"values": [c.replace("_", " ") for c in frame.columns], "align": "left"},
            cells={"values": [list(map(str, frame[c])) for c in frame.columns], "align": "left", "height": 24},
        )

    fig = go.Figure([table(shown, [1 - top, 1]), table(verdicts, [0, 1 - top - 0.04], [1.2, 1.6, 1.6, 3.0])])
    fig.update_layout(title=title, width=1300, height=160 + 34 * (len(shown) + len(verdicts) + 2))
    return fig


def paired_figures(ev: pd.DataFrame, note: str) -> tuple[dict[str, go.Figure], dict[str, list]]:
    """Per reference arm (static, each offline arm): every other arm's per-seed difference in held-out progress
    at each evaluation step, with the paired t 95% band (rods_lab.experiments.paired)."""
    figs, data = {}, {}
    for ref, curve in paired_curves(ev).items():
        name = f"paired_progress_vs_{ref}"
        ks = "/".join(map(str, sorted({int(n) for n in curve.n})))
        title = (
            f"held-out progress minus {ref}'s, paired by run seed<br><sup>seeds paired: {ks}; mean per-seed "
            f"difference, paired t 95% band; machine {note}</sup>"
        )
        figs[name] = band_plot(curve, "trajectories", "diff", title, f"held-out progress - {ref}")
        figs[name].add_hline(y=0, line={"color": "#888888", "dash": "dot"})
        data[name] = curve.to_dict("records")
    return figs, data


def distinct_figure(dt: pd.DataFrame, note: str) -> tuple[go.Figure, pd.DataFrame]:
    """Held-out progress against the distinct synthesized tasks trained on by each evaluation: mean over runs per
    arm and step, with a bootstrap band over runs (the x differs between arms, so nothing to pair)."""
    curve = curve_band(dt, "progress", "distinct_synthesized")
    title = (
        f"held-out progress vs distinct synthesized tasks trained on<br><sup>{_k(curve)}; static 0, offline arms "
        f"their M from step 0; 95% bootstrap band over runs; machine {note}</sup>"
    )
    fig = band_plot(curve, "distinct_synthesized", "progress", title, "held-out progress")
    fig.update_layout(xaxis_title="distinct synthesized tasks trained on (cumulative)")
    return fig, curve


def _k(curve: pd.DataFrame) -> str:
    ks = sorted({int(n) for n in curve.n}) if not curve.empty else []
    return "K = " + "/".join(map(str, ks)) if ks else "no runs"


def build(p: PaperFrames, settings: dict, runs_meta: list[dict]) -> tuple[dict[str, go.Figure], dict]:
    """(figures by name, the numbers behind them) of one experiment."""
    note = machine_note(settings, runs_meta)
    ev = attach_costs(p.frames.evals, p.frames.steps)
    steps = p.frames.steps.drop(columns=["trajectories"], errors="ignore")
    steps = steps.rename(columns={"trajectories_total": "trajectories"})
    curves = {
        "progress_vs_trajectories": (curve_band(ev, "progress", "trajectories"), "held-out progress"),
        "accuracy_vs_trajectories": (curve_band(ev, "accuracy", "trajectories"), "held-out accuracy"),
        "progress_vs_tokens": (curve_band(ev, "progress", "tokens"), "held-out progress"),
        "progress_vs_train_s": (curve_band(ev, "progress", "train_s"), "held-out progress"),
        "depletion": (curve_band(steps, "informative_share", "trajectories"), "share of informative groups"),
        "active_pool": (curve_band(steps, "pool_active", "trajectories"), "active tasks"),
    }
    figs, data = {}, {"settings": settings, "machine": note, "curves": {}}
    for name, (curve, y_title) in curves.items():
        x, y = curve.columns[2], curve.columns[3]
        title = f"{y_title} vs {COST_AXES.get(x, 'trajectories consumed')}<br><sup>{_k(curve)}, 95% bootstrap band over runs; machine {note}</sup>"
        figs[name] = band_plot(curve, x, y, title, y_title)
        data["curves"][name] = curve.to_dict("records")
    paired_figs, paired_data = paired_figures(ev, note)
    figs.update(paired_figs)
    data["curves"].update(paired_data)
    made = {m["run"]: int(m["offline"]["made"]) for m in runs_meta if m.get("offline")}
    dt = distinct_tasks(ev, p.groups, set(settings.get("pool") or []), made)
    if not dt.empty:
        figs["progress_vs_distinct_tasks"], dcurve = distinct_figure(dt, note)
        data["curves"]["progress_vs_distinct_tasks"] = dcurve.to_dict("records")
    data["distinct_tasks_runs"] = dt.to_dict("records")
    runs, equal = run_table(p.frames), {}
    for axis in ("tokens", "train_s"):
        values, equal[axis] = at_equal_cost(ev, "progress", axis)
        runs = runs.merge(values.rename(columns={"value": f"progress_equal_{axis}"}), on="run", how="left")
    max_steps = int(settings.get("max_steps") or p.frames.steps.step.max())
    bindings = binding_checks(p.configs, p.buffer, p.frames.steps, p.frames.landing, max_steps)
    no_ops = {b.arm: b.evidence for b in bindings if b.binds is False}
    table, comps = ablation_table(runs, p.frames.landing), comparisons(runs, p.frames.landing, no_ops=no_ops)
    table["no_op"] = table.arm.map(no_ops) if not table.empty else None
    figs["ablation_table"] = table_figure(
        display_table(table), comps, f"Ablations of rods: mean ± 95% t-interval over runs<br><sup>machine {note}</sup>"
    )
    refs = [m for m in ("static", *OFFLINE_ARMS) if not ev.empty and m in set(ev.method)]  # the paper's baselines
    reaches = [r for ref in refs for r in reach_table(ev, reference=ref)]
    reach = [r.as_dict() for r in reaches]
    churn = churn_runs(p.buffer, p.groups, p.frames.steps) if not p.frames.steps.empty else pd.DataFrame()
    costs = eval_cost(evals_with_times(p), p.step_times)
    synth = synthesized(p.groups, p.frames.steps, set(settings.get("pool") or []), made)
    data.update(
        {
            "reach": reach,
            "equal_cost": equal,
            "reach_sentences": [describe_reach(r) for r in reaches],
            "ablation_table": table.to_dict("records"),
            "comparisons": comps,
            "churn_runs": churn.to_dict("records"),
            "churn_methods": churn_methods(churn).to_dict("records") if not churn.empty else [],
            "depletion": depletion(runs),
            "eval_cost": eval_summary(costs),
            "runs": runs.to_dict("records"),
            "heldout_sets": settings.get("heldout_sets"),
            "collisions": p.collisions.groupby("method").n.sum().to_dict() if not p.collisions.empty else {},
            "transfer": transfer(p.heldout),
            "synthesized": synth,
            "bindings": bindings_data(bindings),
            "offline": {m["run"]: m["offline"] for m in runs_meta if m.get("offline")},
            "criteria": [c.as_dict() for c in criteria(runs, ev, comps, {r["arm"]: r for r in synth})],
            "side_checks": side_checks(runs, p.buffer, p.collisions),
            "sizes": sizes(settings, runs),
            "loads": loads(runs_meta),
        }
    )
    return figs, data


def paired_markdown(data: dict) -> list[str]:
    """Each paired difference curve's last point: arm - reference, its paired t interval and the seeds above."""
    lines = []
    for name, rows in data["curves"].items():
        if not name.startswith("paired_progress_vs_") or not rows:
            continue
        c = pd.DataFrame(rows)
        for r in c[c.step == c.groupby("method").step.transform("max")].itertuples():
            span = f"{r.lo:+.3f} .. {r.hi:+.3f}" if pd.notna(r.lo) else "interval n/a with one seed"
            lines.append(
                f"- {r.method} - {r.reference}: {r.diff:+.3f} (paired t 95% CI {span}; {r.above}/{r.n} seeds above; "
                f"step {r.step}, {r.trajectories:.0f} trajectories)"
            )
    head = ["## Held-out progress paired by run seed (last evaluation; curves in paired_progress_vs_*)", ""]
    return [*head, *lines, ""] if lines else []


def distinct_markdown(data: dict) -> list[str]:
    """Held-out progress and distinct synthesized tasks per arm at the last evaluation (the figure's end points)."""
    curve = pd.DataFrame(data["curves"].get("progress_vs_distinct_tasks") or [])
    if curve.empty:
        return []
    last = curve[curve.step == curve.groupby("method").step.transform("max")]
    lines = ["## Held-out progress vs distinct synthesized tasks (last evaluation, mean over runs)", ""]
    lines += [
        f"- {r.method}: {r.distinct_synthesized:.0f} distinct synthesized tasks, progress {r.progress:.3f} "
        f"(95% band {r.lo:.3f} .. {r.hi:.3f}, K = {r.n})"
        for r in last.itertuples()
    ]
    return [*lines, ""]


def eval_summary(costs: pd.DataFrame) -> dict:
    """Seconds per evaluation point: mean and 95% t-interval over the timed points."""
    mean, half, n = t_interval(costs.eval_s) if not costs.empty else (float("nan"), None, 0)
    return {"eval_s": mean, "eval_s_ci95": half, "points": n}


def reach_markdown(data: dict) -> list[str]:
    """The reach sentences, read as a claim only when static's H1 rose (the gate holds): against a flat static
    curve "reaching static's final progress" is reaching its step-0 figure, which says nothing of efficiency."""
    lines = [f"- {t}" for t in data["reach_sentences"]]
    gate = next((c for c in data["criteria"] if c["name"] == "gate"), None)
    if gate is None or gate["verdict"] == "holds" or not lines:
        return lines
    said = "did not rise by the gate's amount" if gate["verdict"] == "fails" else "could not be checked"
    return [
        f"**Not a claim:** static's H1 progress {said} (the gate: {gate['figures']}), so reaching static's final "
        "figure is close to reaching its step-0 figure; the design makes no sample-efficiency claim either way. "
        "The fractions, for the record:",
        "",
        *lines,
    ]


def markdown(data: dict, figures: list[str]) -> str:
    """summary.md: settings, the reach fractions, the ablation table, churn and depletion, the figures."""
    s = data["settings"]
    dep = data["depletion"]
    lines = [
        "# The paper's comparison at CPU scale",
        "",
        f"Arms {', '.join(s.get('arms') or s.get('methods') or [])}; K = {s.get('repeats')}; "
        f"{s.get('max_steps')} steps x {s.get('trajectories_per_step')} trajectories per run; "
        f"held-out evaluation every {s.get('eval_every')} steps; machine {data['machine']}.",
        *(  # what else fixes every run's floats (recorded since the restart check; rods_lab/experiments/arms.py)
            [f"Model `{s['model']}`, weights sha256 `{s['model_sha256']}`; torch's CPU kernels {s['cpu_kernels']}."]
            if s.get("model_sha256")
            else []
        ),
        "",
        *criteria_markdown(data["criteria"], data["side_checks"]),
        *paired_markdown(data),
        *distinct_markdown(data),
        *sizes_markdown(data["sizes"], data["loads"], (s.get("machine") or {}).get("cores")),
        "## Sample efficiency (rods against static's and the offline arms' final held-out progress)",
        "",
        *reach_markdown(data),
        "",
        *heldout_markdown(data),
        "## Ablations",
        "",
        *markdown_table(pd.DataFrame(data["ablation_table"]), data["comparisons"]),
        "",
        "Equal compute: " + ", ".join(f"{COST_AXES[a]} {v:.0f}" for a, v in data["equal_cost"].items() if v == v) + ".",
        "",
        "## Churn (mean ± 95% t-interval over runs)",
        "",
        "| arm | " + " | ".join(CHURN_METRICS) + " |",
        "|---|" + "---|" * len(CHURN_METRICS),
    ]
    cm = pd.DataFrame(data["churn_methods"])
    for arm, g in cm.groupby("method", sort=False) if not cm.empty else []:
        by = g.set_index("metric")
        lines.append(
            f"| {arm} | " + " | ".join(fmt_ci(by.at[m, "mean"], by.at[m, "ci95"]) for m in CHURN_METRICS) + " |"
        )
    lines += ["", "; ".join(f"`{k}`: {v}" for k, v in CHURN_METRICS.items()), ""]
    if dep:
        said = "fell by at least a third" if dep["fell_by_third"] else "did not fall by a third within the budget"
        lines += [
            f"Static's informative share {said}: {dep['first_half']:.3f} -> {dep['last_half']:.3f} "
            f"(fall {fmt_ci(dep['fall'], dep['fall_ci95'])}, K = {dep['n']}).",
            "",
        ]
    ec = data["eval_cost"]
    lines += [
        f"Held-out evaluation: {fmt_ci(ec['eval_s'], ec['eval_s_ci95'], 1)} s per point ({ec['points']} timed).",
        "",
    ]
    lines += ["## Figures", "", *[f"- [{f}]({f})" for f in figures]]
    return "\n".join(lines) + "\n"


def write(folder: Path, out: Path, png: bool = True, log=print) -> Path:
    """Write the figures (PNG + JSON of their numbers), summary.md and summary.json of `folder` into `out`;
    png=False skips the PNG export (kaleido drives a headless Chrome: ~30 s on a loaded machine)."""
    folder, out = Path(folder), Path(out)
    manifest = folder / "manifest.json"
    meta = json.loads(manifest.read_text()) if manifest.exists() else {}
    settings, runs_meta = meta.get("settings", {}), meta.get("runs", [])
    p = load_paper(folder)
    if p.frames.steps.empty:
        raise ValueError(f"{folder}: no run with recorded steps; nothing to report")
    figs, data = build(p, settings, runs_meta)
    out.mkdir(parents=True, exist_ok=True)
    files, problem = [], None
    with tempfile.TemporaryDirectory() as tmp:
        jsons = []
        for name, fig in figs.items():
            fig.write_json(Path(tmp) / f"{name}.json")
            jsons.append(Path(tmp) / f"{name}.json")
        problem = export_pngs(jsons) if png else None
        for j in jsons:
            png = j.with_suffix(".png")
            if png.exists():
                shutil.copy(png, out / png.name)
                files.append(png.name)
    behind = {**data["curves"], "ablation_table": {"table": data["ablation_table"], "comparisons": data["comparisons"]}}
    for name, numbers in behind.items():
        (out / f"{name}.json").write_text(json.dumps(json_safe(numbers), indent=1))
        files.append(f"{name}.json")
    if problem:
        log(f"PNG export failed ({problem}); the JSON is written")
    (out / "summary.json").write_text(json.dumps(json_safe(data), indent=1, default=str))
    (out / "summary.md").write_text(markdown(data, files))
    log(f"paper report: {out / 'summary.md'}")
    return out

"""The report's held-out part: the sets (sizes and hashes), held-out collisions per arm, transfer (H2, H3 at the
last checkpoint, paired against static by run seed), the distinct synthesized tasks each arm trained on, and
whether each ablation bound. Pure functions over rods_lab.experiments.paper_frames.PaperFrames and the experiment's manifest.
"""

from __future__ import annotations

import math

import pandas as pd

from rods_core.statistics import t_interval
from rods_lab.experiments.binding import Binding
from rods_lab.experiments.comparisons import compare
from rods_lab.results import fmt_ci


def transfer(scores: pd.DataFrame) -> list[dict]:
    """Per held-out set and arm: progress at each run's last scored checkpoint (mean, 95% t half-width, n) and
    the paired difference from static (per-seed differences: t-interval, seeds above)."""
    if scores.empty:
        return []
    last = scores[scores.step == scores.groupby("run").step.transform("max")]
    out = []
    for name, g in last.groupby("set", sort=True):
        ref = dict(zip(g[g.method == "static"].seed, g[g.method == "static"].progress, strict=True))
        for arm, a in g.groupby("method", sort=True):
            mean, half, n = t_interval(a.progress)
            c = compare(dict(zip(a.seed, a.progress, strict=True)), ref) if arm != "static" and ref else None
            out.append(
                {
                    "set": name,
                    "arm": arm,
                    "tasks": int(a.n.iat[0]),
                    "progress": mean,
                    "ci95": half,
                    "n": n,
                    "vs_static": c.as_dict() if c else None,
                }
            )
    return out


def synthesized(
    groups: pd.DataFrame, steps: pd.DataFrame, pool: set[str], offline_made: dict[str, int] | None = None
) -> list[dict]:
    """Per arm: distinct tasks outside the pool's seeds that its runs trained on (mean over runs) and trajectories.
    An offline run's count is its M (`offline_made`: run -> variants in its training set, all there from step 0),
    beside the distinct ones it happened to play (`played`)."""
    if groups.empty or not pool:
        return []
    offline_made = offline_made or {}
    per_run = groups[~groups.task_id.isin(pool)].groupby(["method", "run"]).task_id.nunique()
    traj = steps.groupby("run").trajectories_total.max() if "trajectories_total" in steps else pd.Series(dtype=float)
    out = []
    for arm, runs in groups.groupby("method").run.unique().items():
        played = [int(per_run.get((arm, r), 0)) for r in runs]
        mean, half, n = t_interval([offline_made.get(r, p) for r, p in zip(runs, played, strict=True)])
        t_mean, _, _ = t_interval([traj.get(r, math.nan) for r in runs])
        out.append(
            {"arm": arm, "distinct_synthesized": mean, "ci95": half, "runs": n, "trajectories": t_mean,
             "played": t_interval(played)[0]}
        )  # fmt: skip
    return out


def markdown(data: dict) -> list[str]:
    """The held-out sets, collisions, transfer, synthesized tasks and binding checks as Markdown lines."""
    lines = ["## Held-out sets", ""]
    sets = data.get("heldout_sets") or {}
    if sets:
        lines += [f"- {k}: {v['n']} tasks (its sha256 under Sizes)" for k, v in sets.items()]
        lines += ["", "Shared by every arm and run seed; H1 scored in-run, H2 and H3 on each saved checkpoint.", ""]
    else:
        lines += ["No experiment-level held-out sets: each run's own `eval` (see the settings).", ""]
    hits = data.get("collisions") or {}
    lines += [
        "Training variants equal to a held-out task (rejected as they arrived): "
        + (", ".join(f"{arm} {n}" for arm, n in hits.items()) if hits else "none found")
        + ".",
        "",
    ]
    if data.get("transfer"):
        lines += ["## Transfer (last checkpoint)", "", "| set | arm | tasks | progress | vs static, paired |"]
        lines += ["|---|---|---|---|---|"]
        for r in data["transfer"]:
            c = r["vs_static"]
            vs = (
                f"{c['diff']:+.3f} ({c['lo']:+.3f} .. {c['hi']:+.3f}; {c['above']}/{c['n']} seeds above)"
                if c and c.get("paired")
                else "—"
            )
            lines.append(f"| {r['set']} | {r['arm']} | {r['tasks']} | {fmt_ci(r['progress'], r['ci95'])} | {vs} |")
        lines.append("")
    if data.get("synthesized"):
        lines += ["## Synthesized tasks trained on", ""]
        lines += [
            f"- {r['arm']}: {fmt_ci(r['distinct_synthesized'], r['ci95'], 1)} distinct tasks outside the seeds"
            + (
                f" in its training set ({r['played']:.1f} played)"
                if r.get("played") != r["distinct_synthesized"]
                else ""
            )
            + f", {r['trajectories']:.0f} trajectories (K = {r['runs']})"
            for r in data["synthesized"]
        ]
        by = {r["arm"]: r for r in data["synthesized"]}
        for arm in ("offline_small", "offline_large"):
            if arm in by and "rods" in by and by["rods"]["distinct_synthesized"] > 0:
                o, r = by[arm], by["rods"]
                lines.append(
                    f"- {arm} / rods: {o['distinct_synthesized'] / r['distinct_synthesized']:.1f}x the synthesized "
                    f"tasks, {o['trajectories'] / r['trajectories']:.2f}x the trajectories (the paper: ~20x fewer "
                    "trajectories for RODS against a 17K-sample offline set)"
                )
        lines.append("")
    for run, o in (data.get("offline") or {}).items():
        lines.append(
            f"- {run}: {o['made']} of M = {o['asked']} variants synthesized up front "
            f"({o['heldout_collisions_excluded']} equal to a held-out task, left out)"
        )
    if data.get("offline"):
        lines.append("")
    if data.get("bindings"):
        lines += ["## Do the ablations bind?", ""]
        for b in data["bindings"]:
            said = {True: "binds", False: "**no-op** (not compared)", None: "not decided"}[b["binds"]]
            lines.append(f"- {b['arm']}: {said}: {b['evidence']}")
        lines.append("")
    return lines


def bindings_data(bindings: list[Binding]) -> list[dict]:
    return [{"arm": b.arm, "binds": b.binds, "evidence": b.evidence} for b in bindings]

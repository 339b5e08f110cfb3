"""Paired views of held-out progress for the paper's report. Every arm of a run seed shares that seed's held-out
set, warm start and pool, so an arm is read against a reference arm (static, each offline arm) by the per-seed
difference at each evaluation step, with a paired Student-t 95% band (rods_lab.experiments.comparisons.paired); and progress
is read against the distinct synthesized tasks a run had trained on by each evaluation (static: 0; an offline arm:
its M variants, all in its training set from step 0). Pure functions over the report's frames and the manifest.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rods_lab.experiments.comparisons import paired
from rods_lab.experiments.offline import OFFLINE_ARMS

PAIRED_COLUMNS = ["method", "reference", "step", "trajectories", "diff", "lo", "hi", "boot_lo", "boot_hi", "n", "above"]


def reference_pairs(arms: list[str]) -> list[tuple[str, str]]:
    """(arm, reference): every arm against static, and every arm that is neither static nor offline against each
    offline arm present (an offline arm against static is already in the first list)."""
    out = [(a, "static") for a in arms if a != "static" and "static" in arms]
    offline = [o for o in OFFLINE_ARMS if o in arms]
    return out + [(a, o) for o in offline for a in arms if a != "static" and a not in OFFLINE_ARMS]


def paired_curve(
    evals: pd.DataFrame, arm: str, reference: str, y: str = "progress", x: str = "trajectories", boots: int = 1000
) -> pd.DataFrame:
    """arm - reference on `y` at every evaluation step both reached, over the run seeds both ran: the mean
    per-seed difference, its paired t 95% interval (lo, hi; nan with one seed), the bootstrap over seeds, the seeds
    (n) and those where the arm was above; x is the mean `x` of the two arms' runs of those seeds."""
    if evals.empty or "seed" not in evals:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    ev = evals.drop_duplicates(["run", "step"], keep="last")
    a, b = ev[ev.method == arm], ev[ev.method == reference]
    rows = []
    for step in sorted(set(a.step) & set(b.step)):
        sa, sb = a[a.step == step], b[b.step == step]
        c = paired(dict(zip(sa.seed, sa[y], strict=True)), dict(zip(sb.seed, sb[y], strict=True)), boots)
        if c is None:
            continue
        seeds = set(sa.seed) & set(sb.seed)
        both = pd.concat([sa[sa.seed.isin(seeds)], sb[sb.seed.isin(seeds)]])
        rows.append(
            {"method": arm, "reference": reference, "step": int(step), "trajectories": float(both[x].mean()),
             "diff": c.diff, "lo": c.lo, "hi": c.hi, "boot_lo": c.boot_lo, "boot_hi": c.boot_hi, "n": c.n,
             "above": c.above}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS).rename(columns={"trajectories": x})


def paired_curves(evals: pd.DataFrame, y: str = "progress", x: str = "trajectories") -> dict[str, pd.DataFrame]:
    """reference -> the paired_curve of every arm against it (reference_pairs), one frame per reference."""
    arms = list(dict.fromkeys(evals.method)) if not evals.empty else []
    out: dict[str, list[pd.DataFrame]] = {}
    for arm, ref in reference_pairs(arms):
        curve = paired_curve(evals, arm, ref, y, x)
        if not curve.empty:
            out.setdefault(ref, []).append(curve)
    return {ref: pd.concat(parts, ignore_index=True) for ref, parts in out.items()}


def distinct_tasks(
    evals: pd.DataFrame, groups: pd.DataFrame, pool: set[str], offline_made: dict[str, int]
) -> pd.DataFrame:
    """Per run and evaluation step: the distinct task ids outside the pool's seeds that had entered training (played
    in a group, probes included) by that step, beside the held-out progress there. An offline run's count is its M
    (`offline_made`: run -> variants in its training set) at every step: they were all there from the start. Empty
    when the pool is not recorded (nothing tells a seed from a variant)."""
    cols = ["run", "method", "seed", "step", "trajectories", "distinct_synthesized", "progress"]
    if evals.empty or not pool:
        return pd.DataFrame(columns=cols)
    ev = evals.drop_duplicates(["run", "step"], keep="last").sort_values(["run", "step"])
    synth = groups[~groups.task_id.isin(pool)] if not groups.empty else groups
    first = synth.groupby(["run", "task_id"]).step.min().reset_index() if not synth.empty else synth
    entered = {run: g.step.to_numpy() for run, g in first.groupby("run")} if not first.empty else {}
    rows = []
    for r in ev.itertuples(index=False):
        n = offline_made[r.run] if r.run in offline_made else int((entered.get(r.run, np.array([])) <= r.step).sum())
        rows.append({"run": r.run, "method": r.method, "seed": r.seed, "step": int(r.step),
                     "trajectories": float(r.trajectories), "distinct_synthesized": float(n),
                     "progress": float(r.progress)})  # fmt: skip
    return pd.DataFrame(rows, columns=cols)

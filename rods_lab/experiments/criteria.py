"""The learning-pool design's pre-registered criteria (docs/experiments/learning-pool/design.md), evaluated on an
experiment's run table: the gate (static's held-out H1 progress rises), support S1-S4 and refutation R1-R3.

Every comparison is paired by run seed and takes its Holm-adjusted p from the report's whole table
(rods_lab.experiments.ablation.comparisons); a difference is claimed only when that p < 0.05 and the paired interval excludes 0.
A criterion whose arm did not run, or with fewer than MIN_RUNS paired seeds, is not evaluable (a pilot with rods and
static at K = 2 can only decide the gate). The gate never changes another criterion's verdict: the verdict is
what the comparison says; when the gate fails, the criterion's figures say so beside it. Pure functions.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import pandas as pd

from rods_lab.experiments.ablation import MIN_RUNS, comparisons
from rods_lab.experiments.comparisons import ALPHA
from rods_lab.experiments.efficiency import few_runs, reach_cost

GATE_RISE = 0.03  # static's mean H1 rise (last evaluation minus step 0) the gate asks for, rising in every seed
MARGIN = 0.02  # S3: rods - offline_small's low end above -MARGIN; R1: rods - static's high end below +MARGIN
REACH_GOAL = 0.2  # S4: rods reaches offline_large's final H1 within this fraction of its trajectories
VERDICTS = ("supported", "refuted", "inconclusive", "not evaluable")
GATE_VERDICTS = ("holds", "fails", "not evaluable")
CLAIMS = {
    "gate": f"static's H1 progress, last evaluation minus step 0, rises by >= +{GATE_RISE} on average and in "
    "every run seed",
    "S1": "rods beats static on final H1 progress",
    "S2": "rods beats uniform_parents on final H1 progress",
    "S3": f"rods is not worse than offline_small by more than {MARGIN} (paired interval's low end above -{MARGIN})",
    "S4": f"rods reaches offline_large's final H1 within <= 1/{round(1 / REACH_GOAL)} of its trajectories",
    "R1": f"the paired interval of rods - static on final H1 lies below +{MARGIN}, with static's H1 rising",
    "R2": "uniform_parents is not beaten by rods and its mean is at or above rods'",
    "R3": "offline_small or offline_large beats rods",
}


@dataclass(frozen=True)
class Criterion:
    """One pre-registered criterion: whether its condition held on the numbers (None: not evaluable), the
    verdict it gives (VERDICTS; the gate: GATE_VERDICTS), the figures in words and the Holm-adjusted p."""

    name: str
    claim: str
    holds: bool | None
    verdict: str
    figures: str
    p_holm: float | None = None
    numbers: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def gate(runs: pd.DataFrame) -> Criterion:
    """static's final_progress - initial_progress per run seed: holds when the mean is >= GATE_RISE and every
    seed's rise is above 0."""
    st = runs[runs.method == "static"] if not runs.empty else runs
    st = st[st.final_progress.notna() & st.initial_progress.notna()] if not st.empty else st
    if st.empty:
        return Criterion("gate", CLAIMS["gate"], None, "not evaluable", "no static run with a step-0 evaluation")
    rises = dict(zip(st.seed, st.final_progress - st.initial_progress, strict=True))
    mean = sum(rises.values()) / len(rises)
    holds = bool(mean >= GATE_RISE - 1e-12 and all(r > 0 for r in rises.values()))
    each = ", ".join(f"seed {s}: {r:+.3f}" for s, r in sorted(rises.items()))
    figures = f"mean rise {mean:+.3f} over {len(rises)} run seeds ({each})"
    numbers = {"mean_rise": mean, "rises": {str(k): v for k, v in rises.items()}}
    return Criterion("gate", CLAIMS["gate"], holds, "holds" if holds else "fails", figures, None, numbers)


def _row(comps: list[dict], other: str, metric: str = "final_progress") -> dict | None:
    return next((c for c in comps if c["arm"] == "rods" and c["other"] == other and c["metric"] == metric), None)


def _missing(c: dict | None, other: str, arms: set[str], min_n: int) -> str | None:
    """Why rods vs `other` cannot be evaluated (None: it can)."""
    lacking = [a for a in ("rods", other) if a not in arms]
    if lacking:
        return f"no {' or '.join(lacking)} runs"
    if c is None or math.isnan(c.get("diff", math.nan)):
        return f"rods vs {other} not measured"
    if not c.get("paired"):
        return f"rods and {other} share no run seed: not paired"
    if c["n"] < min_n:
        return f"{c['n']} run seeds paired; at least {min_n} needed"
    if c.get("no_op"):
        return f"{other} is a no-op ({c['no_op']})"
    return None


def _span(c: dict, other: str) -> str:
    return (
        f"rods - {other} {c['diff']:+.3f} (paired 95% t-CI {c['lo']:+.3f} .. {c['hi']:+.3f}, "
        f"{c['above']}/{c['n']} seeds above)"
    )


def _equal_budget(synthesized: dict[str, dict]) -> str:
    """'; distinct synthesized tasks rods 41, offline_small 41; trajectories 4800 / 4800' where both are known."""
    r, o = synthesized.get("rods"), synthesized.get("offline_small")
    if not r or not o:
        return ""
    return (
        f"; distinct synthesized tasks rods {r['distinct_synthesized']:.1f}, offline_small "
        f"{o['distinct_synthesized']:.1f}; trajectories {r['trajectories']:.0f} / {o['trajectories']:.0f}"
    )


def _claimed(c: dict, side: int) -> bool:
    """A difference is claimed when the Holm-adjusted p < ALPHA and the interval excludes 0 on `side`."""
    p = c.get("p_holm")
    return p is not None and not math.isnan(p) and p < ALPHA and (c["lo"] > 0 if side > 0 else c["hi"] < 0)


def _judge(name: str, holds: bool, g: Criterion, figures: str, c: dict | None, numbers: dict) -> Criterion:
    """Supported (S) or refuted (R) when the condition holds, otherwise inconclusive; the gate's outcome is said
    beside the figures when it did not hold, and never changes the verdict."""
    verdict = ("supported" if name.startswith("S") else "refuted") if holds else "inconclusive"
    if g.holds is not True:
        figures += f"; the gate {g.verdict.replace('fails', 'failed')} (static's H1 did not rise as designed)"
    p = c.get("p_holm") if c else None
    return Criterion(name, CLAIMS[name], holds, verdict, figures, p, numbers)


def _not_evaluable(name: str, why: str) -> Criterion:
    return Criterion(name, CLAIMS[name], None, "not evaluable", why)


def criteria(
    runs: pd.DataFrame,
    evals: pd.DataFrame,
    comps: list[dict] | None = None,
    synthesized: dict[str, dict] | None = None,
    min_n: int = MIN_RUNS,
    boots: int = 2000,
) -> list[Criterion]:
    """The gate, S1-S4 and R1-R3 over the run table (rods_lab.results.run_table: method, seed, final_progress,
    initial_progress) and the H1 eval frame (for S4's reach). `comps` is the report's table of comparisons
    (its Holm family); computed from `runs` alone when not given. `synthesized` (arm -> rods_lab.experiments.heldout_report's
    row: distinct_synthesized, trajectories) adds to S3 what its "equal trajectories and tasks" rests on."""
    comps = comparisons(runs, pd.DataFrame()) if comps is None else comps
    arms = set(runs.method) if not runs.empty else set()
    g = gate(runs)
    out = [g]
    for name, other in (("S1", "static"), ("S2", "uniform_parents"), ("S3", "offline_small")):
        c = _row(comps, other)
        why = _missing(c, other, arms, min_n)
        if why:
            out.append(_not_evaluable(name, why))
            continue
        holds = _claimed(c, +1) if name != "S3" else bool(c["lo"] > -MARGIN)
        figures = _span(c, other) + (_equal_budget(synthesized or {}) if name == "S3" else "")
        out.append(_judge(name, holds, g, figures, c, {"comparison": c}))
    out.append(_reach(evals, arms, g, min_n, boots))
    c = _row(comps, "static")
    why = _missing(c, "static", arms, min_n)
    out.append(
        _not_evaluable("R1", why)
        if why
        else _judge("R1", bool(c["hi"] < MARGIN), g, _span(c, "static"), c, {"comparison": c})
    )
    c = _row(comps, "uniform_parents")
    why = _missing(c, "uniform_parents", arms, min_n)
    out.append(
        _not_evaluable("R2", why)
        if why
        else _judge("R2", not _claimed(c, +1) and c["diff"] <= 0, g, _span(c, "uniform_parents"), c, {"comparison": c})
    )
    out.append(_offline_beats(comps, arms, g, min_n))
    return out


def _reach(evals: pd.DataFrame, arms: set[str], g: Criterion, min_n: int, boots: int) -> Criterion:
    """S4: the trajectories rods' mean H1 curve needs to reach offline_large's final mean, as a fraction of
    offline_large's; holds when the paired bootstrap interval's high end is within REACH_GOAL."""
    lacking = [a for a in ("rods", "offline_large") if a not in arms]
    if lacking:
        return _not_evaluable("S4", f"no {' or '.join(lacking)} runs")
    r = reach_cost(evals, "rods", "offline_large", "progress", "trajectories", boots)
    if r is None or min(r.n) < min_n:
        return _not_evaluable("S4", f"{min(r.n) if r else 0} runs; at least {min_n} needed")
    lo, hi = r.ci95
    at = f"at {r.fraction:.2f} of" if math.isfinite(r.fraction) else "never within"
    how = "paired bootstrap over run seeds" if r.paired else "bootstrap over each arm's runs"
    figures = (
        f"rods reaches offline_large's final H1 {r.target:.3f} {at} its trajectories (95% CI {_x(lo)} .. "
        f"{_x(hi)}, {how}{few_runs(r)}; goal <= {REACH_GOAL})"
    )
    return _judge("S4", bool(hi <= REACH_GOAL), g, figures, None, {"reach": r.as_dict()})


def _offline_beats(comps: list[dict], arms: set[str], g: Criterion, min_n: int) -> Criterion:
    """R3: either offline arm beats rods (Holm p < ALPHA, the interval of rods - offline below 0)."""
    present = [(o, _row(comps, o)) for o in ("offline_small", "offline_large")]
    usable = [(o, c) for o, c in present if not _missing(c, o, arms, min_n)]
    if not usable:
        return _not_evaluable("R3", "; ".join(f"{o}: {_missing(c, o, arms, min_n)}" for o, c in present))
    holds = any(_claimed(c, -1) for _, c in usable)
    figures = "; ".join(_span(c, o) for o, c in usable)
    best = min((c for _, c in usable), key=lambda c: c["diff"])  # the offline arm closest to beating rods: its p
    return _judge("R3", holds, g, figures, best, {o: c for o, c in usable})


def _x(v: float) -> str:
    return f"{v:.2f}" if math.isfinite(v) else "not reached"


def side_checks(runs: pd.DataFrame, buffer: pd.DataFrame, collisions: pd.DataFrame) -> list[dict]:
    """The design's checks that do not gate: P_max binds (`offer/budget` refusals in rods' runs; none: it did
    not bind), and the synthesized variants rejected for equalling a held-out task (never trained on)."""
    rods = sorted(runs[runs.method == "rods"].run) if not runs.empty else []
    out = []
    if rods:
        hits = buffer[(buffer.reason == "offer/budget") & buffer.run.isin(rods)] if not buffer.empty else buffer
        per = hits.groupby("run").size().to_dict() if not hits.empty else {}
        each = ", ".join(f"{r} {per.get(r, 0)}" for r in rods)
        out.append(
            {"check": "P_max binds in rods' runs", "holds": bool(per),
             "figures": f"{sum(per.values())} offer/budget refusals ({each})"
             + ("" if per else ": P_max did not bind")}
        )  # fmt: skip
    n = {} if collisions.empty else collisions.groupby(["method", "set"]).n.sum().to_dict()
    said = ", ".join(f"{arm} {name} {k}" for (arm, name), k in sorted(n.items())) or "none found"
    out.append(
        {"check": "held-out collisions left out of training", "holds": None,
         "figures": f"variants equal to a held-out task, rejected before training: {said}"}
    )  # fmt: skip
    return out


def markdown(found: list[dict], checks: list[dict] = ()) -> list[str]:
    """The criteria (Criterion.as_dict rows) as a Markdown table, the overall outcome in one line, then the
    checks that do not gate (side_checks)."""
    lines = ["## Pre-registered criteria (design.md)", ""]
    lines += ["| criterion | claim | figures | Holm p | verdict |", "|---|---|---|---|---|"]
    for c in found:
        p = "—" if c["p_holm"] is None or math.isnan(c["p_holm"]) else f"{c['p_holm']:.3g}"
        lines.append(f"| {c['name']} | {c['claim']} | {c['figures']} | {p} | **{c['verdict']}** |")
    said = {v: [c["name"] for c in found if c["verdict"] == v] for v in (*VERDICTS, "holds", "fails")}
    lines += ["", "Outcome: " + "; ".join(f"{v}: {', '.join(n)}" for v, n in said.items() if n) + ".", ""]
    lines += [f"- Checked, not gating: {c['check']}: {c['figures']}." for c in checks]
    lines += [""] if checks else []
    lines += [
        "A difference is claimed only when its Holm-adjusted p (over the report's whole comparison table) is below "
        f"{ALPHA} and its paired interval excludes 0; fewer than {MIN_RUNS} paired run seeds: not evaluable.",
        "",
    ]
    return lines

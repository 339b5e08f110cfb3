"""Sample efficiency over finished runs: held-out curves against trajectories, generated tokens and training
wall time, intervals over runs, and what it costs a method to reach another method's final score.

Pure functions over the tidy frames of bench (rods_lab.results.Frames: `evals`, `steps`). The unit of
replication is the run: every interval is over runs and every bootstrap resamples whole runs (curves), never
points within a run (rods_core.statistics: the t-interval at few runs, BCa from rods_core.statistics.SMALL_K). Curves are
per method means over runs at each evaluation step (runs of one design evaluate at the same steps); "the cost
to reach a target" is where a method's mean curve first reaches it, interpolated linearly between evaluation
points, over the x the reference method consumed to reach its own final score (its budget). The paper's
headline is this fraction on trajectories (RODS ~1/20 of an offline pipeline; the moonshot here: <= 1/5); the
same fraction on generated tokens and wall time says what it is at equal compute (a RODS step generates more).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from rods_core.statistics import SMALL_K, bootstrap_indices, bootstrap_mean_ci, quantile_interval

# The x axes a curve can be read against (column of the evals frame once costs are attached -> meaning).
COST_AXES: dict[str, str] = {
    "trajectories": "trajectories consumed",
    "tokens": "completion tokens generated in training (model tokens only)",
    "train_s": "wall seconds in training steps (evaluation excluded)",
}


def attach_costs(evals: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The eval rows with the cumulative `tokens` and `train_s` (step seconds) each run had spent by the
    eval's step (0 at step 0; an eval runs after its step's row, so the step counts)."""
    if evals.empty:
        return evals.assign(tokens=pd.Series(dtype=float), train_s=pd.Series(dtype=float))
    st = steps.sort_values(["run", "step"]).copy()
    for src, dst in (("tokens", "tokens"), ("step_s", "train_s")):
        col = st[src] if src in st else pd.Series(np.nan, index=st.index)
        st[dst] = col.fillna(0).groupby(st["run"]).cumsum()
    cum = st[["run", "step", "tokens", "train_s"]]
    out = evals.drop(columns=[c for c in ("tokens", "train_s") if c in evals]).merge(
        cum, on=["run", "step"], how="left"
    )
    zero = out.step == 0
    out.loc[zero, ["tokens", "train_s"]] = out.loc[zero, ["tokens", "train_s"]].fillna(0.0)
    return out


def run_matrix(evals: pd.DataFrame, method: str, y: str, x: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eval steps, X, Y) of one method: one row per run, one column per evaluation step that every run of
    the method reached (a run cut short drops the later points of all runs rather than biasing them)."""
    ev = evals[evals.method == method]
    if ev.empty:
        return np.array([]), np.empty((0, 0)), np.empty((0, 0))
    ev = ev.drop_duplicates(["run", "step"], keep="last")
    ys = ev.pivot(index="run", columns="step", values=y).dropna(axis=1)
    xs = ev.pivot(index="run", columns="step", values=x)[ys.columns]
    return np.asarray(ys.columns, dtype=float), xs.to_numpy(dtype=float), ys.to_numpy(dtype=float)


def run_seeds(evals: pd.DataFrame, method: str) -> list | None:
    """The run seed of each row of run_matrix(evals, method, ...) (runs in the pivot's order); None without seeds."""
    ev = evals[evals.method == method]
    if "seed" not in ev or ev.empty:
        return None
    return list(ev.drop_duplicates("run").set_index("run").sort_index().seed)


def first_reach(x: np.ndarray, y: np.ndarray, target: float) -> float:
    """The first x at which the piecewise-linear curve (x, y) reaches `target` (inf if it never does)."""
    for i in range(len(y)):
        if y[i] >= target:
            if i == 0:
                return float(x[0])
            x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
            return float(x0 + (target - y0) * (x1 - x0) / (y1 - y0))
    return math.inf


def curve_band(evals: pd.DataFrame, y: str, x: str = "trajectories", boots: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per method and evaluation step: mean x, mean y over runs and a 95% band of the mean over runs
    (rods_core.statistics.bootstrap_mean_ci: the t-interval below SMALL_K runs, where a bootstrap band is too
    narrow, BCa from there; lo = hi = the mean with one run). Columns method, step, x, y, lo, hi, n."""
    rows = []
    for method in dict.fromkeys(evals.method) if not evals.empty else []:
        steps, X, Y = run_matrix(evals, method, y, x)
        if not Y.size:
            continue
        for j, step in enumerate(steps):
            band = bootstrap_mean_ci(Y[:, j], boots=boots, seed=seed) if len(Y) > 1 else None
            rows.append(
                {
                    "method": method,
                    "step": int(step),
                    x: float(X[:, j].mean()),
                    y: float(Y[:, j].mean()),
                    "lo": band.lo if band else float(Y[0, j]),
                    "hi": band.hi if band else float(Y[0, j]),
                    "n": len(Y),
                }
            )
    return pd.DataFrame(rows, columns=["method", "step", x, y, "lo", "hi", "n"])


@dataclass(frozen=True)
class ReachCost:
    """What `method` spent to reach `reference`'s final mean held-out score, as a fraction of what the
    reference spent (its x at its last evaluation); fraction inf: never reached within its budget."""

    method: str
    reference: str
    axis: str
    target: float  # the reference's final mean score
    reached_at: float  # the method's x where its mean curve first reaches target (inf: never)
    reference_total: float  # the reference's mean x at its last evaluation
    fraction: float
    ci95: tuple[float, float]  # percentile bootstrap over runs of both methods (inf: not reached in > 2.5%)
    reached_share: float  # share of bootstrap resamples in which the method reached the target
    n: tuple[int, int]  # runs of (method, reference)
    paired: bool = False  # resampled by run seed (both methods ran the same seeds), else each method on its own

    def as_dict(self) -> dict:
        return asdict(self)


def reach_cost(
    evals: pd.DataFrame,
    method: str = "rods",
    reference: str = "static",
    y: str = "progress",
    axis: str = "trajectories",
    boots: int = 2000,
    seed: int = 0,
) -> ReachCost | None:
    """The cost fraction of `method` to reach `reference`'s final score on one x axis (COST_AXES), with a
    bootstrap interval: the two mean curves rebuilt from resampled runs, the target re-read. Paired when both
    methods ran the same run seeds (one draw of seeds for both: each seed shares a held-out set and warm start),
    else runs of each method resampled on their own. None when either method has no evaluated run."""
    _, xm, ym = run_matrix(evals, method, y, axis)
    _, xr, yr = run_matrix(evals, reference, y, axis)
    if not ym.size or not yr.size:
        return None
    rng = np.random.default_rng(seed)
    sm, sr = run_seeds(evals, method), run_seeds(evals, reference)
    paired = sm is not None and sr is not None and len(set(sr)) == len(sr) and sorted(sm) == sorted(sr)
    if paired:
        order = [sm.index(s) for s in sr]  # the method's rows in the reference's seed order
        xm, ym = xm[order], ym[order]
        im = ir = bootstrap_indices(len(yr), boots, rng, identity_first=True)
    else:
        im = bootstrap_indices(len(ym), boots, rng, identity_first=True)
        ir = bootstrap_indices(len(yr), boots, rng, identity_first=True)
    fractions, reached = [], []
    for a, b in zip(im, ir, strict=True):
        target = yr[b, -1].mean()
        total = xr[b, -1].mean()
        at = first_reach(xm[a].mean(axis=0), ym[a].mean(axis=0), target)
        reached.append(math.isfinite(at))
        fractions.append(at / total if total > 0 else math.inf)
    lo, hi = quantile_interval(fractions[1:])
    target, total = float(yr[:, -1].mean()), float(xr[:, -1].mean())
    return ReachCost(
        method=method,
        reference=reference,
        axis=axis,
        target=target,
        reached_at=first_reach(xm.mean(axis=0), ym.mean(axis=0), target),
        reference_total=total,
        fraction=float(fractions[0]),
        ci95=(float(lo), float(hi)),
        reached_share=float(np.mean(reached[1:])),
        n=(len(ym), len(yr)),
        paired=paired,
    )


def reach_table(
    evals: pd.DataFrame, method: str = "rods", reference: str = "static", y: str = "progress", boots: int = 2000
) -> list[ReachCost]:
    """reach_cost on every axis of COST_AXES that the frame carries (tokens and wall time need attach_costs)."""
    out = []
    for axis in COST_AXES:
        if axis in evals and evals[axis].notna().any():
            r = reach_cost(evals, method, reference, y, axis, boots)
            if r is not None:
                out.append(r)
    return out


def describe_reach(r: ReachCost, goal: float = 0.2) -> str:
    """One plain sentence on a ReachCost, saying whether the fraction is under `goal` (the moonshot 1/5)."""
    unit = COST_AXES[r.axis]
    lo, hi = r.ci95
    if not math.isfinite(r.reached_at):
        return (
            f"{r.method} never reached {r.reference}'s final held-out {r.target:.3f} within its budget "
            f"({unit}; reached in {r.reached_share:.0%} of bootstrap resamples; K = {r.n[0]} / {r.n[1]})"
        )
    if r.reached_at == 0:
        return (
            f"{r.method} was at or above {r.reference}'s final held-out {r.target:.3f} before training (step 0, "
            f"K = {r.n[0]} / {r.n[1]}; {unit}): the runs say nothing about sample efficiency"
        )
    verdict = "under" if hi <= goal else ("not under" if lo > goal else "not decided against")
    how = "paired bootstrap over run seeds" if r.paired else "bootstrap over each method's runs"
    return (
        f"{r.method} reached {r.reference}'s final held-out {r.target:.3f} at {r.fraction:.2f} of its {unit} "
        f"(95% CI {_fmt(lo)} .. {_fmt(hi)}, {how}, K = {r.n[0]} / {r.n[1]}{few_runs(r)}): {verdict} the goal of "
        f"{goal:.2f}"
    )


def few_runs(r: ReachCost) -> str:
    """'; too few runs for a bootstrap: ...' below SMALL_K runs a side, where a percentile bootstrap's interval is
    too narrow (no t-interval exists for a reach fraction to give instead)."""
    if min(r.n) >= SMALL_K:
        return ""
    return f"; fewer than {SMALL_K} runs: a bootstrap interval this few runs is too narrow"


def _fmt(v: float) -> str:
    return f"{v:.2f}" if math.isfinite(v) else "not reached"


def eval_cost(evals: pd.DataFrame, step_times: pd.DataFrame) -> pd.DataFrame:
    """Seconds each evaluation took: its event's time minus the time of the step row it follows (the step-0
    evaluation is not timed: nothing precedes it). `step_times`: run, step, time of step rows; `evals` must
    carry a `time` column. Columns run, method, step, eval_s."""
    if evals.empty or "time" not in evals:
        return pd.DataFrame(columns=["run", "method", "step", "eval_s"])
    st = step_times.drop_duplicates(["run", "step"], keep="last").rename(columns={"time": "step_time"})
    m = evals.merge(st[["run", "step", "step_time"]], on=["run", "step"], how="inner")
    m["eval_s"] = (pd.to_datetime(m["time"]) - pd.to_datetime(m["step_time"])).dt.total_seconds()
    return m[["run", "method", "step", "eval_s"]].reset_index(drop=True)


def at_equal_cost(evals: pd.DataFrame, y: str = "progress", axis: str = "tokens") -> tuple[pd.DataFrame, float]:
    """Each run's `y` at the same spend on `axis`: the smallest final spend over all runs (so no run is read past
    its end), each run's curve interpolated there. Returns (run, value) rows and that common spend."""
    ev = evals.dropna(subset=[axis, y]).sort_values(["run", "step"])
    if ev.empty:
        return pd.DataFrame(columns=["run", "value"]), float("nan")
    common = float(ev.groupby("run")[axis].max().min())
    rows = [{"run": run, "value": float(np.interp(common, g[axis], g[y]))} for run, g in ev.groupby("run", sort=True)]
    return pd.DataFrame(rows), common

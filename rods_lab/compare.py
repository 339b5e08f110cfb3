"""The Compare page's curves as plain data: the x axes a person can choose (trajectories, tokens, seconds),
and the held-out curves' intervals (Wilson for accuracy, Student-t for the mean progress reward) from the
held-out set's size the run recorded. No Streamlit here; charts.by_run draws them."""

from __future__ import annotations

import math

import pandas as pd

from rods_core.statistics import t_quantile, wilson
from rods_lab.results import Frames

# x axis -> (the steps table's cumulative column, the axis title)
X_AXES: dict[str, tuple[str, str]] = {
    "trajectories": ("trajectories_total", "trajectories consumed (rollouts, all processes)"),
    "tokens": ("tokens_total", "completion tokens generated in training"),
    "seconds": ("seconds_total", "training seconds (steps only: evaluation and start-up excluded)"),
}
SOURCES = {"trajectories_total": "trajectories", "tokens_total": "tokens", "seconds_total": "step_s"}


def t_band(mean: float, sd: float | None, n: int) -> tuple[float, float]:
    """mean ± t(0.975, n-1) · sd / √n, clipped to the reward's [0, 1]; (nan, nan) without an sd or for n < 2."""
    if sd is None or n < 2 or not math.isfinite(sd):
        return math.nan, math.nan
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return max(0.0, mean - half), min(1.0, mean + half)


def with_axes(frames: Frames) -> Frames:
    """The frames with every x axis: the steps table gains cumulative tokens and seconds per run, and each
    evaluation the cumulative value of its step (0 for step 0), its 95% intervals as lo/hi columns."""
    steps = frames.steps.copy()
    if not steps.empty:
        steps = steps.sort_values(["run", "step"])
        for total, source in SOURCES.items():
            if total != "trajectories_total":
                raw = steps[source] if source in steps else pd.Series(float("nan"), index=steps.index)
                steps[total] = raw.fillna(0).groupby(steps["run"]).cumsum()
    evals = frames.evals.copy()
    if not evals.empty:
        cols = ["run", "step", "tokens_total", "seconds_total"]
        at = steps[cols] if not steps.empty else pd.DataFrame(columns=cols)
        evals = evals.merge(at, on=["run", "step"], how="left")
        evals[["tokens_total", "seconds_total"]] = evals[["tokens_total", "seconds_total"]].astype(float).fillna(0.0)
        evals["trajectories_total"] = evals["trajectories"]
        evals = evals.join(_intervals(evals))
    return Frames(evals, steps, frames.variance, frames.landing)


def _intervals(evals: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in evals.itertuples():
        n = int(r.tasks) if "tasks" in evals and pd.notna(r.tasks) else 0
        sd = float(r.progress_sd) if "progress_sd" in evals and pd.notna(r.progress_sd) else None
        acc = wilson(round(r.accuracy * n), n) if n and pd.notna(r.accuracy) else (math.nan, math.nan)
        prog = t_band(r.progress, sd, n) if pd.notna(r.progress) else (math.nan, math.nan)
        rows.append({"accuracy_lo": acc[0], "accuracy_hi": acc[1], "progress_lo": prog[0], "progress_hi": prog[1]})
    return pd.DataFrame(rows, index=evals.index, columns=["accuracy_lo", "accuracy_hi", "progress_lo", "progress_hi"])


def held_out_note(evals: pd.DataFrame, interval: str) -> str:
    """What a held-out curve's band is, with the set's size per run, e.g. "19 held-out tasks; band: 95% Wilson
    interval"; says so when a run's log does not record its size."""
    if evals.empty:
        return ""
    sizes = evals.groupby("run")["tasks"].max() if "tasks" in evals else pd.Series(dtype=float)
    known = sorted({int(n) for n in sizes.dropna()})
    missing = len(set(evals.run)) - int(sizes.notna().sum())
    size = " / ".join(str(n) for n in known) + " held-out tasks" if known else ""
    gap = f"{missing} run(s) recorded no held-out size" if missing else ""
    return "; ".join(x for x in (size, f"band: 95% {interval} interval" if known else "", gap) if x)

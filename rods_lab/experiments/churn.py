"""Churn of the task pool over finished runs: variants retired per step, groups each variant was played before it
retired, and the active pool over time; per run, then per method with 95% t-intervals over runs.

The paper keeps ~800 tasks active from 400 seeds and retires a variant only after streaks of mastered or hard
groups; a buffer that retires a variant at its first flat group keeps its informative share high with a stream
of one-shot probes instead. These numbers say which of the two a run was. Pure functions over tidy frames:
`buffer` (run, method, step, task_id, from_pool, to_pool, reason: the buffer events), `groups` (run, step,
task_id: one row per group played, from task_stats) and `steps` (rods_lab.results.Frames.steps).
"""

from __future__ import annotations

import pandas as pd

from rods_core.statistics import t_interval
from rods_lab.results import method_table

# Run-level churn figures (column -> meaning), in report order.
CHURN_METRICS: dict[str, str] = {
    "retired_per_step": "variants retired per training step (probes that failed included)",
    "probe_retired_share": "share of retirements that were probes never promoted (probe/*)",
    "groups_per_retired": "groups a retired variant was played, from entering the buffer to retiring (mean)",
    "one_shot_share": "share of retired variants played in exactly one group",
    "active_mean": "active pool size, mean over steps",
    "active_min": "active pool size, smallest after any step",
    "active_max": "active pool size, largest after any step",
}


def retirements(buffer: pd.DataFrame) -> pd.DataFrame:
    """The buffer events that retired a task (to_pool 'retired'), one per task: its last retirement."""
    if buffer.empty:
        return buffer.iloc[0:0]
    r = buffer[buffer.to_pool == "retired"]
    return r.sort_values(["run", "step"]).drop_duplicates(["run", "task_id"], keep="last")


def groups_before_retirement(buffer: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Per retired task: the groups it was played in up to and including its retirement step.
    Columns run, method, task_id, step (of retirement), reason, groups."""
    ret = retirements(buffer)
    cols = ["run", "method", "task_id", "step", "reason", "groups"]
    if ret.empty:
        return pd.DataFrame(columns=cols)
    g = groups[["run", "step", "task_id"]].rename(columns={"step": "played"})
    m = ret[["run", "method", "task_id", "step", "reason"]].merge(g, on=["run", "task_id"], how="left")
    m["counted"] = m.played.notna() & (m.played <= m.step)
    counts = m.groupby(["run", "method", "task_id", "step", "reason"], sort=False).counted.sum().reset_index()
    return counts.rename(columns={"counted": "groups"})[cols]


def retired_per_step(buffer: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per run and step: tasks retired at that step (0 where none). Columns run, method, step, retired."""
    grid = steps[["run", "method", "step"]].drop_duplicates(["run", "step"])
    ret = retirements(buffer)
    per = ret.groupby(["run", "step"]).size().rename("retired").reset_index() if not ret.empty else None
    if per is None:
        return grid.assign(retired=0)
    out = grid.merge(per, on=["run", "step"], how="left")
    out["retired"] = out.retired.fillna(0).astype(int)
    return out


def churn_runs(buffer: pd.DataFrame, groups: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per run with the CHURN_METRICS columns (nan where a run retired nothing)."""
    played = groups_before_retirement(buffer, groups)
    per_step = retired_per_step(buffer, steps)
    rows = []
    for run, st in steps.groupby("run", sort=True):
        p = played[played.run == run]
        active = st.pool_active.dropna() if "pool_active" in st else pd.Series(dtype=float)
        n_steps = st.step.nunique()
        rows.append(
            {
                "run": run,
                "method": st.method.iat[0],
                "retired_per_step": float(per_step[per_step.run == run].retired.sum() / n_steps) if n_steps else 0.0,
                "probe_retired_share": float(p.reason.str.startswith("probe/").mean()) if len(p) else float("nan"),
                "groups_per_retired": float(p.groups.mean()) if len(p) else float("nan"),
                "one_shot_share": float((p.groups == 1).mean()) if len(p) else float("nan"),
                "active_mean": float(active.mean()) if len(active) else float("nan"),
                "active_min": float(active.min()) if len(active) else float("nan"),
                "active_max": float(active.max()) if len(active) else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=["run", "method", *CHURN_METRICS])


def churn_methods(runs: pd.DataFrame) -> pd.DataFrame:
    """Per method and churn metric: mean, 95% t half-width (None with one run) and n."""
    return method_table(runs, CHURN_METRICS)


def depletion(runs: pd.DataFrame, method: str = "static") -> dict:
    """How far a method's informative share fell, first half to last half of its runs (rods_lab.results
    run_table columns): per run and as a mean with its 95% t-interval; `fell_by_third` says whether the mean
    fall reached a third (the point where a static pool counts as run dry). Empty dict without runs."""
    g = runs[runs.method == method]
    if g.empty:
        return {}
    first, last = g.informative_share_first_half, g.informative_share_last_half
    fall = (1 - last / first).where(first > 0)
    mean, half, n = t_interval(fall)
    return {
        "method": method,
        "first_half": float(first.mean()),
        "last_half": float(last.mean()),
        "fall": mean,
        "fall_ci95": half,
        "n": n,
        "per_run": {r: (None if pd.isna(f) else float(f)) for r, f in zip(g.run, fall, strict=True)},
        "fell_by_third": bool(mean >= 1 / 3) if n else None,
    }

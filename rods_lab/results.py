"""Method comparisons over finished runs: load run folders into tidy tables, summarise, check the goals.

Shared by `rods bench curriculum` (rods_lab/experiments/runner.py) and the app's Compare page, so both read
the same numbers from the same event logs. A run is any folder with a `config.yaml` (written by
`rods train`) and an `events/` log; its method and seed come from that config. Everything after
`load_runs` is pure pandas over the tidy tables, so it can be tested on synthetic logs.

Definitions (the goals the comparison checks):
- informative share: per step, the share of groups whose G rewards were not all equal
  (`boundary/informative_share`); summarised as its mean over the last half of the run's steps;
- boundary-vs-other variance ratio: the within-group reward variance of task_stats rows classified
  `boundary`, pooled over the run (weighted by rows), over the same pooled figure of the other regions;
- held-out progress and accuracy: the `eval` events, against trajectories consumed;
- intervals: mean ± a two-sided 95% Student-t half-width over repeats (n/a with one repeat); ratios of two
  methods' means paired by run seed (Fieller).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from rods_core.statistics import paired_ratio_ci, t_interval
from storage.reader import RunReader

# Where `rods bench curriculum` writes its experiments (relative to the project root; RODS_EXPERIMENTS moves it).
EXPERIMENTS = Path("bench/results/curriculum")

# Run-level figures summarised per method (column -> meaning), in report order.
RUN_METRICS: dict[str, str] = {
    "final_progress": "held-out progress reward at the last evaluation",
    "final_accuracy": "held-out accuracy at the last evaluation",
    "mean_progress": "held-out progress reward averaged over evaluations after step 0 (area under the curve)",
    "informative_share_first_half": "share of informative groups, mean over the first half of steps",
    "informative_share_last_half": "share of informative groups, mean over the last half of steps",
    "reward_first_half": "mean training reward over the first half of steps",
    "reward_last_half": "mean training reward over the last half of steps",
    "initial_progress": "held-out progress reward at step 0",
    "variance_ratio": "boundary-region / other-regions within-group reward variance (pooled)",
    "final_pool_active": "active pool size at the last step",
    "trajectories": "trajectories consumed",
    "median_step_s": "median wall seconds per step",
    "train_minutes": "wall minutes in training steps (evaluation excluded)",
}


@dataclass(frozen=True)
class RunRef:
    """One run folder and what its config says about it."""

    run: str
    method: str
    seed: int
    run_dir: Path


@dataclass
class Frames:
    """Tidy tables over several runs; every table carries run, method and seed columns."""

    evals: pd.DataFrame  # step, split, trajectories, progress, accuracy
    steps: pd.DataFrame  # step, trajectories_total, informative_share, pool sizes, time/*
    variance: pd.DataFrame  # step, region, mean_var, n
    landing: pd.DataFrame  # variant_id, distance, created, first_step, first_region (synthesizing runs)


# ----- loading ------------------------------------------------------------------------------------------
def discover_runs(folder: str | Path) -> list[RunRef]:
    """Every run folder under `folder` (searched two levels deep) that has a config.yaml and an event log."""
    folder = Path(folder)
    refs = []
    for cfg_file in sorted({*folder.glob("*/config.yaml"), *folder.glob("*/*/config.yaml")}):
        run_dir = cfg_file.parent
        if not (run_dir / "events").is_dir():
            continue
        cfg = yaml.safe_load(cfg_file.read_text()) or {}
        refs.append(RunRef(run_dir.name, str(cfg.get("method", "?")), int(cfg.get("seed", 0)), run_dir))
    return refs


_STEP_COLUMNS = {
    "train/trajectories": "trajectories",
    "boundary/informative_share": "informative_share",
    "reward/mean": "reward",
    "buffer/active": "pool_active",
    "buffer/staged": "pool_staged",
    "buffer/retired": "pool_retired",
    "train/tokens": "tokens",
    "time/step_s": "step_s",
    "time/gen_s": "gen_s",
    "time/env_s": "env_s",
    "time/reward_s": "reward_s",
    "time/update_s": "update_s",
    "time/optimizer_s": "optimizer_s",
    "time/store_s": "store_s",
    "time/curriculum_s": "curriculum_s",
}


def load_run(ref: RunRef) -> Frames:
    reader = RunReader(ref.run_dir)
    ev = reader.eval_curve().drop(columns=["per_category", "per_task"])
    st = reader.step_metrics()
    st = st[[c for c in ("step", *_STEP_COLUMNS) if c in st.columns]].rename(columns=_STEP_COLUMNS)
    st = st.drop_duplicates("step", keep="last").sort_values("step")  # a resumed run may log a step twice
    st["trajectories_total"] = st.get("trajectories", pd.Series(0.0, index=st.index)).fillna(0).cumsum()
    var = reader.variance_by_region()
    tag = {"run": ref.run, "method": ref.method, "seed": ref.seed}
    return Frames(ev.assign(**tag), st.assign(**tag), var.assign(**tag), variant_landing(reader).assign(**tag))


_LANDING = """
WITH v AS (SELECT variant_id, any_value(distance) AS distance, min(step) AS created
           FROM variant WHERE accepted GROUP BY variant_id),
     f AS (SELECT task_id, step, region, row_number() OVER (PARTITION BY task_id ORDER BY step, seq) AS k
           FROM task_stats)
SELECT v.variant_id, v.distance, v.created, f.step AS first_step, f.region AS first_region
FROM v LEFT JOIN f ON f.task_id = v.variant_id AND f.k = 1
ORDER BY v.created, v.variant_id
"""


def variant_landing(reader: RunReader) -> pd.DataFrame:
    """Per accepted variant: its distance from the parent and the region its first probe read (None when it
    was never probed): the share that first reads `boundary` says whether synthesis lands where it should."""
    cols = ["variant_id", "distance", "created", "first_step", "first_region"]
    counts = reader.counts()
    if not counts.get("variant") or not counts.get("task_stats"):
        return pd.DataFrame(columns=cols)
    return reader.query(_LANDING)[cols]


def load_runs(refs: list[RunRef]) -> Frames:
    parts = [load_run(r) for r in refs]

    def cat(name: str) -> pd.DataFrame:
        frames = [getattr(p, name) for p in parts if not getattr(p, name).empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "method", "seed"])

    return Frames(cat("evals"), cat("steps"), cat("variance"), cat("landing"))


def list_experiments(folder: str | Path) -> list[Path]:
    """The experiment folders (each holding runs/) under `folder`, newest first (names are timestamps)."""
    folder = Path(folder)
    return sorted((p for p in folder.glob("*") if (p / "runs").is_dir()), key=lambda p: p.name, reverse=True)


def load_experiment(folder: str | Path) -> tuple[Frames, pd.DataFrame, pd.DataFrame]:
    """(frames, one row per run, per-method table) of a `rods bench curriculum` folder or any runs folder."""
    folder = Path(folder)
    frames = load_runs(discover_runs(folder / "runs" if (folder / "runs").is_dir() else folder))
    runs = run_table(frames)
    return frames, runs, method_table(runs)


# ----- tables -------------------------------------------------------------------------------------------
def fmt_ci(mean: float, half: float | None, digits: int = 3) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    return f"{mean:.{digits}f} ± {half:.{digits}f}" if half is not None else f"{mean:.{digits}f} (CI n/a)"


def variance_ratio(variance: pd.DataFrame) -> float:
    """Pooled boundary variance over pooled other-region variance (nan when either side is missing/zero)."""
    if variance.empty:
        return float("nan")
    w = variance.mean_var.fillna(0) * variance.n
    is_b = variance.region == "boundary"
    nb, no = variance.n[is_b].sum(), variance.n[~is_b].sum()
    if nb == 0 or no == 0:
        return float("nan")
    vb, vo = w[is_b].sum() / nb, w[~is_b].sum() / no
    return float(vb / vo) if vo > 0 else (float("inf") if vb > 0 else float("nan"))


def last_half_mean(steps: pd.DataFrame, col: str) -> float:
    """Mean of a step metric over the steps in the second half of the run (step > max_step / 2)."""
    if steps.empty or col not in steps:
        return float("nan")
    cut = steps.step.max() / 2
    return float(steps.loc[steps.step > cut, col].mean())


def first_half_mean(steps: pd.DataFrame, col: str) -> float:
    """Mean of a step metric over the steps in the first half of the run (step <= max_step / 2)."""
    if steps.empty or col not in steps:
        return float("nan")
    return float(steps.loc[steps.step <= steps.step.max() / 2, col].mean())


def run_table(frames: Frames) -> pd.DataFrame:
    """One row per run with the RUN_METRICS columns."""
    rows = []
    for run, st in frames.steps.groupby("run", sort=True):
        ev = frames.evals[frames.evals.run == run].sort_values("step") if not frames.evals.empty else frames.evals
        var = frames.variance[frames.variance.run == run] if not frames.variance.empty else frames.variance
        later = ev[ev.step > 0] if not ev.empty else ev
        rows.append(
            {
                "run": run,
                "method": st.method.iat[0],
                "seed": int(st.seed.iat[0]),
                "steps": int(st.step.max()),
                "final_progress": float(ev.progress.iat[-1]) if not ev.empty else float("nan"),
                "final_accuracy": float(ev.accuracy.iat[-1]) if not ev.empty else float("nan"),
                "mean_progress": float(later.progress.mean()) if not later.empty else float("nan"),
                "informative_share_first_half": first_half_mean(st, "informative_share"),
                "informative_share_last_half": last_half_mean(st, "informative_share"),
                "reward_first_half": first_half_mean(st, "reward"),
                "reward_last_half": last_half_mean(st, "reward"),
                "initial_progress": float(ev.progress.iat[0]) if not ev.empty and ev.step.iat[0] == 0 else float("nan"),
                "variance_ratio": variance_ratio(var),
                "final_pool_active": float(st.pool_active.iat[-1]) if "pool_active" in st else float("nan"),
                "trajectories": float(st.trajectories_total.iat[-1]),
                "median_step_s": float(st.step_s.median()) if "step_s" in st else float("nan"),
                "train_minutes": float(st.step_s.sum() / 60) if "step_s" in st else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=["run", "method", "seed", "steps", *RUN_METRICS])


def method_table(runs: pd.DataFrame, metrics=RUN_METRICS) -> pd.DataFrame:
    """Per method and metric (of `metrics`, columns of `runs`): mean, 95% t half-width (None with one repeat)
    and n."""
    rows = []
    for method, g in runs.groupby("method", sort=False):
        for metric in metrics:
            mean, half, n = t_interval(g[metric])
            rows.append({"method": method, "metric": metric, "mean": mean, "ci95": half, "n": n})
    return pd.DataFrame(rows, columns=["method", "metric", "mean", "ci95", "n"])


def mean_curve(df: pd.DataFrame, y: str, x: str = "trajectories", by: str = "step") -> pd.DataFrame:
    """Per method and `by` point: mean x, mean y and the 95% half-width of y over runs."""
    if df.empty or y not in df:
        return pd.DataFrame(columns=["method", by, x, y, "ci95", "n"])
    rows = []
    for (method, key), g in df.groupby(["method", by], sort=True):
        mean, half, n = t_interval(g[y])
        rows.append({"method": method, by: key, x: float(g[x].mean()), y: mean, "ci95": half, "n": n})
    return pd.DataFrame(rows)


def last_half(steps: pd.DataFrame, col: str) -> list[float]:
    """A run's per-step values of a metric over the last half of its steps (step > max_step / 2)."""
    if steps.empty or col not in steps:
        return []
    return [float(v) for v in steps.loc[steps.step > steps.step.max() / 2, col] if pd.notna(v)]


def landing_table(landing: pd.DataFrame) -> pd.DataFrame:
    """Per method and variant distance: variants probed, and the share whose first probe read boundary."""
    probed = landing[landing.first_region.notna()] if not landing.empty else landing
    if probed.empty:
        return pd.DataFrame(columns=["method", "distance", "probed", "boundary_share"])
    rows = []
    for (method, dist), g in probed.groupby(["method", "distance"], sort=True, dropna=False):
        rows.append(
            {
                "method": method,
                "distance": dist,
                "probed": len(g),
                "boundary_share": float((g.first_region == "boundary").mean()),
            }
        )
    for method, g in probed.groupby("method", sort=True):
        rows.append(
            {
                "method": method,
                "distance": "all",
                "probed": len(g),
                "boundary_share": float((g.first_region == "boundary").mean()),
            }
        )
    return pd.DataFrame(rows)


# ----- the goals ----------------------------------------------------------------------------------------
def _mean_of(methods: pd.DataFrame, method: str, metric: str) -> tuple[float, float | None, int]:
    row = methods[(methods.method == method) & (methods.metric == metric)]
    if row.empty:
        return float("nan"), None, 0
    return float(row["mean"].iat[0]), row["ci95"].iat[0], int(row["n"].iat[0])


def share_ratio(frames: Frames, num: str = "rods", den: str = "static") -> tuple[float, float, float] | None:
    """The ratio of two methods' mean informative share over the last half of their runs, over the run seeds both
    ran, with Fieller's 95% interval paired by seed (rods_core.statistics.paired_ratio_ci): the run is the unit,
    its steps' mean its level (steps are autocorrelated, not independent draws). None when either method has no
    run; the interval is nan with fewer than 2 shared seeds."""
    steps = frames.steps
    if steps.empty:
        return None
    levels: dict[str, dict] = {}
    for m in (num, den):
        for _, g in steps[steps.method == m].groupby("run"):
            values = last_half(g, "informative_share")
            if values:
                levels.setdefault(m, {})[int(g.seed.iat[0])] = sum(values) / len(values)
    if num not in levels or den not in levels:
        return None
    return paired_ratio_ci(levels[num], levels[den]).as_tuple()


def _span(lo: float, hi: float) -> str:
    return "n/a: fewer than 2 run seeds in common" if math.isnan(lo) else f"{lo:.2f} .. {hi:.2f}"


def goal_checks(
    methods: pd.DataFrame,
    overhead: dict | None = None,
    ratio: tuple[float, float, float] | None = None,
    landing: pd.DataFrame | None = None,
) -> list[dict]:
    """The comparison's goals against the per-method table: goal, measured, target, met (None = not decided).

    `overhead` is {"pct": float, "ci95": [lo, hi] | None, "basis": str} from `rods bench systems`; the
    goal counts as met only when the whole interval is at or below 5%, missed when all of it is above.
    `ratio` is share_ratio(); `landing` is landing_table().
    """
    out = []
    r_inf, _, n_r = _mean_of(methods, "rods", "informative_share_last_half")
    s_inf, _, n_s = _mean_of(methods, "static", "informative_share_last_half")
    if ratio is not None and n_r and n_s:
        point, lo, hi = ratio
        out.append(
            {
                "goal": "informative share (last half): rods / static, with the interval's low end above 1",
                "measured": point,
                "target": ">= 2.0, low > 1",
                "met": None if math.isnan(point) or math.isnan(lo) else bool(point >= 2.0 and lo > 1.0),
                "detail": f"rods {r_inf:.3f} vs static {s_inf:.3f}; paired 95% CI (Fieller) {_span(lo, hi)}",
            }
        )
    if landing is not None and not landing.empty and "rods" in set(landing.method):
        row = landing[(landing.method == "rods") & (landing.distance == "all")]
        share, n = float(row.boundary_share.iat[0]), int(row.probed.iat[0])
        out.append(
            {
                "goal": "share of rods variants whose first probe reads boundary",
                "measured": share,
                "target": ">= 0.30",
                "met": bool(share >= 0.30),
                "detail": f"{n} variants probed",
            }
        )
    if "rods" in set(methods.method):
        v, vh, n_v = _mean_of(methods, "rods", "variance_ratio")
        detail = fmt_ci(v, vh) if n_v else "no run had tasks in both the boundary and the other regions"
        out.append(
            {
                "goal": "rods boundary / other-region variance",
                "measured": v,
                "target": ">= 2.0",
                "met": bool(v >= 2.0) if n_v and not math.isnan(v) else None,
                "detail": detail,
            }
        )
    r_p, r_h, _ = _mean_of(methods, "rods", "final_progress")
    s_p, s_h, _ = _mean_of(methods, "static", "final_progress")
    if n_r and n_s:
        out.append(
            {
                "goal": "held-out progress at equal trajectories: rods - static",
                "measured": r_p - s_p,
                "target": "> 0",
                "met": bool(r_p > s_p) if math.isfinite(r_p - s_p) else None,
                "detail": f"rods {fmt_ci(r_p, r_h)} vs static {fmt_ci(s_p, s_h)}",
            }
        )
    if overhead is not None:
        pct, ci = overhead["pct"], overhead.get("ci95")
        met = (
            None
            if overhead.get("undecided")
            else bool(pct <= 5.0)
            if ci is None
            else True
            if ci[1] <= 5.0
            else False
            if ci[0] > 5.0
            else None
        )
        span = f"95% CI {ci[0]:+.1f}% .. {ci[1]:+.1f}%" if ci else "no interval"
        out.append(
            {
                "goal": "rods step time over a plain TRL GRPO step (%)",
                "measured": pct,
                "target": "<= 5",
                "met": met,
                "detail": f"{overhead.get('basis', '')}, {span}, latest `rods bench systems`",
            }
        )
    return out

"""The ablation table: per arm, the informative share, held-out progress at equal trajectories and boundary landing,
each with its interval; and plain verdicts on whether rods beats each other arm (static, uniform parents, ...).

Pure functions over the per-run table (bench.experiments.run_table) and the landing frame (Frames.landing).
An arm "beats" another on a figure when the 95% bootstrap interval of the difference of their means (runs
resampled within each arm) lies above 0, "is beaten" when it lies below, and "does not beat" otherwise: the
table never calls a difference inside the noise a win.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from bench.experiments import t_interval

# The table's figures: run-table column -> meaning.
ABLATION_METRICS: dict[str, str] = {
    "informative_share_last_half": "share of informative groups over the last half of steps",
    "final_progress": "held-out progress at the last evaluation (every arm has the same trajectory budget)",
    "progress_equal_tokens": "held-out progress at the same generated tokens for every run (the least any spent)",
    "progress_equal_train_s": "held-out progress at the same training wall time for every run (the least any spent)",
    "landing_share": "share of probed variants whose first probe read boundary",
}


def landing_by_run(landing: pd.DataFrame) -> pd.DataFrame:
    """Per run: variants probed and the share whose first probe read boundary (runs that probed none: absent)."""
    probed = landing[landing.first_region.notna()] if not landing.empty else landing
    if probed.empty:
        return pd.DataFrame(columns=["run", "probed", "landing_share"])
    g = probed.groupby("run", sort=True).first_region
    return pd.DataFrame(
        {"probed": g.size(), "landing_share": g.apply(lambda s: float((s == "boundary").mean()))}
    ).reset_index()


def diff_interval(a: list[float], b: list[float], boots: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """(mean(a) - mean(b), 95% low, 95% high): percentile bootstrap, runs resampled within each side.
    nan when either side is empty; with one run a side contributes no spread."""
    a = np.asarray([x for x in a if x is not None and math.isfinite(x)], dtype=float)
    b = np.asarray([x for x in b if x is not None and math.isfinite(x)], dtype=float)
    if not a.size or not b.size:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    da = a[rng.integers(0, a.size, size=(boots, a.size))].mean(axis=1)
    db = b[rng.integers(0, b.size, size=(boots, b.size))].mean(axis=1)
    lo, hi = np.percentile(da - db, [2.5, 97.5])
    return float(a.mean() - b.mean()), float(lo), float(hi)


def verdict(diff: tuple[float, float, float]) -> str:
    """'beats', 'is beaten by' or 'does not beat' from a difference interval (or 'not measured')."""
    point, lo, hi = diff
    if math.isnan(point):
        return "not measured"
    return "beats" if lo > 0 else ("is beaten by" if hi < 0 else "does not beat")


def ablation_table(runs: pd.DataFrame, landing: pd.DataFrame) -> pd.DataFrame:
    """One row per arm: for each ABLATION_METRICS figure its mean, 95% t half-width and n over runs."""
    table = runs.merge(landing_by_run(landing)[["run", "landing_share"]], on="run", how="left")
    rows = []
    for arm in sorted(set(table.method), key=lambda a: (a != "rods", a != "static", a)):
        g = table[table.method == arm]
        row: dict[str, object] = {"arm": arm, "runs": len(g)}
        for metric in ABLATION_METRICS:
            mean, half, n = t_interval(g[metric] if metric in g else [])
            row.update({metric: mean, f"{metric}_ci95": half, f"{metric}_n": n})
        rows.append(row)
    return pd.DataFrame(rows)


# Fewer runs a side and a percentile bootstrap has too few distinct resamples to be trusted.
MIN_RUNS = 3


def comparisons(runs: pd.DataFrame, landing: pd.DataFrame, arm: str = "rods", boots: int = 4000) -> list[dict]:
    """`arm` against every other arm on each figure: the difference of means, its interval and the verdict
    ('not decided' when either side has fewer than MIN_RUNS runs with the figure)."""
    table = runs.merge(landing_by_run(landing)[["run", "landing_share"]], on="run", how="left")
    mine = table[table.method == arm]
    if mine.empty:
        return []
    out = []
    for other, g in table[table.method != arm].groupby("method", sort=False):
        for metric in (m for m in ABLATION_METRICS if m in table):
            a, b = list(mine[metric].dropna()), list(g[metric].dropna())
            d = diff_interval(a, b, boots)
            decided = min(len(a), len(b)) >= MIN_RUNS or math.isnan(d[0])
            out.append(
                {
                    "arm": arm,
                    "other": other,
                    "metric": metric,
                    "diff": d[0],
                    "lo": d[1],
                    "hi": d[2],
                    "verdict": verdict(d) if decided else f"cannot be compared (K < {MIN_RUNS}) with",
                }
            )
    return out


def _cell(mean: float, half: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    return f"{mean:.3f} ± {half:.3f}" if half is not None and math.isfinite(half) else f"{mean:.3f} (CI n/a)"


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table as text cells (mean ± 95% half-width), one column per figure: what the Markdown and the PNG show."""
    cells = {"arm": table.arm, "runs": table.runs}
    for m in ABLATION_METRICS:
        cells[m] = [_cell(r[m], r[f"{m}_ci95"]) for r in table.to_dict("records")]
    return pd.DataFrame(cells)


def markdown_table(table: pd.DataFrame, comps: list[dict]) -> list[str]:
    """The table as Markdown lines, then one sentence per comparison of rods, the ones that are not wins in bold."""
    shown = display_table(table)
    lines = ["| " + " | ".join(shown.columns) + " |", "|---" * len(shown.columns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    lines += ["", "Mean ± 95% t-interval over runs. " + "; ".join(f"`{k}`: {v}" for k, v in ABLATION_METRICS.items())]
    lines += ["", *[comparison_sentence(c) for c in comps]]
    return lines


def comparison_sentence(c: dict) -> str:
    """'- rods beats static on final_progress: +0.050 (95% CI +0.010 .. +0.090)', with the losses in bold."""
    if c["verdict"] == "not measured":
        return f"- {c['arm']} vs {c['other']} on {c['metric']}: not measured (no runs with this figure)"
    text = f"{c['arm']} {c['verdict']} {c['other']} on {c['metric']}"
    span = f"{c['diff']:+.3f} (95% CI {c['lo']:+.3f} .. {c['hi']:+.3f})"
    return f"- {text}: {span}" if c["verdict"] == "beats" else f"- **{text}**: {span}"

"""The ablation table: per arm, the informative share, held-out progress at equal trajectories and boundary landing,
each with its interval; and plain verdicts on whether rods beats each other arm (static, uniform parents, ...).

Pure functions over the per-run table (rods_lab.results.run_table) and the landing frame (Frames.landing).
Arms that ran the same run seeds share a held-out set and warm start per seed, so they are compared paired
(per-seed differences: paired t-interval, bootstrap over seeds, sign count); others unpaired. An arm "beats"
another on a figure when the Holm-adjusted p within the declared family (FAMILY: every figure but wall time) is
below 0.05 and the interval lies above 0, "is beaten" when below, and "does not beat" otherwise: the table never
calls a difference inside the noise a win. A figure outside the family is described, never tested. An ablation
that could not change the run (rods_lab.experiments.binding) is said to be a no-op, not compared.
"""

from __future__ import annotations

import math

import pandas as pd

from rods_core.statistics import holm, t_interval
from rods_lab.experiments.comparisons import compare, decide

# The table's figures: run-table column -> meaning.
ABLATION_METRICS: dict[str, str] = {
    "informative_share_last_half": "share of informative groups over the last half of steps",
    "final_progress": "held-out progress at the last evaluation (every arm has the same trajectory budget)",
    "progress_equal_tokens": "held-out progress at the same generated tokens for every run (the least any spent)",
    "progress_equal_train_s": "held-out progress at the same training wall time for every run (the least any spent)",
    "landing_share": "share of probed variants whose first probe read boundary",
}
# The figures whose comparisons form the Holm family and may be claimed. Wall time is left out: it was taken on a
# machine shared with other jobs at loads that varied several-fold, so it measures the load as much as the method.
FAMILY: tuple[str, ...] = tuple(m for m in ABLATION_METRICS if m != "progress_equal_train_s")


def landing_by_run(landing: pd.DataFrame) -> pd.DataFrame:
    """Per run: variants probed and the share whose first probe read boundary (runs that probed none: absent)."""
    probed = landing[landing.first_region.notna()] if not landing.empty else landing
    if probed.empty:
        return pd.DataFrame(columns=["run", "probed", "landing_share"])
    g = probed.groupby("run", sort=True).first_region
    return pd.DataFrame(
        {"probed": g.size(), "landing_share": g.apply(lambda s: float((s == "boundary").mean()))}
    ).reset_index()


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


# Fewer seeds (paired) or runs a side (unpaired) and an interval over them cannot be trusted.
MIN_RUNS = 3


def _pairs(arms: list[str], arm: str) -> list[tuple[str, str]]:
    """`arm` against every other arm, then every other arm against static (does synthesis help at all?)."""
    out = [(arm, o) for o in arms if o != arm]
    return out + [(o, "static") for o in arms if o not in (arm, "static") and "static" in arms]


def comparisons(
    runs: pd.DataFrame,
    landing: pd.DataFrame,
    arm: str = "rods",
    boots: int = 4000,
    no_ops: dict | None = None,
    family: tuple[str, ...] = FAMILY,
) -> list[dict]:
    """`arm` against every other arm, and every other arm against static, on each figure: paired by run seed
    where both arms ran the same seeds (rods_lab.experiments.comparisons), unpaired otherwise; verdicts on p-values
    Holm-adjusted over the comparisons of the `family` figures. An arm in `no_ops` (arm -> why it could not differ
    from `arm`) is reported as such and left out of the family; a figure outside it is described, not tested."""
    table = runs.merge(landing_by_run(landing)[["run", "landing_share"]], on="run", how="left")
    if "seed" not in table:
        table = table.assign(seed=range(len(table)))  # no seeds recorded: every run its own, nothing paired
    arms = sorted(set(table.method), key=lambda a: (a != arm, a != "static", a))
    if arm not in arms:
        return []
    no_ops = no_ops or {}
    out, found = [], []
    for a, b in _pairs(arms, arm):
        for metric in (m for m in ABLATION_METRICS if m in table):
            va, vb = (table[(table.method == x) & table[metric].notna()] for x in (a, b))
            c = compare(dict(zip(va.seed, va[metric], strict=True)), dict(zip(vb.seed, vb[metric], strict=True)), boots)
            row = {"arm": a, "other": b, "metric": metric, "no_op": no_ops.get(b if a == arm else a)}
            row.update(c.as_dict() if c else {"paired": False, "n": 0, "diff": float("nan"), "p": float("nan")})
            out.append(row)
            found.append(c)
    tested = [i for i, r in enumerate(out) if not r["no_op"] and r["metric"] in family]
    adjusted = holm({i: r["p"] for i, r in enumerate(out)}, tested)
    for i, (row, c) in enumerate(zip(out, found, strict=True)):
        row["p_holm"] = adjusted[i]
        if row["no_op"] and c:
            row["verdict"] = f"could not differ (no-op: {row['no_op']}) from"
        elif c and row["metric"] not in family:
            row["verdict"] = "is described, not tested (outside the family), against"
        else:
            row["verdict"] = decide(c, adjusted[i], MIN_RUNS)
    return out


def _cell(mean: float, half: float | None) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    return f"{mean:.3f} ± {half:.3f}" if half is not None and math.isfinite(half) else f"{mean:.3f} (CI n/a)"


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table as text cells (mean ± 95% half-width), one column per figure: what the Markdown and the PNG show."""
    no_op = table["no_op"] if "no_op" in table else pd.Series([None] * len(table), index=table.index)
    cells = {"arm": [f"{a} (no-op)" if isinstance(n, str) else a for a, n in zip(table.arm, no_op, strict=True)]}
    cells["runs"] = table.runs
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
    """'- rods beats static on final_progress: +0.050 (paired over 4 seeds: 95% t-CI +0.010 .. +0.090, bootstrap
    ..., 4/4 seeds above, Holm p 0.012)', everything but a win in bold."""
    if c["verdict"] == "not measured":
        return f"- {c['arm']} vs {c['other']} on {c['metric']}: not measured (no runs with this figure)"
    text = f"{c['arm']} {c['verdict']} {c['other']} on {c['metric']}"
    if c.get("paired"):
        boot = c.get("boot_method", "bootstrap")
        boot = f"bootstrap {c['boot_lo']:+.3f} .. {c['boot_hi']:+.3f}, " if "bootstrap" in boot else ""
        span = (
            f"{c['diff']:+.3f} (paired over {c['n']} seeds: 95% t-CI {c['lo']:+.3f} .. {c['hi']:+.3f}, {boot}"
            f"{c['above']}/{c['n']} seeds above, {c['below']} below; {_test(c)}Holm p {_p(c.get('p_holm'))})"
        )
    else:
        span = (
            f"{c['diff']:+.3f} (unpaired, {c['n']} runs a side at least: bootstrap 95% CI {c['lo']:+.3f} .. "
            f"{c['hi']:+.3f}; Welch, Holm p {_p(c.get('p_holm'))})"
        )
    return f"- {text}: {span}" if c["verdict"] == "beats" else f"- **{text}**: {span}"


def _test(c: dict) -> str:
    """'exact sign-flip p 0.25, ' where the p is not the t-test's (no spread, or too few seeds for it)."""
    method = c.get("p_method", "")
    return f"{method.split(' (')[0]} p {_p(c.get('p'))}, " if method.startswith("exact") else ""


def _p(p) -> str:
    return "n/a" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.3g}"

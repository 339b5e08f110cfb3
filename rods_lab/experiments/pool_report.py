"""The pool-replicates design's report (docs/experiments/pool-replicates/design.md), from its run summaries alone:
the sizes of every set, P1-P3 and their far-task reading (pool_criteria), the near-duplicate audit per arm (both
similarity measures, per replicate too), the secondary outcomes (never a verdict), how the runs ran (platforms,
P_max binding, cost), and figures with paired bands.

Secondary outcomes, as the design names them: non-degradation (each arm's last H1 minus step 0), trajectories to
reach step 0 + REACH on H1, H1b transfer and the sampled H1 score (paired by replicate against rods), the
informative share over the last half as the manipulation check (rods / static, Fieller paired by replicate), and
rods - static against how far static ran dry in that replicate (its first-half minus last-half share: a slope with
its interval). A replicate counts through one complete block: its runs of every arm on one CPU kernel set, from one
warm-started model (design.md, Amendment 8); incomplete replicates and blocks in no test are named, and the paired
differences are given per platform (a kernel set and its model) too.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from rods_core.statistics import ols_slope, paired_ratio_ci, paired_t, t_interval
from rods_lab.experiments.curriculum_report import band_figure, export_pngs, method_color
from rods_lab.experiments.pool_criteria import (
    ARMS,
    TESTS,
    areas,
    block_of,
    complete,
    far_task_markdown,
    judged,
    paired_differences,
    platform,
    progress_area,
    set_aside,
)
from rods_lab.experiments.pool_criteria import markdown as criteria_markdown

REACH = 0.03  # the design's "trajectories to reach step 0 + 0.03 on H1"
SHARE = "boundary/informative_share"
# each secondary set and whether it is read as its last evaluation minus step 0 rather than its area: H1_sampled is
# scored at those two steps only, H3 too from the design's Amendment 6 (so every run is read alike)
SECONDARY_SETS = {"H1b": False, "H1_sampled": True, "H3": True}


def curve(summary: dict, split: str = "H1") -> dict[int, float]:
    """step -> greedy progress on `split` of one run."""
    return {int(e["step"]): float(e["progress"]) for e in summary["evaluations"] if e.get("set") == split}


def set_sizes(summaries: list[dict]) -> pd.DataFrame:
    """One row per block (a replicate on one platform): its pool size, the size of each held-out set (the same for
    every arm of the block), rods' distinct variants played (M, offline_small's target; offline_large's is the
    design's ratio times M) and the variants each offline arm's pool got (the synthesizer's yield: fewer than asked
    when it falls short); "counts" says whether the block is its replicate's counted one (pool_criteria.complete)."""
    counted = {block_of(s) for s in complete(summaries)[0]}
    rows: dict[tuple, dict] = {}
    for s in summaries:
        sets = {name: v["n"] for name, v in (s.get("heldout_sets") or {}).items()}
        first = {
            "replicate": s["replicate"],
            "platform": platform(s),
            "counts": "yes" if block_of(s) in counted else "no",
            "pool seeds": len(s.get("pool") or []),
        }
        row = rows.setdefault(block_of(s), first)
        row.update(sets)
        sizes = s.get("pool_sizes") or {}
        if s["arm"] == "rods":
            row["rods variants (M)"] = sizes.get("variants_played")
        elif s["arm"].startswith("offline"):
            last = sizes.get("last") or {}
            pool = sum(last.get(k) or 0 for k in ("active", "retired", "staged"))
            row[f"{s['arm']} variants"] = int(pool - (sizes.get("seeds") or 0))
    frame = pd.DataFrame([rows[k] for k in sorted(rows, key=lambda b: (b[0], str(b[1]), str(b[2])))])
    counts = [c for c in ("rods variants (M)", "offline_small variants", "offline_large variants") if c in frame]
    return frame[[c for c in frame if c not in counts] + counts].astype({c: "Int64" for c in counts})


def reach_step(points: dict[int, float], gain: float = REACH) -> int | None:
    """The first evaluation step whose progress is at least step 0's + gain; None if none is (or no step 0)."""
    if 0 not in points:
        return None
    return next((step for step in sorted(points) if step > 0 and points[step] >= points[0] + gain - 1e-12), None)


def share_halves(summary: dict) -> tuple[float, float]:
    """(mean informative share over the first half of the run's steps, over the last half)."""
    shares = [0.0 if v is None else float(v) for v in (summary["steps"]["per_step"].get(SHARE) or [])]
    if len(shares) < 2:
        return math.nan, math.nan
    half = len(shares) // 2
    return sum(shares[:half]) / half, sum(shares[half:]) / (len(shares) - half)


def by_arm(summaries: list[dict]) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for s in summaries:
        out.setdefault(s["arm"], {})[s["replicate"]] = s
    return out


def _paired_row(name: str, a: dict[int, float], b: dict[int, float]) -> dict:
    shared = sorted(set(a) & set(b))
    r = paired_t([a[k] - b[k] for k in shared])
    return {"comparison": name, "n": r.n, "mean": r.mean, "lo": r.lo, "hi": r.hi, "p (two-sided)": r.p}


def secondaries(summaries: list[dict], per_step: int) -> dict:
    """Every secondary outcome of the design, as plain numbers (tables are built from them)."""
    runs = by_arm(summaries)
    arms = [a for a in ARMS if a in runs]
    nondeg, reach, sampled = [], [], []
    for arm in arms:
        last = {k: c[max(c)] - c[0] for k, s in runs[arm].items() if 0 in (c := curve(s))}
        mean, half, n = t_interval(list(last.values()))
        nondeg.append({"arm": arm, "n": n, "last - step 0": mean, "half-width": half})
        steps = {k: reach_step(curve(s)) for k, s in runs[arm].items()}
        got = sorted(v * per_step for v in steps.values() if v is not None)
        median = (
            got[len(got) // 2]
            if got and len(got) % 2
            else (sum(got[len(got) // 2 - 1 : len(got) // 2 + 1]) / 2 if got else None)
        )
        reach.append({"arm": arm, "reached": f"{len(got)} of {len(steps)}", "median trajectories (of those)": median})
    transfer = []
    for split, last_only in SECONDARY_SETS.items():
        area = areas(summaries, split, last_only)
        for arm in arms:
            if arm != "rods" and "rods" in area and arm in area:
                transfer.append({"set": split, **_paired_row(f"rods - {arm}", area["rods"], area[arm])})
        for arm in arms:
            mean, half, n = t_interval(list(area.get(arm, {}).values()))
            sampled.append({"set": split, "arm": arm, "n": n, "area": mean, "half-width": half})
    halves = {arm: {k: share_halves(s) for k, s in runs[arm].items()} for arm in arms}
    ratio = paired_ratio_ci(
        {k: v[1] for k, v in halves.get("rods", {}).items()}, {k: v[1] for k, v in halves.get("static", {}).items()}
    )
    h1 = areas(summaries)
    reps = sorted(set(h1.get("rods", {})) & set(h1.get("static", {})) & set(halves.get("static", {})))
    fall = [halves["static"][k][0] - halves["static"][k][1] for k in reps]
    gain = [h1["rods"][k] - h1["static"][k] for k in reps]
    return {
        "non_degradation": nondeg,
        "reach": reach,
        "paired": transfer,
        "levels": sampled,
        "share_last_half": {arm: t_interval([v[1] for v in halves[arm].values()]) for arm in arms},
        "share_ratio": ratio,
        "dry_vs_gain": {
            "replicates": reps,
            "static_share_fall": fall,
            "rods_minus_static": gain,
            "slope": ols_slope(fall, gain),
        },
    }


def progress_frame(summaries: list[dict], per_step: int, split: str = "H1") -> pd.DataFrame:
    """Per arm and evaluation step: mean progress over replicates and the 95% t half-width (band_figure's input)."""
    rows = []
    for arm, reps in by_arm(summaries).items():
        steps = sorted({st for s in reps.values() for st in curve(s, split)})
        for st in steps:
            mean, half, n = t_interval([curve(s, split).get(st, math.nan) for s in reps.values()])
            rows.append({"method": arm, "trajectories": st * per_step, "progress": mean, "ci95": half, "n": n})
    return pd.DataFrame(rows, columns=["method", "trajectories", "progress", "ci95", "n"])


def difference_frame(summaries: list[dict], per_step: int, ref: str = "static") -> pd.DataFrame:
    """Per arm (not `ref`) and evaluation step: the mean over replicates of (arm - ref) H1 progress and its paired
    95% half-width: the band of a paired difference, not of two levels."""
    runs, rows = by_arm(summaries), []
    for arm, reps in runs.items():
        if arm == ref or ref not in runs:
            continue
        shared = sorted(set(reps) & set(runs[ref]))
        steps = sorted({st for k in shared for st in curve(reps[k])})
        for st in steps:
            d = [curve(reps[k]).get(st, math.nan) - curve(runs[ref][k]).get(st, math.nan) for k in shared]
            mean, half, n = t_interval(d)
            rows.append({"method": arm, "trajectories": st * per_step, "diff": mean, "ci95": half, "n": n})
    return pd.DataFrame(rows, columns=["method", "trajectories", "diff", "ci95", "n"])


def distinct_frame(summaries: list[dict]) -> pd.DataFrame:
    """One row per run: the distinct synthesized tasks it trained on and its H1 progress area."""
    rows = []
    for s in summaries:
        sizes = s.get("pool_sizes") or {}
        distinct = (sizes.get("distinct_played") or 0) - (sizes.get("seeds") or 0)
        rows.append({"arm": s["arm"], "replicate": s["replicate"], "distinct synthesized": max(distinct, 0),
                     "H1 area": progress_area(curve(s))})  # fmt: skip
    return pd.DataFrame(rows, columns=["arm", "replicate", "distinct synthesized", "H1 area"])


def figures(summaries: list[dict], per_step: int, sec: dict) -> dict[str, go.Figure]:
    """The report's figures: H1 progress and its paired difference against trajectories, H1 area against distinct
    synthesized tasks, and rods - static against how far static ran dry."""
    figs = {
        "h1_vs_trajectories": band_figure(
            progress_frame(summaries, per_step), "trajectories", "progress", "H1 progress (greedy), mean over replicates",
            "H1 progress",
        ),
        "h1_diff_vs_static": band_figure(
            difference_frame(summaries, per_step), "trajectories", "diff", "H1 progress minus static's, paired by "
            "replicate", "arm - static",
        ),
    }  # fmt: skip
    dt = distinct_frame(summaries)
    fig = go.Figure()
    for k, g in dt.groupby("replicate"):  # a replicate's arms joined: the pairing the tests use
        g = g.sort_values("distinct synthesized")
        fig.add_trace(go.Scatter(x=g["distinct synthesized"], y=g["H1 area"], mode="lines", showlegend=False,
                                 line={"color": "lightgray", "width": 1}, hoverinfo="skip", name=f"r{k}"))  # fmt: skip
    for arm, g in dt.groupby("arm", sort=False):
        fig.add_trace(go.Scatter(x=g["distinct synthesized"], y=g["H1 area"], mode="markers", name=arm,
                                 marker={"color": method_color(arm), "size": 9}))  # fmt: skip
    fig.update_layout(title="H1 progress area against distinct synthesized tasks trained on (one point per run, a "
                      "replicate's runs joined)",
                      xaxis_title="distinct synthesized tasks", yaxis_title="H1 progress area", template="plotly_white",
                      width=800, height=450)  # fmt: skip
    figs["h1_area_vs_distinct"] = fig
    dry = sec["dry_vs_gain"]
    fig = go.Figure(go.Scatter(x=dry["static_share_fall"], y=dry["rods_minus_static"], mode="markers+text",
                               text=[f"r{k}" for k in dry["replicates"]], textposition="top center",
                               marker={"color": method_color("rods"), "size": 9}))  # fmt: skip
    fig.update_layout(title="rods - static H1 area against static's informative-share fall (first half - last half)",
                      xaxis_title="static's share fall", yaxis_title="rods - static", template="plotly_white",
                      width=800, height=450)  # fmt: skip
    figs["gain_vs_static_dry"] = fig
    return figs


def by_platform(kept: list[dict]) -> pd.DataFrame:
    """Per platform of the counted blocks (pool_criteria.platform: a kernel set and its model): how many
    replicates, the mean paired difference of each of P1-P3 on the H1 area over them (descriptive: the tests pool
    every replicate), and static's and rods' mean informative share over the last half of the steps and their
    ratio (the manipulation check, per platform: Amendment 9)."""
    rows = []
    for where in dict.fromkeys(platform(s) for s in kept):  # in the order read
        runs = [s for s in kept if platform(s) == where]
        area = areas(runs)
        row = {"platform": where, "replicates": len({s["replicate"] for s in runs})}
        for name, (arm, ref, _) in TESTS.items():
            d = paired_differences(area, arm, ref)
            row[f"{name}: {arm} - {ref}"] = sum(d) / len(d) if d else math.nan
        for arm in ("static", "rods"):
            last = [share_halves(s)[1] for s in runs if s["arm"] == arm]
            row[f"{arm} share (last half)"] = sum(last) / len(last) if last else math.nan
        static, rods = row["static share (last half)"], row["rods share (last half)"]
        row["rods / static"] = rods / static if static > 0 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _num(v, digits: int = 4) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:+.{digits}f}" if isinstance(v, float) else str(v)


def _table(frame: pd.DataFrame | list[dict]) -> list[str]:
    frame = pd.DataFrame(frame)
    if frame.empty:
        return ["(none)", ""]
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rows = ["| " + " | ".join(_num(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return [head, "|" + "---|" * len(frame.columns), *rows, ""]


AUDIT_MEASURES = {"items": "calls' items", "names": "function names"}


def audit_table(summaries: list[dict]) -> pd.DataFrame:
    """Per arm, held-out set and similarity measure (calls' items, function names): the tasks at or above the audit's
    threshold summed over replicates, and the distribution of each task's nearest similarity as the mean over
    replicates of each quantile and of the mean."""
    rows = []
    for arm, reps in by_arm(summaries).items():
        sets = sorted({name for s in reps.values() for name in (s.get("audit") or {})})
        for name, (measure, label) in ((n, m) for n in sets for m in AUDIT_MEASURES.items()):
            found = [s["audit"][name].get(measure) for s in reps.values() if name in (s.get("audit") or {})]
            found = [f for f in found if f and f.get("n")]
            if not found:
                continue
            n, above = sum(f["n"] for f in found), sum(f["at_or_above"] for f in found)
            row = {"arm": arm, "set": name, "similarity of": label, "replicates": len(found),
                   f"at or above {found[0].get('threshold', 0.8)}": f"{above} of {n}",
                   "mean": sum(f["mean"] for f in found) / len(found)}  # fmt: skip
            for q in sorted({q for f in found for q in f.get("quantiles") or {}}, key=float):
                values = [f["quantiles"][q] for f in found if q in (f.get("quantiles") or {})]
                row[f"q{float(q) * 100:g}"] = sum(values) / len(values)
            rows.append(row)
    return pd.DataFrame(rows)


def audit_by_replicate(summaries: list[dict], name: str = "H1", measure: str = "items") -> pd.DataFrame:
    """One row per replicate, one column per arm: the held-out tasks of `name` at or above the audit's threshold by
    `measure`, as "count of n"."""
    rows: dict[int, dict] = {}
    for s in summaries:
        f = ((s.get("audit") or {}).get(name) or {}).get(measure)
        if f and f.get("n"):
            rows.setdefault(s["replicate"], {"replicate": s["replicate"]})[s["arm"]] = f"{f['at_or_above']} of {f['n']}"
    frame = pd.DataFrame([rows[k] for k in sorted(rows)])
    return frame[["replicate", *[a for a in ARMS if a in frame]]] if not frame.empty else frame


def conduct_table(summaries: list[dict]) -> pd.DataFrame:
    """Per arm, how its runs ran: how many, how many resumed from a checkpoint, the `offer/budget` events (an
    offered variant turned away because the buffer held P_max already: P_max binds), the variants an offline arm's
    pool refused as equal to a held-out task, and the mean training and scoring seconds and 1-minute load at start.
    A run finished by a later process's startup sweep holds no times and no offline counts; those figures are of
    the runs that hold them."""
    rows = []
    for arm, reps in by_arm(summaries).items():
        runs = list(reps.values())
        timed = [s for s in runs if s.get("wall_s")]
        refused = [(s.get("offline") or {}).get("heldout_collisions_excluded") for s in runs]
        rows.append({"arm": arm, "runs": len(runs), "resumed": sum(s.get("resumed_from") is not None for s in runs),
                     "offer/budget events": sum(int((s.get("binding") or {}).get("offer_budget") or 0) for s in runs),
                     "held-out collisions refused": _count_of(refused),
                     "timed runs": len(timed),
                     "training s": _mean((s["wall_s"] for s in timed), 0),
                     "scoring s": _mean((s.get("score_s") for s in timed), 0),
                     "load at start": _mean((s.get("load_1min_at_start") for s in timed), 1)})  # fmt: skip
    return pd.DataFrame(rows)


def _count_of(counts: list[int | None]) -> str:
    """A count summed over the runs that hold it, saying how many do when not all ("—": none does)."""
    got = [c for c in counts if c is not None]
    if not got:
        return "—"
    return str(sum(got)) if len(got) == len(counts) else f"{sum(got)} ({len(got)} of {len(counts)} runs)"


def _mean(values, digits: int) -> str:
    got = [float(v) for v in values if v is not None]
    return f"{sum(got) / len(got):.{digits}f}" if got else "—"


def platforms(summaries: list[dict]) -> Counter:
    """Each platform the runs ran on (pool_criteria.platform) -> how many runs ran on it (a block's runs share one)."""
    return Counter(platform(s) for s in summaries)


def report_markdown(
    summaries: list[dict],
    per_step: int,
    figure_files: list[str],
    folders: list[str] | tuple[str, ...] = ("runs",),
    look: str | None = None,
) -> str:
    """The whole report as Markdown over the replicates the look reads (pool_criteria.judged); `folders`: the
    summaries' folders relative to the report (one a platform)."""
    result, kept = judged(summaries, look)
    left = complete(summaries)[1]
    aside = set_aside(summaries)
    commits = {(s.get("code") or {}).get("commit") for s in summaries}
    dirty = sum(bool((s.get("code") or {}).get("dirty")) for s in summaries)
    sec = secondaries(kept, per_step)
    lines = ["# Pool replicates: the report", "",
             "Design, amendments and reading rules: [design.md](design.md); the pilot: [pilot.md](pilot.md). Every figure "
             "below is computed from the committed run summaries in "
             f"{', '.join(f'[{f}/]({f}/)' for f in folders)} by `rods bench pool-report`.", "",
             f"Runs: {len(summaries)} summaries; complete replicates (all of {', '.join(ARMS)}) read at the "
             f"{result.look} look: {sorted({s['replicate'] for s in kept})}; left out as incomplete: "
             f"{left or 'none'}. Blocks (a replicate's runs on one platform) in no test: "
             f"{'; '.join(aside) or 'none'}. Code: "
             f"{'one commit' if len(commits) == 1 else f'{len(commits)} commits'} for every run (`code.commit` in each "
             f"summary), {dirty} from a worktree with changes. Trajectories a step: {per_step}.", "",
             "## The size of every set", ""]  # fmt: skip
    lines += _table(set_sizes(summaries))
    lines += criteria_markdown(result)
    lines += far_task_markdown(kept)
    lines += ["## Near-duplicate audit (held-out task vs its nearest training task, per arm)", "",
              "Jaccard similarity of each held-out task to the nearest task its run trained on; quantiles are means "
              "over replicates of each replicate's quantile.", ""]  # fmt: skip
    lines += _table(audit_table(kept))
    lines += ["H1 tasks at or above the threshold by calls' items, per replicate:", ""]
    lines += _table(audit_by_replicate(kept))
    lines += ["## Secondary outcomes (never a verdict)", "", "Non-degradation: last H1 evaluation minus step 0.", ""]
    lines += _table(sec["non_degradation"])
    lines += [f"Trajectories to reach step 0 + {REACH} on H1 (first evaluation at or above it).", ""]
    lines += _table(sec["reach"])
    lines += ["Paired by replicate, rods minus each arm on each secondary set (H1b: area, new scenarios; "
              "H1_sampled: last minus step 0 at the training temperature; H3: last minus step 0 on BFCL's test "
              "split, descriptive).", ""]  # fmt: skip
    lines += _table(sec["paired"])
    lines += ["Each arm's own level on each secondary set (mean over replicates, 95% half-width).", ""]
    lines += _table(sec["levels"])
    r = sec["share_ratio"]
    shares = ", ".join(f"{arm} {m:.3f}" for arm, (m, _, _) in sec["share_last_half"].items())
    lines += ["Manipulation check: informative share over the last half of the steps, mean over replicates: "
              f"{shares}. rods / static {r.ratio:.3f} (95% CI {r.lo:.3f} .. {r.hi:.3f}, {r.method}, n {r.n}).", ""]  # fmt: skip
    s = sec["dry_vs_gain"]["slope"]
    lines += [f"rods - static H1 area against static's share fall: slope {_num(s.slope)} (95% CI {_num(s.lo)} .. "
              f"{_num(s.hi)}, p {_num(s.p, 3)}, n {s.n}).", ""]  # fmt: skip
    lines += ["By platform, a CPU kernel set and the model built under it (the counted blocks; descriptive, the tests "
              "pool every replicate):", ""]  # fmt: skip
    lines += _table(by_platform(kept))
    lines += ["## How the runs ran", "",
              f"Platforms: {'; '.join(f'{k}: {n} runs' for k, n in platforms(summaries).items())}. Seconds were taken "
              "on a loaded 2-core machine, two runs at a time: cost figures, not outcomes.", ""]  # fmt: skip
    lines += _table(conduct_table(kept))
    lines += ["## Figures", "", *[f"![{f}]({f})" for f in figure_files], ""]
    return "\n".join(lines)


def write(
    summaries: list[dict],
    out: Path,
    per_step: int,
    png: bool = True,
    log=print,
    folders: list[str] | tuple[str, ...] = ("runs",),
    look: str | None = None,
) -> Path:
    """report.md into `out` (the design's folder, beside design.md and runs/) and its figures into out/figures (JSON;
    PNG beside each when kaleido works), over the replicates the look reads; returns report.md's path."""
    kept = judged(summaries, look)[1]  # refuses two summaries of one run, or a look not planned, before any write
    (out / "figures").mkdir(parents=True, exist_ok=True)
    figs = figures(kept, per_step, secondaries(kept, per_step))
    jsons = []
    for name, fig in figs.items():
        (out / "figures" / f"{name}.json").write_text(fig.to_json())
        jsons.append(out / "figures" / f"{name}.json")
    problem = export_pngs(jsons) if png else "PNG export skipped"
    files = [f"figures/{j.with_suffix('.png').name}" for j in jsons if j.with_suffix(".png").exists()]
    if problem:
        log(f"figures as JSON only: {problem}")
        files = files or [f"figures/{j.name}" for j in jsons]
    path = out / "report.md"
    path.write_text(report_markdown(summaries, per_step, files, folders, look))
    return path

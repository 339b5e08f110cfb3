"""The demo's regression bench: does the shipped demo still show what RODS is for, on run seeds nobody tuned on?

`rods bench demo --repeats 4 --seed 3000` runs the demo config's rods and static arms (`rods bench curriculum
--methods rods,static --budget 1440 --evals 2`, repeat k on run seed `seed + k`, both arms sharing it) and reads
the demo's headline off the runs, paired by run seed:
- the informative share over the last half of the steps, rods / static, with Fieller's paired interval;
- whether static runs dry: its share from the first half to the last (paired over seeds);
- the held-out gain (last evaluation minus step 0), rods - static, with a paired t-interval (an exact sign-flip p
  at small K);
- collapses: a run whose mean reward sits at 0 for `FLAT_STEPS` steps in a row, or a synthesizing run (rods,
  uniform_synth) whose informative share does, or a seed whose group mean was >= `SOLVED` at some step and 0 at a
  later one. A run without synthesis (static) whose share sits at 0 has run dry, the depletion the demo shows,
  not a collapse (static on run seed 8000: share 0 for 5 steps at a mean reward of 0.71).
The demo holds when the ratio's interval lies above 1, static's share falls, and no run collapses. A cheaper warm
start (docs/measurements.md, the demo warm start's budget) counts as good as the shipped one only if this bench
says the demo holds on its model. Writes demo.json and demo.md beside the curriculum report.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import yaml

from rods_core.config import SYNTH_METHODS
from rods_core.ids import lineage_of
from rods_core.statistics import paired_ratio_ci, paired_t
from rods_lab.experiments.runner import run as run_curriculum
from rods_lab.results import Frames, RunRef, discover_runs, load_run, load_runs, run_table
from storage.reader import RunReader

BUDGET, EVALS, METHODS = 1440, 2, ["rods", "static"]
FLAT_STEPS = 5  # steps in a row at 0 that make a collapse
SOLVED = 0.5  # a seed's group mean at or above this, then 0 later: a collapse


def collapses(steps: pd.DataFrame, task_stats: pd.DataFrame, *, synthesizes: bool = True) -> list[str]:
    """What makes one run a collapse, each as a sentence (empty: none). `steps`: step, reward, informative_share
    per step; `task_stats`: task_id, step, mean per task and generation step; `synthesizes`: whether the run
    refills its pool (its informative share at 0 then counts; without synthesis it is the pool run dry)."""
    found = []
    for col in ("reward", "informative_share") if synthesizes else ("reward",):
        if col not in steps:
            continue
        run, start = 0, None
        for step, value in steps.sort_values("step")[["step", col]].itertuples(index=False):
            run, start = (run + 1, start if run else step) if value == 0 else (0, None)
            if run == FLAT_STEPS:
                found.append(f"{col} 0 for {FLAT_STEPS} steps from step {int(start)}")
                break
    is_seed = task_stats.task_id.map(lambda t: lineage_of(t)[0] == t).astype(bool)  # its own root: a seed
    seeds = task_stats.loc[is_seed]
    for task, g in seeds.sort_values("step").groupby("task_id", sort=True):
        solved = g[g["mean"] >= SOLVED]
        if solved.empty:
            continue
        first = solved.iloc[0]
        fell = g[(g.step > first.step) & (g["mean"] == 0)]
        if not fell.empty:
            found.append(f"{task} {first['mean']:.2f} at step {int(first.step)}, 0 at step {int(fell.step.iat[0])}")
    return found


@dataclass
class Headline:
    k: int  # run seeds with both arms finished
    seeds: list[int]
    share_rods: list[float]  # last-half informative share per seed, in `seeds` order
    share_static: list[float]
    static_first_half: list[float]
    ratio: tuple[float, float, float]  # rods / static over the last half: point, 95% low, high (Fieller, paired)
    static_fall: dict  # static's last-half minus first-half share, paired over seeds (statistics.PairedResult)
    gain_rods: list[float]  # held-out progress, last evaluation minus step 0
    gain_static: list[float]
    gain_diff: dict  # rods - static held-out gain (statistics.PairedResult)
    collapses: dict[str, list[str]]  # run -> reasons (runs without one omitted)
    holds: bool

    def as_dict(self) -> dict:
        return asdict(self)


def headline(frames: Frames, task_stats: dict[str, pd.DataFrame]) -> Headline:
    """The demo's headline from the runs' tables (`task_stats`: run -> its task_stats rows)."""
    runs = run_table(frames).set_index("run")
    by = {m: runs[runs.method == m].set_index("seed") for m in METHODS}
    seeds = sorted(set(by["rods"].index) & set(by["static"].index))
    col = "informative_share_last_half"
    share = {m: {s: float(by[m].at[s, col]) for s in seeds} for m in METHODS}
    gain = {m: [float(by[m].at[s, "final_progress"] - by[m].at[s, "initial_progress"]) for s in seeds] for m in METHODS}
    first = [float(by["static"].at[s, "informative_share_first_half"]) for s in seeds]
    found = {}
    for run in runs.index:
        st = frames.steps[frames.steps.run == run]
        stats = task_stats.get(run, pd.DataFrame(columns=["task_id", "step", "mean"]))
        reasons = collapses(st, stats, synthesizes=runs.at[run, "method"] in SYNTH_METHODS)
        if reasons:
            found[run] = reasons
    ratio = paired_ratio_ci(share["rods"], share["static"]).as_tuple()
    fall = paired_t([share["static"][s] - f for s, f in zip(seeds, first, strict=True)])
    diff = paired_t([a - b for a, b in zip(gain["rods"], gain["static"], strict=True)])
    holds = len(seeds) >= 2 and ratio[1] > 1 and fall.mean < 0 and not found
    return Headline(
        len(seeds), seeds, [share["rods"][s] for s in seeds], [share["static"][s] for s in seeds], first, ratio,
        fall.as_dict(), gain["rods"], gain["static"], diff.as_dict(), found, holds,
    )  # fmt: skip


def run_collapses(run_dir: Path) -> list[str]:
    """`collapses` of one run folder, read from its step rows and task_stats (its method from its config.yaml)."""
    steps = load_run(RunRef(Path(run_dir).name, "?", 0, Path(run_dir))).steps
    config = Path(run_dir) / "config.yaml"
    method = (yaml.safe_load(config.read_text()) or {}).get("method", "rods") if config.is_file() else "rods"
    return collapses(steps, read_task_stats(run_dir), synthesizes=method in SYNTH_METHODS)


def read_task_stats(run_dir: Path) -> pd.DataFrame:
    reader = RunReader(run_dir)
    if not reader.counts().get("task_stats"):
        return pd.DataFrame(columns=["task_id", "step", "mean"])
    return reader.query("SELECT task_id, step, mean FROM task_stats ORDER BY step, task_id")


def _f(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def markdown(h: Headline) -> str:
    r, d, fall = h.ratio, h.gain_diff, h.static_fall
    lines = [
        f"# The demo's headline ({h.k} run seeds: {', '.join(map(str, h.seeds))}; both arms on each)",
        "",
        f"**The demo {'holds' if h.holds else 'does NOT hold'}**: it holds when rods / static's interval lies above "
        "1, static's share falls and no run collapses.",
        "",
        f"- Informative share over the last half, rods / static: **{_f(r[0])}** (95% Fieller interval, paired by "
        f"seed: {_f(r[1])} .. {_f(r[2])})",
        f"  - rods {' / '.join(map(_f, h.share_rods))}; static {' / '.join(map(_f, h.share_static))}",
        f"- Static runs dry: first half {' / '.join(map(_f, h.static_first_half))} -> last half; mean change "
        f"{fall['mean']:+.3f} (95% {_f(fall['lo'])} .. {_f(fall['hi'])}, p {fall['p']:.3f}, {fall['method']})",
        f"- Held-out gain (last evaluation - step 0): rods {' / '.join(f'{g:+.2f}' for g in h.gain_rods)}; static "
        f"{' / '.join(f'{g:+.2f}' for g in h.gain_static)}; rods - static {d['mean']:+.3f} (95% {_f(d['lo'])} .. "
        f"{_f(d['hi'])}, p {d['p']:.3f}, {d['method']})",
        f"- Collapses: {sum(len(v) > 0 for v in h.collapses.values())} of {2 * h.k} runs",
    ]
    lines += [f"  - {run}: {'; '.join(reasons)}" for run, reasons in sorted(h.collapses.items())]
    return "\n".join(lines) + "\n"


def report(folder: Path, log=print) -> Headline:
    """Read the headline off a finished experiment folder and write demo.json and demo.md into it."""
    refs = [r for r in discover_runs(Path(folder) / "runs") if r.method in METHODS]
    if not refs:
        raise ValueError(f"{folder}: no rods or static runs under runs/")
    h = headline(load_runs(refs), {r.run: read_task_stats(r.run_dir) for r in refs})
    (Path(folder) / "demo.json").write_text(json.dumps(h.as_dict(), indent=2, default=float))
    (Path(folder) / "demo.md").write_text(markdown(h))
    log(markdown(h))
    return h


def run(repeats: int, seed: int, config: Path, sets: dict, out: Path | None = None, log=print) -> Headline:
    """Run both arms on `repeats` run seeds from `seed`, then report."""
    folder = run_curriculum(BUDGET, METHODS, repeats, config, EVALS, {**sets, "seed": seed}, out, log=log)
    return report(folder, log)

"""Load an experiment folder for the paper's report: the comparison frames with each run labelled by its arm
(the run config's `name`: a method, or an ablation of rods), plus the buffer events, groups played and event
times that churn and evaluation cost are computed from. The only module of the report that reads files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import yaml

from bench.arms import ABLATIONS
from bench.experiments import Frames, RunRef, discover_runs, load_runs
from rods_core.config import METHODS
from storage.reader import RunReader


@dataclass
class PaperFrames:
    """Frames whose `method` column holds the arm, and the event tables the report adds to them."""

    frames: Frames
    buffer: pd.DataFrame  # run, method, step, task_id, from_pool, to_pool, reason
    groups: pd.DataFrame  # run, method, step, task_id: one row per group played (task_stats)
    eval_times: pd.DataFrame  # run, method, step, time of each eval event
    step_times: pd.DataFrame  # run, step, time of each step row


def arm_of(run_dir: Path) -> str:
    """A run's arm: the `name` its config was given when that names a method or an ablation (`rods bench
    curriculum` names a run after its method, `rods bench paper` after its arm); else its method."""
    cfg = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    name = cfg.get("name")
    return str(name) if name in (*METHODS, *ABLATIONS) else str(cfg.get("method", "?"))


def _events(ref: RunRef, arm: str) -> tuple[pd.DataFrame, ...]:
    reader = RunReader(ref.run_dir)
    tag = {"run": ref.run, "method": arm}
    buffer = reader.query("SELECT step, task_id, from_pool, to_pool, reason FROM buffer ORDER BY seq")
    groups = reader.query("SELECT step, task_id FROM task_stats ORDER BY seq")
    eval_times = reader.query("SELECT step, time FROM eval ORDER BY seq")
    step_times = reader.query("SELECT step, time FROM step ORDER BY seq")
    return buffer.assign(**tag), groups.assign(**tag), eval_times.assign(**tag), step_times.assign(run=ref.run)


def _cat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["run", "method", "step"])


def load_paper(folder: str | Path) -> PaperFrames:
    """Every run under `folder` (or its runs/), labelled by arm."""
    folder = Path(folder)
    refs = discover_runs(folder / "runs" if (folder / "runs").is_dir() else folder)
    refs = [replace(r, method=arm_of(r.run_dir)) for r in refs]
    tables = [_events(r, r.method) for r in refs]
    buffer, groups, eval_times, step_times = (_cat([t[i] for t in tables]) for i in range(4))
    return PaperFrames(load_runs(refs), buffer, groups, eval_times, step_times)


def evals_with_times(p: PaperFrames) -> pd.DataFrame:
    """The eval rows with the time their event was written (for eval cost)."""
    ev = p.frames.evals
    if ev.empty or p.eval_times.empty:
        return ev
    times = p.eval_times.drop_duplicates(["run", "step"], keep="last")[["run", "step", "time"]]
    return ev.merge(times, on=["run", "step"], how="left")

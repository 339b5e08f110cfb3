"""Load an experiment folder for the paper's report: the comparison frames with each run labelled by its arm
(the run config's `name`: a method, or an ablation of rods), plus the buffer events, groups played and event
times that churn and evaluation cost are computed from. The only module of the report that reads files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import yaml

from rods_core.config import METHODS
from rods_core.tasksets import HELDOUT_REASON
from rods_lab.experiments.arms import ABLATIONS
from rods_lab.experiments.heldout import SCORES
from rods_lab.experiments.offline import OFFLINE_ARMS
from rods_lab.results import Frames, RunRef, discover_runs, load_runs
from storage.reader import RunReader


@dataclass
class PaperFrames:
    """Frames whose `method` column holds the arm, and the event tables the report adds to them."""

    frames: Frames
    buffer: pd.DataFrame  # run, method, step, task_id, from_pool, to_pool, reason
    groups: pd.DataFrame  # run, method, step, task_id: one row per group played (task_stats)
    eval_times: pd.DataFrame  # run, method, step, time of each eval event
    step_times: pd.DataFrame  # run, step, time of each step row
    configs: dict = field(default_factory=dict)  # arm -> its first run's config (config.yaml as a dict)
    heldout: pd.DataFrame = field(default_factory=pd.DataFrame)  # run, method, seed, step, set, n, progress, accuracy
    collisions: pd.DataFrame = field(default_factory=pd.DataFrame)  # run, method, set, n: variants rejected as held-out


def arm_of(run_dir: Path) -> str:
    """A run's arm: the `name` its config was given when that names a method or an ablation (`rods bench
    curriculum` names a run after its method, `rods bench paper` after its arm); else its method."""
    cfg = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    name = cfg.get("name")
    return str(name) if name in (*METHODS, *ABLATIONS, *OFFLINE_ARMS) else str(cfg.get("method", "?"))


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
    """Every run under `folder` (or its runs/), labelled by arm, with the held-out scores of its checkpoints
    (the base model's as every run's step 0) and its held-out collisions."""
    folder = Path(folder)
    refs = discover_runs(folder / "runs" if (folder / "runs").is_dir() else folder)
    refs = [replace(r, method=arm_of(r.run_dir)) for r in refs]
    tables = [_events(r, r.method) for r in refs]
    buffer, groups, eval_times, step_times = (_cat([t[i] for t in tables]) for i in range(4))
    configs = {}
    for r in refs:
        configs.setdefault(r.method, yaml.safe_load((r.run_dir / "config.yaml").read_text()) or {})
    scores = _cat([_scores(r, _base_rows(r, folder)) for r in refs])
    hits = _cat([_collisions(r) for r in refs])
    return PaperFrames(load_runs(refs), buffer, groups, eval_times, step_times, configs, scores, hits)


def _base_rows(ref: RunRef, folder: Path) -> list[dict]:
    """The base model's scores on the held-out sets a run was scored on (its step 0): beside the H1 file it was
    evaluated on (each replicate's own with `--pool-seed-base`), else the experiment's heldout/ folder."""
    ev = (yaml.safe_load((ref.run_dir / "config.yaml").read_text()) or {}).get("eval") or {}
    where = Path(ev["file"]).parent if ev.get("split") == "file" and ev.get("file") else folder / "heldout"
    base = where / "base_model" / SCORES
    return json.loads(base.read_text()) if base.is_file() else []


def _scores(ref: RunRef, base_rows: list[dict]) -> pd.DataFrame:
    path = ref.run_dir / SCORES
    rows = [*base_rows, *(json.loads(path.read_text()) if path.is_file() else [])]
    cols = ["step", "set", "n", "progress", "accuracy"]
    frame = pd.DataFrame([{k: r[k] for k in cols} for r in rows], columns=cols)
    return frame.assign(run=ref.run, method=ref.method, seed=ref.seed) if path.is_file() else frame.iloc[0:0]


def _collisions(ref: RunRef) -> pd.DataFrame:
    """Synthesized variants of a run rejected for equalling a held-out task, per set."""
    reader = RunReader(ref.run_dir)
    if not reader.counts().get("variant"):
        return pd.DataFrame(columns=["set", "n", "run", "method"])
    q = f"SELECT reason, count(*) AS n FROM variant WHERE reason LIKE '%{HELDOUT_REASON}%' GROUP BY reason"
    hits = reader.query(q)
    hits["set"] = hits.reason.str.rsplit(" ", n=1).str[-1]
    return hits[["set", "n"]].assign(run=ref.run, method=ref.method)


def evals_with_times(p: PaperFrames) -> pd.DataFrame:
    """The eval rows with the time their event was written (for eval cost)."""
    ev = p.frames.evals
    if ev.empty or p.eval_times.empty:
        return ev
    times = p.eval_times.drop_duplicates(["run", "step"], keep="last")[["run", "step", "time"]]
    return ev.merge(times, on=["run", "step"], how="left")

"""Run summaries that outlive the machine and the session (docs/experiments/pool-replicates/design.md): as each
run of `rods bench paper --summaries DIR` finishes, a small JSON file DIR/<run id>.json records what the analysis
reads (every evaluation, the audit) and what fixes the run's floats (config hash, commit, CPU kernels, model); the
runner skips a run whose summary is there and valid for its planned config, and runs or resumes the others.

The config hash leaves out where the run was written (output_dir, workspace) and reads the paths of the
experiment's own files (held-out sets, an offline arm's seeds file) relative to the experiment folder, so the
same design run into another folder, or on another machine, hashes the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pandas as pd

from rods_core.config import RunConfig
from rods_core.reasons import OfferReason
from rods_lab.experiments.audit import audit, training_tasks
from rods_lab.experiments.heldout import SCORES
from rods_lab.experiments.offline import rods_distinct_variants
from rods_lab.experiments.replicates import Replicate
from storage.reader import RunReader

VERSION = 1
REQUIRED = ("version", "run", "arm", "replicate", "config_hash", "status", "evaluations")
_OUT_PATHS = ("output_dir", "workspace")
_EXPERIMENT_PATHS = (("eval", "file"), ("seeds", "file"))
CODE_ROOT = Path(__file__).resolve().parents[2]  # the checkout whose code the runs ran


def config_hash(cfg: RunConfig, out: Path) -> str:
    """sha256 of the run config without where it was written, its experiment files' paths relative to `out`."""
    data = cfg.model_dump(mode="json")
    for key in _OUT_PATHS:
        data.pop(key, None)

    def rel(path: str | None) -> str | None:
        return os.path.relpath(path, out) if path else path

    for section, key in _EXPERIMENT_PATHS:
        data[section][key] = rel(data[section][key])
    data["synthesis"]["exclude"] = [rel(p) for p in data["synthesis"].get("exclude") or []]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def code_state(root: Path = CODE_ROOT) -> dict:
    """The commit of the code that ran, its worktree, and whether tracked files differed from that commit."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": git("rev-parse", "HEAD"),
        "worktree": str(root),
        "dirty": None if status is None else bool(status),
    }


def path(folder: Path, run_id: str) -> Path:
    return Path(folder) / f"{run_id}.json"


def read_valid(folder: Path, run_id: str, cfg: RunConfig, out: Path) -> dict | None:
    """The run's summary when it is there, whole (REQUIRED keys, this VERSION), of a finished run, and written for
    this planned config (its hash); None otherwise (the run is run, or resumed, again)."""
    p = path(folder, run_id)
    try:
        s = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    whole = isinstance(s, dict) and all(k in s for k in REQUIRED) and s["version"] == VERSION
    if not whole or s["run"] != run_id or s["status"] != "finished":
        return None
    return s if s["config_hash"] == config_hash(cfg, out) else None


def write(folder: Path, summary: dict) -> Path:
    """DIR/<run>.json, replaced whole (temp file + rename)."""
    target = path(folder, summary["run"])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(summary, indent=1, sort_keys=True, default=float))
    os.replace(tmp, target)
    return target


def evaluations(run_dir: Path, rep: Replicate) -> list[dict]:
    """Every evaluation of a run: its in-run H1 evaluations, the base model's scores on the later sets (step 0),
    its checkpoints' scores on them, and the sampled H1 scores where made (`sampled`: True)."""
    rows = [
        {"step": int(r.step), "set": "H1" if rep.folder else str(r.split), "progress": float(r.progress),
         "accuracy": float(r.accuracy), "tasks": None if pd.isna(r.tasks) else int(r.tasks),
         **({"per_task": json.loads(r.per_task)} if rep.folder and isinstance(r.per_task, str) else {})}
        for r in RunReader(run_dir).eval_curve().drop_duplicates(["step", "split"], keep="last").itertuples()
    ]  # fmt: skip
    files = [rep.folder / "base_model" / SCORES] if rep.folder else []
    for f in [*files, run_dir / SCORES]:
        for r in json.loads(f.read_text()) if f.is_file() else []:
            keep = ("step", "set", "progress", "accuracy", "n", "sampled", *(("per_task",) if r["set"] == "H1" else ()))
            rows.append({k: r.get(k) for k in keep})  # per task only on H1: its area below the audit's 0.8
    return rows


def pool_sizes(run_dir: Path, pool_ids: set[str]) -> dict:
    """Seeds, the distinct tasks outside them played in training (an offline arm's M when this is rods' run), the
    pools at the last step, the most tasks alive (active + staged), accepted variants, and distinct tasks played."""
    pool_n = len(pool_ids)
    reader = RunReader(run_dir)
    st = reader.step_metrics().drop_duplicates("step", keep="last")
    col = {c: st[c] for c in ("buffer/active", "buffer/staged", "buffer/retired") if c in st}
    last = {k.split("/")[1]: float(v.iat[-1]) for k, v in col.items() if len(v)}
    alive = (col["buffer/active"] + col["buffer/staged"]).max() if len(col) == 3 and len(st) else None
    counts = reader.counts()
    accepted = reader.query("SELECT count(DISTINCT variant_id) AS n FROM variant WHERE accepted").n.iat[0]
    played = reader.query("SELECT count(DISTINCT task_id) AS n FROM task_stats").n.iat[0]
    return {
        "seeds": pool_n,
        "variants_played": rods_distinct_variants(run_dir, pool_ids) if counts.get("task_stats") else 0,
        "last": last,
        "alive_max": None if alive is None else float(alive),
        "variants_accepted": int(accepted) if counts.get("variant") else 0,
        "distinct_played": int(played) if counts.get("task_stats") else 0,
    }


def step_digest(run_dir: Path) -> dict:
    """The step rows' count, a sha256 of their figures (time/* left out: they differ on every machine) and the
    per-step informative share and reward (the manipulation check reads them)."""
    st = RunReader(run_dir).step_metrics().drop_duplicates("step", keep="last").sort_values("step")
    keep = [c for c in st.columns if not c.startswith("time/") and c not in ("time", "seq")]
    body = json.dumps(st[keep].to_dict("records"), sort_keys=True, default=str)
    get = {c: [None if pd.isna(v) else float(v) for v in st[c]] for c in ("boundary/informative_share", "reward/mean")
           if c in st}  # fmt: skip
    return {"count": len(st), "sha256": hashlib.sha256(body.encode()).hexdigest(), "per_step": get}


def summarize(run_dir: Path, cfg: RunConfig, meta: dict, rep: Replicate, out: Path, settings: dict) -> dict:
    """A finished run's summary (what read_valid checks, the analysis reads and the design asks to record)."""
    run_dir = Path(run_dir)
    reader = RunReader(run_dir)
    budget = 0
    if reader.counts().get("buffer"):
        q = "SELECT count(*) AS n FROM buffer WHERE reason = ?"
        budget = int(reader.query(q, [str(OfferReason.BUDGET)]).n.iat[0])
    seeds_file = Path(cfg.seeds.file) if cfg.seeds.subset == "file" and cfg.seeds.file else None
    audited = {}
    if rep.sets:
        held = {n: t for n, t in rep.sets.items() if n != "H3"}  # H3 is BFCL's test split: descriptive only
        audited = audit(held, training_tasks(run_dir, rep.pool, seeds_file))
    return {
        "version": VERSION,
        "run": meta["run"],
        "arm": meta["arm"],
        "replicate": rep.key,
        "seed": cfg.seed,
        "status": meta["status"],
        "config_hash": config_hash(cfg, out),
        "code": code_state(),
        "cpu_kernels": settings.get("cpu_kernels"),
        "model_sha256": settings.get("model_sha256"),
        "pool": [t.id for t in rep.pool],
        "heldout_sets": {n: {"n": v["n"], "sha256": v["sha256"]} for n, v in rep.manifest.get("sets", {}).items()},
        "evaluations": evaluations(run_dir, rep),
        "steps": step_digest(run_dir),
        "pool_sizes": pool_sizes(run_dir, {t.id for t in rep.pool}),
        "binding": {"offer_budget": budget},
        "audit": audited,
        **{k: meta.get(k) for k in ("wall_s", "score_s", "load_1min_at_start", "resumed_from", "offline")},
    }

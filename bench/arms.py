"""The paper's experiment as one command: arms (methods, and ablations of rods that each flip one config flag)
x K repeats on one trajectory budget, with a time estimate up front and a restart that skips finished runs.

An arm is a method plus run-config overrides; a run is named after its arm (config `name`, run id
<arm>_r<k>), so the report (bench/paper_report.py) tells the ablations of rods apart. Runs reuse
`rods bench curriculum`'s plans and launcher (bench/curriculum_bench.py): seed base+k for repeat k of every
arm, one `rods train` subprocess per run, one after another. Restarting the command on the same folder keeps
every run whose event log holds all its steps and reruns the others from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from bench.curriculum_bench import design_settings, ensure_model_once, launch, plan_steps, run_configs
from bench.experiments import EXPERIMENTS
from rods_core.config import METHODS, RunConfig
from storage.reader import RunReader

# Ablations of rods: each changes one decision of the method, by one config flag (default: rods as shipped).
ABLATIONS: dict[str, dict[str, object]] = {
    "uniform_parents": {"buffer.synth_parents": "uniform"},  # parents drawn at random from the seeds
    "direct_injection": {"buffer.injection": "direct"},  # variants enter active at once, never probed
    "single_layer": {"buffer.retirement": "single"},  # one rule: retire at the first non-boundary group
    "no_budget": {"buffer.expansion_budget": False},  # P_max not enforced
    "paper_streaks": {"buffer.mastered_streak": 2, "buffer.hard_streak": 3, "buffer.probe_obs": 2},
}
# Settings a restart on the same folder must share with the runs already there (arms and repeats may grow).
RESTART_SAME = ("budget", "config", "sets", "max_steps", "eval_every", "trajectories_per_step")
# Seconds per training step and per held-out task evaluated, of the demo design (2 processes) on this 2-core
# machine while loaded (docs/experiments/cpu-depletion.md); used only for the estimate printed before the runs start.
EST_STEP_S = {"static": 10.0, "rods": 16.0}
EST_EVAL_S_PER_TASK = 0.07
EST_RUN_OVERHEAD_S = 40.0  # process start, model load, held-out variant synthesis


def parse_arms(text: str) -> list[str]:
    """Arms from a comma list: methods (rods_core.config.METHODS) and ablations of rods (ABLATIONS)."""
    arms = [a.strip() for a in text.split(",") if a.strip()]
    known = (*METHODS, *ABLATIONS)
    bad = [a for a in arms if a not in known]
    if bad or not arms:
        raise ValueError(f"--arms: unknown {bad or 'empty list'}; choose from {', '.join(known)}")
    return list(dict.fromkeys(arms))


def arm_overrides(arm: str) -> tuple[str, dict[str, object]]:
    """(method, overrides) of an arm."""
    return ("rods", dict(ABLATIONS[arm])) if arm in ABLATIONS else (arm, {})


def plan_arms(
    base: Path, out: Path, arms: list[str], repeats: int, budget: int, evals: int, sets: dict
) -> list[tuple[str, str, int, RunConfig]]:
    """(run id, arm, repeat, config) of every run, validated before any starts (a bad flag fails here)."""
    plans = []
    for arm in arms:
        method, extra = arm_overrides(arm)
        for _, _, k, cfg in run_configs(base, out, [method], repeats, budget, evals, {**sets, **extra}):
            plans.append((f"{arm}_r{k}", arm, k, cfg.model_copy(update={"name": arm})))
    return sorted(plans, key=lambda p: (p[2], arms.index(p[1])))  # repeat-major: partial results stay paired


def estimate_s(arms: list[str], repeats: int, steps: int, evals: int, eval_tasks: int) -> float:
    """Seconds the runs should take on this machine (EST_* figures), before any run has been measured."""
    per_eval = EST_EVAL_S_PER_TASK * eval_tasks
    per_arm = [EST_STEP_S.get(arm_overrides(a)[0], EST_STEP_S["rods"]) * steps for a in arms]
    return repeats * sum(s + (evals + 1) * per_eval + EST_RUN_OVERHEAD_S for s in per_arm)


def is_complete(run_dir: Path, max_steps: int) -> bool:
    """Whether a run folder's event log holds every step (a finished run, kept on restart)."""
    return run_dir.is_dir() and (RunReader(run_dir).latest_step() or 0) >= max_steps


def _status(run_dir: Path, max_steps: int) -> str:
    return "finished" if is_complete(run_dir, max_steps) else "not run"


def run(
    budget: int,
    arms: list[str],
    repeats: int,
    config: Path,
    evals: int,
    sets: dict | None = None,
    out: Path | None = None,
    timeout_s: float | None = None,
    log=print,
) -> Path:
    """Run every arm x repeat into `out` (skipping runs already complete there); returns the folder."""

    sets = dict(sets or {})
    out = Path(out or EXPERIMENTS.parent / "paper" / time.strftime("%Y%m%d-%H%M%S"))
    plans = plan_arms(Path(config), out, arms, repeats, budget, evals, sets)
    steps, every, per_step = plan_steps(plans[0][3], budget, evals)
    n_evals = len(range(every, steps + 1, every)) + (steps % every != 0)
    eval_tasks = plans[0][3].eval.limit or 0
    todo = [p for p in plans if not is_complete(out / "runs" / p[0], steps)]
    est = estimate_s(arms, repeats, steps, n_evals, eval_tasks) * len(todo) / len(plans)
    log(
        f"paper: {len(plans)} runs ({len(plans) - len(todo)} already complete) x {steps} steps x {per_step} "
        f"trajectories, {n_evals} evaluations (and one at step 0) of {eval_tasks} tasks each; estimated {est / 60:.0f} min "
        f"(figures of a loaded 2-core machine; the log updates the estimate after each run) into {out}"
    )
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.json"
    before = json.loads(manifest.read_text()) if manifest.exists() else {"settings": {}, "runs": []}
    done = {m["run"]: m for m in before["runs"]}
    settings = {
        **design_settings(plans[0][3], budget, arms, repeats, config, evals, sets),
        "arms": arms,
        "ablations": {a: ABLATIONS[a] for a in arms if a in ABLATIONS},
    }
    changed = [k for k in RESTART_SAME if before["settings"] and before["settings"].get(k) != settings[k]]
    if changed:
        raise ValueError(f"{out}: holds runs of another design ({', '.join(changed)} differ); give a new --out")
    ensure_model_once(plans[0][3], log)
    t0, spent = time.perf_counter(), []
    for i, (run_id, arm, _k, cfg) in enumerate(todo):
        shutil.rmtree(out / "runs" / run_id, ignore_errors=True)  # a run cut short restarts from scratch
        load = os.getloadavg()[0]  # what else ran as this run started (the report says whether it was quiet)
        # "method" names the arm, so `rods bench curriculum-pool` numbers an ablation's repeats apart from rods'
        meta = {
            **launch(run_id, cfg, out, timeout_s, log),
            "method": arm,
            "arm": arm,
            "load_1min_at_start": round(load, 2),
        }
        done[run_id] = meta
        spent.append(meta["wall_s"])
        left = (len(todo) - i - 1) * sum(spent) / len(spent)
        log(f"  {i + 1}/{len(todo)} done; about {left / 60:.0f} min left at the measured pace")
        runs = [done[p[0]] for p in plans if p[0] in done]
        manifest.write_text(json.dumps({"settings": settings, "runs": runs}, indent=2))
    settings["wall_s"] = round(time.perf_counter() - t0, 1)
    runs = [done.get(p[0]) or {"run": p[0], "arm": p[1], "status": _status(out / "runs" / p[0], steps)} for p in plans]
    manifest.write_text(json.dumps({"settings": settings, "runs": runs}, indent=2))
    return out

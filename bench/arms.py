"""The paper's experiment as one command: arms (methods, and ablations of rods that each flip one config flag)
x K repeats on one trajectory budget, with a time estimate up front and a restart that skips finished runs.

An arm is a method plus run-config overrides; a run is named after its arm (config `name`, run id
<arm>_r<k>), so the report (bench/paper_report.py) tells the ablations of rods apart. Runs reuse
`rods bench curriculum`'s plans and launcher (bench/curriculum_bench.py): seed base+k for repeat k of every
arm, one `rods train` subprocess per run, one after another. Restarting the command on the same folder keeps
every run whose event log holds all its steps and reruns the others from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from bench.curriculum_bench import design_settings, ensure_model_once, launch, plan_steps, run_configs
from bench.experiments import EXPERIMENTS
from bench.experiments_heldout import (
    SCORES,
    SETS,
    HeldOutSpec,
    score_checkpoints,
    score_folders,
    sha256,
    warm_start_tasks,
)
from bench.experiments_heldout import build as build_heldout
from bench.experiments_heldout import load as load_heldout
from bench.experiments_offline import OFFLINE_ARMS, offline_m, offline_variants, write_offline_seeds
from bench.machine import cpu_kernels
from rods_core.checkpoint import checkpoint_step, last_checkpoint
from rods_core.config import METHODS, RunConfig
from rods_core.tasksets import select_seeds
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
RESTART_SAME = ("budget", "config", "sets", "max_steps", "eval_every", "trajectories_per_step", "heldout")
# Seconds per training step and per held-out task evaluated, of the demo design (2 processes) on this 2-core
# machine while loaded (docs/experiments/cpu-depletion.md); used only for the estimate printed before the runs start.
EST_STEP_S = {"static": 10.0, "rods": 16.0}
EST_EVAL_S_PER_TASK = 0.07
EST_RUN_OVERHEAD_S = 40.0  # process start, model load, held-out variant synthesis


def parse_arms(text: str) -> list[str]:
    """Arms from a comma list: methods (rods_core.config.METHODS), ablations of rods (ABLATIONS) and the offline
    baselines (bench.experiments_offline.OFFLINE_ARMS)."""
    arms = [a.strip() for a in text.split(",") if a.strip()]
    known = (*METHODS, *ABLATIONS, *OFFLINE_ARMS)
    bad = [a for a in arms if a not in known]
    if bad or not arms:
        raise ValueError(f"--arms: unknown {bad or 'empty list'}; choose from {', '.join(known)}")
    return list(dict.fromkeys(arms))


def arm_overrides(arm: str) -> tuple[str, dict[str, object]]:
    """(method, overrides) of an arm; an offline arm is static GRPO on a seeds file written before its run."""
    if arm in OFFLINE_ARMS:
        return "static", {"seeds.subset": "file", "seeds.random": None, "seeds.ids": None, "seeds.limit": None}
    return ("rods", dict(ABLATIONS[arm])) if arm in ABLATIONS else (arm, {})


def heldout_overrides(heldout_dir: Path) -> dict[str, object]:
    """Every run evaluates in-run on H1 and rejects synthesized variants equal to any held-out task."""
    files = [str(heldout_dir / f"{name}.jsonl") for name in SETS]
    return {"eval.split": "file", "eval.file": files[0], "eval.limit": None, "synthesis.exclude": files}


def plan_arms(
    base: Path, out: Path, arms: list[str], repeats: int, budget: int, evals: int, sets: dict, heldout: bool = False
) -> list[tuple[str, str, int, RunConfig]]:
    """(run id, arm, repeat, config) of every run, validated before any starts (a bad flag fails here). With
    `heldout`, runs use the experiment's held-out sets (out/heldout) and keep a checkpoint at each evaluation."""
    plans = []
    sets = {**sets, **(heldout_overrides(out / "heldout") if heldout else {})}
    for arm in arms:
        method, extra = arm_overrides(arm)
        if arm in OFFLINE_ARMS:
            extra = {**extra, "seeds.file": str(out / "offline" / f"{arm}.jsonl")}  # per repeat: set below
        for _, _, k, cfg in run_configs(base, out, [method], repeats, budget, evals, {**sets, **extra}):
            if arm in OFFLINE_ARMS:
                cfg = cfg.model_copy(
                    update={"seeds": cfg.seeds.model_copy(update={"file": str(offline_file(out, arm, k))})}
                )
            if heldout:  # a checkpoint at every evaluation, all kept: each is scored on H2 and H3 after the run
                grpo = cfg.grpo.model_copy(update={"save_steps": cfg.eval.every, "save_total_limit": evals + 2})
                cfg = cfg.model_copy(update={"grpo": grpo})
            plans.append((f"{arm}_r{k}", arm, k, cfg.model_copy(update={"name": arm})))
    return sorted(plans, key=lambda p: (p[2], arms.index(p[1])))  # repeat-major: partial results stay paired


def offline_file(out: Path, arm: str, k: int) -> Path:
    return out / "offline" / f"{arm}_r{k}.jsonl"


def estimate_s(arms: list[str], repeats: int, steps: int, evals: int, eval_tasks: int) -> float:
    """Seconds the runs should take on this machine (EST_* figures), before any run has been measured."""
    per_eval = EST_EVAL_S_PER_TASK * eval_tasks
    per_arm = [EST_STEP_S.get(arm_overrides(a)[0], EST_STEP_S["rods"]) * steps for a in arms]
    return repeats * sum(s + (evals + 1) * per_eval + EST_RUN_OVERHEAD_S for s in per_arm)


def measured_s(runs: list[dict], arm: str) -> float | None:
    """Mean seconds of the runs a folder's manifest records as run whole (not resumed), training plus scoring
    their checkpoints: of the same arm where there is one, else of any arm; None before any was measured. A
    model other than the demo's, or another machine, is then estimated from what it really took."""
    whole = [r for r in runs if r.get("wall_s") and r.get("resumed_from") is None]
    same = [r for r in whole if r.get("arm") == arm] or whole
    return sum(r["wall_s"] + r.get("score_s", 0.0) for r in same) / len(same) if same else None


def estimate_todo(runs: list[dict], todo: list[tuple], printed_per_run: float) -> tuple[float, str]:
    """(seconds, where the figure comes from) for the runs left: this folder's measured runs where it has any,
    else the printed EST_* figures."""
    measured = [measured_s(runs, plan[1]) for plan in todo]
    if todo and None not in measured:
        return sum(measured), "measured on this folder's runs"
    return printed_per_run * len(todo), "figures of a loaded 2-core machine"


def score_run(run_dir: Path, sets: dict, cfg: RunConfig, log=print) -> float:
    """Seconds spent scoring a run's checkpoints on H2 and H3 (part of what a run costs)."""
    t0 = time.perf_counter()
    score_checkpoints(run_dir, {n: sets[n] for n in ("H2", "H3")}, cfg, log)
    return round(time.perf_counter() - t0, 1)


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
    heldout: HeldOutSpec | None = None,
    only: list[str] | None = None,
) -> Path:
    """Run every arm x repeat into `out` (skipping runs already complete there, resuming runs cut short from their
    last checkpoint); returns the folder. `only` names the runs of the plan to run now (one repeat per machine or
    per sitting); the others are left as they are, and the manifest lists them as not run. With
    `heldout`, the experiment's held-out sets are made once (or read back, hash-checked) before any run, every
    run is evaluated on H1 in-run and each of its checkpoints on H2 and H3 after it."""
    sets = dict(sets or {})
    out = Path(out or EXPERIMENTS.parent / "paper" / time.strftime("%Y%m%d-%H%M%S"))
    plans = plan_arms(Path(config), out, arms, repeats, budget, evals, sets, heldout=heldout is not None)
    steps, every, per_step = plan_steps(plans[0][3], budget, evals)
    n_evals = len(range(every, steps + 1, every)) + (steps % every != 0)
    eval_tasks = plans[0][3].eval.limit or 0
    unknown = sorted(set(only or ()) - {p[0] for p in plans})
    if unknown:
        raise ValueError(f"--only: {', '.join(unknown)} not in this plan (its runs: {', '.join(p[0] for p in plans)})")
    unfinished = [p for p in plans if not is_complete(out / "runs" / p[0], steps)]
    todo = [p for p in unfinished if not only or p[0] in only]
    manifest = out / "manifest.json"
    before = json.loads(manifest.read_text()) if manifest.exists() else {"settings": {}, "runs": []}
    done = {m["run"]: m for m in before["runs"]}
    est, how = estimate_todo(before["runs"], todo, estimate_s(arms, repeats, steps, n_evals, eval_tasks) / len(plans))
    log(
        f"paper: {len(plans)} runs ({len(plans) - len(unfinished)} already complete"
        f"{f', {len(unfinished) - len(todo)} left for later (--only)' if len(unfinished) > len(todo) else ''}) "
        f"x {steps} steps x {per_step} trajectories, {n_evals} evaluations (and one at step 0) of "
        f"{eval_tasks or 'the H1'} tasks each; estimated {est / 60:.0f} min ({how}; the log updates the estimate "
        f"after each run) into {out}"
    )
    out.mkdir(parents=True, exist_ok=True)
    settings = {
        **design_settings(plans[0][3], budget, arms, repeats, config, evals, sets),
        "arms": arms,
        "ablations": {a: ABLATIONS[a] for a in arms if a in ABLATIONS},
        "heldout": asdict(heldout) if heldout else None,
    }
    changed = [k for k in RESTART_SAME if before["settings"] and before["settings"].get(k) != settings.get(k)]
    if changed:
        raise ValueError(f"{out}: holds runs of another design ({', '.join(changed)} differ); give a new --out")
    ensure_model_once(plans[0][3], out, log)
    model = Path(plans[0][3].model.path)
    settings |= {"model": str(model), "model_sha256": weights_sha256(model), "cpu_kernels": cpu_kernels()}
    check_repeatable(before["settings"], settings, out)
    pool = select_seeds(plans[0][3])
    settings["pool"] = [t.id for t in pool]
    held = prepare_heldout(plans[0][3], pool, heldout, out / "heldout", log) if heldout else None
    if held is not None:
        settings["heldout_sets"] = {k: {"n": v["n"], "sha256": v["sha256"]} for k, v in held[0]["sets"].items()}
    if held is not None:  # a run that finished training but was cut short while its checkpoints were scored
        for run_id, _, _, cfg in plans:
            if is_complete(out / "runs" / run_id, steps) and not (out / "runs" / run_id / SCORES).is_file():
                score_run(out / "runs" / run_id, held[1], cfg, log)
    # recorded before any run starts, so a run cut short resumes only under the kernels and model it began with
    write_manifest(manifest, settings, [done[p[0]] for p in plans if p[0] in done])
    t0, spent = time.perf_counter(), []
    for i, (run_id, arm, k, cfg) in enumerate(todo):
        # a run cut short resumes from its last checkpoint (the figures of the run uninterrupted: tests/
        # test_resume_exact.py); one cut before its first checkpoint starts again from nothing
        ckpt = last_checkpoint(out / "runs" / run_id)
        if ckpt is None:
            shutil.rmtree(out / "runs" / run_id, ignore_errors=True)
        extra = prepare_offline(out, arm, k, cfg, pool, held[1] if held else {}, log) if arm in OFFLINE_ARMS else {}
        load = os.getloadavg()[0]  # what else ran as this run started (the report says whether it was quiet)
        # "method" names the arm, so `rods bench curriculum-pool` numbers an ablation's repeats apart from rods'
        meta = {
            **launch(run_id, cfg, out, timeout_s, log, resume=ckpt is not None),
            "resumed_from": checkpoint_step(ckpt) if ckpt else None,
            "method": arm,
            "arm": arm,
            "load_1min_at_start": round(load, 2),
        }
        if held is not None and (out / "runs" / run_id).is_dir():
            meta["score_s"] = score_run(out / "runs" / run_id, held[1], cfg, log)
        done[run_id] = {**meta, **extra}
        spent.append(meta["wall_s"] + meta.get("score_s", 0.0))
        left = (len(todo) - i - 1) * sum(spent) / len(spent)
        log(f"  {i + 1}/{len(todo)} done; about {left / 60:.0f} min left at the measured pace")
        write_manifest(manifest, settings, [done[p[0]] for p in plans if p[0] in done])
    settings["wall_s"] = round(time.perf_counter() - t0, 1)
    runs = [done.get(p[0]) or {"run": p[0], "arm": p[1], "status": _status(out / "runs" / p[0], steps)} for p in plans]
    write_manifest(manifest, settings, runs)
    return out


def write_manifest(path: Path, settings: dict, runs: list[dict]) -> None:
    """The experiment's record, replaced whole (temp file + rename): a bench killed while writing it leaves the
    previous one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"settings": settings, "runs": runs}, indent=2))
    os.replace(tmp, path)


def weights_sha256(folder: Path) -> str | None:
    """sha256 of a model folder's weights: of model.safetensors itself where there is one file (the figure the
    experiment docs quote), else of the shards' names and hashes; None for a folder with no safetensors."""
    files = sorted(Path(folder).glob("*.safetensors")) if Path(folder).is_dir() else []
    if len(files) == 1:
        return sha256(files[0])
    shards = "\n".join(f"{f.name} {sha256(f)}" for f in files)
    return hashlib.sha256(shards.encode()).hexdigest() if files else None


def check_repeatable(recorded: dict, now: dict, out: Path) -> None:
    """Refuse runs that could not repeat the folder's runs: another model (its weights' sha256) or another set of
    torch's CPU kernels (bench/machine.py). A folder that recorded neither (older code) is not checked."""
    problems = []
    if recorded.get("cpu_kernels") and recorded["cpu_kernels"] != now["cpu_kernels"]:
        problems.append(
            f"its runs used torch's {recorded['cpu_kernels']} CPU kernels and this machine's are "
            f"{now['cpu_kernels']}, which round differently (set ATEN_CPU_CAPABILITY={recorded['cpu_kernels'].lower()})"
        )
    if recorded.get("model_sha256") and recorded["model_sha256"] != now["model_sha256"]:
        problems.append(
            f"its runs trained weights of sha256 {recorded['model_sha256']} and {now['model']} holds "
            f"{now['model_sha256']} (rebuild that model, with the kernels it was built with)"
        )
    if problems:
        raise ValueError(f"{out}: runs here would not repeat its runs: {'; '.join(problems)}; or give a new --out")


def prepare_heldout(cfg: RunConfig, pool: list, spec: HeldOutSpec, folder: Path, log=print) -> tuple[dict, dict]:
    """(manifest, sets) of the experiment's held-out folder: made once, read back (hash-checked) on a restart;
    the base model's H2 and H3 scores (every run's step 0) beside them."""
    if (folder / "manifest.json").is_file():
        manifest, sets = load_heldout(folder)
        if manifest["spec"] != asdict(spec):
            raise ValueError(f"{folder}: held-out sets of another spec ({manifest['spec']}); give a new --out")
    else:
        manifest = build_heldout(pool, spec, cfg.synthesis, folder, trained=warm_start_tasks(cfg))
        _, sets = load_heldout(folder)
        log("held-out sets: " + ", ".join(f"{k} {v['n']} tasks" for k, v in manifest["sets"].items()))
    base = folder / "base_model"
    if not (base / SCORES).is_file():
        base.mkdir(exist_ok=True)
        model = Path(cfg.model.path)
        rows = score_folders([(0, model)], {n: sets[n] for n in ("H2", "H3")}, cfg, log)
        (base / SCORES).write_text(json.dumps(rows))
    return manifest, sets


def prepare_offline(out: Path, arm: str, k: int, cfg: RunConfig, pool: list, sets: dict, log=print) -> dict:
    """Write the seeds file of an offline arm's run k (pool + M variants); its stats go to the manifest."""
    rods_dir = out / "runs" / f"rods_r{k}"
    m = offline_m(arm, rods_dir, pool)
    keys = {t.content_key(): name for name, tasks in sets.items() for t in tasks}
    variants, stats = offline_variants(pool, m, cfg.synthesis, cfg.seed, keys)
    write_offline_seeds(offline_file(out, arm, k), pool, variants, stats)
    log(
        f"  {arm}_r{k}: {stats['made']} of M = {m} variants synthesized up front ({stats['heldout_collisions_excluded']} held-out collisions left out)"
    )
    return {"offline": stats}

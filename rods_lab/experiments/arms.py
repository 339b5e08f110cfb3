"""The paper's experiment as one command: arms (methods, and ablations of rods that each flip one config flag)
x K repeats on one trajectory budget, with a time estimate up front and a restart that skips finished runs.

An arm is a method plus run-config overrides; a run is named after its arm (config `name`, run id
<arm>_r<k>), so the report (rods_lab/experiments/report.py) tells the ablations of rods apart. Runs reuse
`rods bench curriculum`'s plans and launcher (rods_lab/experiments/runner.py): seed base+k for repeat k of every
arm, one `rods train` subprocess per run, one after another. Restarting the command on the same folder keeps
every run whose event log holds all its steps and reruns the others from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rods_core.checkpoint import checkpoint_step, last_checkpoint
from rods_core.config import METHODS, RunConfig
from rods_lab.experiments import summaries as run_summaries
from rods_lab.experiments.heldout import SCORES, HeldOutSpec, same_spec, score_checkpoints, sha256
from rods_lab.experiments.machine import cpu_kernels
from rods_lab.experiments.offline import OFFLINE_ARMS, offline_m, offline_variants, write_offline_seeds
from rods_lab.experiments.replicates import Replicate, Replicates, heldout_folder, with_heldout, with_pool_seed
from rods_lab.experiments.runner import design_settings, launch, plan_steps, run_configs
from rods_lab.model_build import build_before_runs
from rods_lab.results import EXPERIMENTS
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
RESTART_SAME = (
    "budget",
    "config",
    "sets",
    "max_steps",
    "eval_every",
    "trajectories_per_step",
    "heldout",
    "pool_seed_base",
)
# Seconds per training step and per held-out task evaluated, of the demo design (2 processes) on this 2-core
# machine while loaded (docs/experiments/cpu-depletion.md); used only for the estimate printed before the runs start.
EST_STEP_S = {"static": 10.0, "rods": 16.0}
EST_EVAL_S_PER_TASK = 0.07
EST_RUN_OVERHEAD_S = 40.0  # process start, model load, held-out variant synthesis


@dataclass(frozen=True)
class RunOptions:
    """What `rods bench paper` adds to the plan: replicates' own pools, run summaries, offline_large's M."""

    pool_seed_base: int | None = None  # repeat k draws its pool by seed pool_seed_base + k (None: one pool)
    summaries: Path | None = None  # the folder of run summaries (None: none written or read)
    offline_large_ratio: int | None = None  # offline_large's M = this x rods' M (None: OFFLINE_LARGE_PER_SEED a seed)


def parse_arms(text: str) -> list[str]:
    """Arms from a comma list: methods (rods_core.config.METHODS), ablations of rods (ABLATIONS) and the offline
    baselines (rods_lab.experiments.offline.OFFLINE_ARMS)."""
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


def plan_arms(
    base: Path,
    out: Path,
    arms: list[str],
    repeats: int,
    budget: int,
    evals: int,
    sets: dict,
    heldout: HeldOutSpec | None = None,
    pool_seed_base: int | None = None,
) -> list[tuple[str, str, int, RunConfig]]:
    """(run id, arm, repeat, config) of every run, validated before any starts (a bad flag fails here). With
    `heldout`, runs use the held-out sets of their repeat (rods_lab.experiments.replicates.heldout_folder) and keep a checkpoint
    at each evaluation; with `pool_seed_base`, repeat k of every arm draws its pool by seed pool_seed_base + k."""
    plans = []
    for arm in arms:
        method, extra = arm_overrides(arm)
        if arm in OFFLINE_ARMS:
            extra = {**extra, "seeds.file": str(out / "offline" / f"{arm}.jsonl")}  # per repeat: set below
        for _, _, k, cfg in run_configs(base, out, [method], repeats, budget, evals, {**sets, **extra}):
            if arm in OFFLINE_ARMS:
                cfg = cfg.model_copy(
                    update={"seeds": cfg.seeds.model_copy(update={"file": str(offline_file(out, arm, k))})}
                )
            elif pool_seed_base is not None:
                cfg = with_pool_seed(cfg, pool_seed_base + k)
            if heldout is not None:
                cfg = with_heldout(cfg, heldout_folder(out, None if pool_seed_base is None else k), heldout, evals)
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


def score_run(run_dir: Path, rep: Replicate, cfg: RunConfig, log=print) -> float:
    """Seconds spent scoring a run's checkpoints on its repeat's later sets (part of what a run costs)."""
    t0 = time.perf_counter()
    spec = rep.manifest.get("spec") or {}
    sampled = (rep.sets["H1"], spec["h1_samples"]) if spec.get("h1_samples") else None
    score_checkpoints(run_dir, rep.later_sets(), cfg, log, sampled)
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
    pool_seed_base: int | None = None,
    summaries: Path | None = None,
    offline_large_ratio: int | None = None,
) -> Path:
    """Run every arm x repeat into `out` (skipping runs already complete there, resuming runs cut short from their
    last checkpoint); returns the folder. `only` names the runs of the plan to run now (one repeat per machine or
    per sitting); the others are left as they are, and the manifest lists them as not run. With
    `heldout`, held-out sets are made once (or read back, hash-checked), every run is evaluated on H1 in-run and
    each of its checkpoints on the other sets after it: the experiment's sets, made before any run, or with
    `pool_seed_base` each repeat's own pool (seeds.random.seed = pool_seed_base + k) and sets, made before its
    first run (rods_lab/experiments/replicates.py). With `summaries`, each finished run's summary is written there and a run
    whose summary is there and valid is skipped (rods_lab/experiments/summaries.py). `offline_large_ratio`: offline_large's M
    is that many times rods' M of the same repeat (default: OFFLINE_LARGE_PER_SEED variants per seed)."""
    opts = RunOptions(pool_seed_base, summaries, offline_large_ratio)
    sets = dict(sets or {})
    out = Path(out or EXPERIMENTS.parent / "paper" / time.strftime("%Y%m%d-%H%M%S"))
    plans = plan_arms(Path(config), out, arms, repeats, budget, evals, sets, heldout, pool_seed_base)
    steps, every, per_step = plan_steps(plans[0][3], budget, evals)
    n_evals = len(range(every, steps + 1, every)) + (steps % every != 0)
    eval_tasks = plans[0][3].eval.limit or 0
    unknown = sorted(set(only or ()) - {p[0] for p in plans})
    if unknown:
        raise ValueError(f"--only: {', '.join(unknown)} not in this plan (its runs: {', '.join(p[0] for p in plans)})")
    kept = {p[0]: s for p in plans if summaries and (s := run_summaries.read_valid(summaries, p[0], p[3], out))}
    unfinished = [p for p in plans if p[0] not in kept and not is_complete(out / "runs" / p[0], steps)]
    todo = [p for p in unfinished if not only or p[0] in only]
    manifest = out / "manifest.json"
    before = json.loads(manifest.read_text()) if manifest.exists() else {"settings": {}, "runs": []}
    done = {m["run"]: m for m in before["runs"]} | {r: summary_meta(s, done_before(before, r)) for r, s in kept.items()}
    est, how = estimate_todo(before["runs"], todo, estimate_s(arms, repeats, steps, n_evals, eval_tasks) / len(plans))
    log(
        f"paper: {len(plans)} runs ({len(plans) - len(unfinished)} already complete"
        f"{f', {len(kept)} of them by their summaries' if kept else ''}"
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
        "pool_seed_base": pool_seed_base,
        "offline_large_ratio": offline_large_ratio,
    }
    recorded = dict(before["settings"])
    if recorded.get("heldout") and heldout is not None and same_spec(recorded["heldout"], heldout):
        recorded["heldout"] = settings["heldout"]  # a spec field added since it was recorded, at its default
    changed = [k for k in RESTART_SAME if recorded and recorded.get(k) != settings.get(k)]
    if changed:
        raise ValueError(f"{out}: holds runs of another design ({', '.join(changed)} differ); give a new --out")
    build_before_runs(plans[0][3], out / "configs" / "model-build.yaml", log)
    model = Path(plans[0][3].model.path)
    settings |= {"model": str(model), "model_sha256": weights_sha256(model), "cpu_kernels": cpu_kernels()}
    check_repeatable(before["settings"], settings, out)
    for summary in kept.values():  # a summary from another session: its runs must repeat under these floats too
        check_repeatable(summary, settings, Path(summaries) / f"{summary['run']}.json")
    reps = Replicates(pool_reference(plans), heldout, out, pool_seed_base, log)
    if heldout is not None and pool_seed_base is None:
        reps.get(0)  # the experiment's one set of held-out sets, made before any run
    settings |= reps.settings(repeats)
    # with `only`, another process may be scoring the other runs of this folder (design.md, Amendment 4)
    mine = [p for p in plans if p[0] not in kept and (not only or p[0] in only)]
    finish_cut_short(mine, reps, steps, out, summaries, settings, log)
    # recorded before any run starts, so a run cut short resumes only under the kernels and model it began with
    write_manifest(manifest, settings, [done[p[0]] for p in plans if p[0] in done])
    t0, spent = time.perf_counter(), []
    for i, (run_id, arm, k, cfg) in enumerate(todo):
        done[run_id] = one_run(run_id, arm, k, cfg, reps.get(k), out, timeout_s, opts, log)
        if summaries and is_complete(out / "runs" / run_id, steps):
            write_summary(out, run_id, cfg, done[run_id], reps.get(k), summaries, settings | reps.settings(repeats))
        spent.append(done[run_id]["wall_s"] + done[run_id].get("score_s", 0.0))
        left = (len(todo) - i - 1) * sum(spent) / len(spent)
        log(f"  {i + 1}/{len(todo)} done; about {left / 60:.0f} min left at the measured pace")
        settings |= reps.settings(repeats)
        write_manifest(manifest, settings, [done[p[0]] for p in plans if p[0] in done])
    settings["wall_s"] = round(time.perf_counter() - t0, 1)
    runs = [done.get(p[0]) or {"run": p[0], "arm": p[1], "status": _status(out / "runs" / p[0], steps)} for p in plans]
    write_manifest(manifest, settings, runs)
    return out


def pool_reference(plans: list[tuple]) -> RunConfig:
    """A planned config whose seeds are the pool's: not an offline arm's (those train on a file made from it)."""
    ref = next((p[3] for p in plans if p[1] not in OFFLINE_ARMS), None)
    if ref is None:
        raise ValueError("an offline arm trains on variants of another arm's pool: add rods (before it) to --arms")
    return ref


def one_run(
    run_id: str,
    arm: str,
    k: int,
    cfg: RunConfig,
    rep: Replicate,
    out: Path,
    timeout_s: float | None,
    opts: RunOptions,
    log=print,
) -> dict:
    """Train one run (an offline arm's seeds file written first) and score its checkpoints; its manifest entry."""
    # a run cut short resumes from its last checkpoint (the figures of the run uninterrupted: tests/
    # test_resume_exact.py); one cut before its first checkpoint starts again from nothing
    ckpt = last_checkpoint(out / "runs" / run_id)
    if ckpt is None:
        shutil.rmtree(out / "runs" / run_id, ignore_errors=True)
    extra = prepare_offline(out, arm, k, cfg, rep, opts, log) if arm in OFFLINE_ARMS else {}
    load = os.getloadavg()[0]  # what else ran as this run started (the report says whether it was quiet)
    # "method" names the arm, so `rods bench curriculum-pool` numbers an ablation's repeats apart from rods'
    meta = {
        **launch(run_id, cfg, out, timeout_s, log, resume=ckpt is not None),
        "resumed_from": checkpoint_step(ckpt) if ckpt else None,
        "method": arm,
        "arm": arm,
        "load_1min_at_start": round(load, 2),
    }
    # only a run that finished is scored: a failed or cut-short one is scored whole once it has (finish_cut_short)
    if rep.folder is not None and meta["status"] == "finished":
        meta["score_s"] = score_run(out / "runs" / run_id, rep, cfg, log)
    return {**meta, **extra}


def finish_cut_short(
    plans: list[tuple], reps: Replicates, steps: int, out: Path, summaries: Path | None, settings: dict, log=print
) -> None:
    """Complete what a bench cut short left of runs that finished training: the scores of their checkpoints and,
    with `summaries`, their summaries (a complete run without a valid one gets it now)."""
    for run_id, arm, k, cfg in plans:
        run_dir = out / "runs" / run_id
        if not is_complete(run_dir, steps):
            continue
        if reps.spec is not None and not (run_dir / SCORES).is_file():
            score_run(run_dir, reps.get(k), cfg, log)
        if summaries:
            meta = {"run": run_id, "arm": arm, "status": "finished"}
            write_summary(out, run_id, cfg, meta, reps.get(k), summaries, settings)


def write_summary(
    out: Path, run_id: str, cfg: RunConfig, meta: dict, rep: Replicate, summaries: Path, settings: dict
) -> None:
    """A finished run's summary into `summaries` (rods_lab/experiments/summaries.py)."""
    if meta.get("status") == "finished":
        summary = run_summaries.summarize(out / "runs" / run_id, cfg, meta, rep, out, settings)
        run_summaries.write(summaries, summary)


def done_before(before: dict, run_id: str) -> dict:
    return next((m for m in before["runs"] if m["run"] == run_id), {})


def summary_meta(summary: dict, recorded: dict) -> dict:
    """A run skipped by its summary, as the manifest lists it: what this folder recorded of it, else the
    summary's own figures."""
    keep = ("wall_s", "score_s", "load_1min_at_start", "resumed_from", "offline", "seed")
    mine = {k: summary.get(k) for k in keep if summary.get(k) is not None}
    arm = summary["arm"]
    return {"run": summary["run"], "arm": arm, "method": arm, "status": "finished", **mine, **recorded,
            "summary": True}  # fmt: skip


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
    torch's CPU kernels (rods_lab/experiments/machine.py). A folder that recorded neither (older code) is not checked."""
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


def prepare_offline(out: Path, arm: str, k: int, cfg: RunConfig, rep: Replicate, opts: RunOptions, log=print) -> dict:
    """Write the seeds file of an offline arm's run k (pool + M variants); its stats go to the manifest. M comes
    from rods' run of the repeat: its folder, or where that is gone, its summary."""
    rods_dir = out / "runs" / f"rods_r{k}"
    rods_summary = run_summaries.path(opts.summaries, f"rods_r{k}") if opts.summaries else None
    rods_m = None
    if not rods_dir.is_dir() and rods_summary is not None and rods_summary.is_file():
        rods_m = json.loads(rods_summary.read_text())["pool_sizes"]["variants_played"]
    m = offline_m(arm, rods_dir, rep.pool, opts.offline_large_ratio, rods_m)
    keys = {t.content_key(): name for name, tasks in rep.sets.items() for t in tasks}
    variants, stats = offline_variants(rep.pool, m, cfg.synthesis, cfg.seed, keys, cfg.benchmark)
    write_offline_seeds(offline_file(out, arm, k), rep.pool, variants, stats)
    log(
        f"  {arm}_r{k}: {stats['made']} of M = {m} variants synthesized up front ({stats['heldout_collisions_excluded']} held-out collisions left out)"
    )
    return {"offline": stats}

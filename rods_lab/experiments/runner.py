"""The sample-efficiency experiment: every method on the same model, seeds and trajectory budget.

`rods bench curriculum --budget N --methods rods,static,... --repeats K` writes one folder,
bench/results/curriculum/<timestamp>/, holding its own workspace (control database), the run folders
(runs/<method>-r<k>/), one config and one log per run, and the report (summary.md, summary.json,
figures). Each run is a `rods train` process started by the lab's launcher (rods_lab.launch; a crash or
out-of-memory kills one run, not the experiment; runs go one after another because they share the cores);
the model is built once before them (rods_lab.model_build). Repeat k of every method uses seed base+k for
torch, the buffer and synthesis, so methods face the same held-out variants and the same initial draws;
max_steps = budget // (tasks_per_step x num_generations), so the budget is met exactly when it is a
multiple of the batch. Aggregation is rods_lab.results (the Compare page reads the same tables).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

import yaml

from rods_core.config import METHODS, ConfigRenamedWarning, RunConfig, dump_config, load_config
from rods_core.config.synth import renamed_sections
from rods_lab.experiments.curriculum_report import write_report
from rods_lab.experiments.machine import describe
from rods_lab.launch import train_to_end
from rods_lab.model_build import build_before_runs
from rods_lab.results import EXPERIMENTS as RESULTS


def parse_methods(text: str) -> list[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"--methods: unknown {bad or 'empty list'}; choose from {', '.join(METHODS)}")
    return list(dict.fromkeys(methods))


def plan_steps(cfg: RunConfig, budget: int, evals: int) -> tuple[int, int, int]:
    """(max_steps, eval.every, trajectories per step) for a trajectory budget and a number of evaluations."""
    per_step = cfg.grpo.tasks_per_step * cfg.grpo.num_generations * cfg.compute.processes  # tasks are per process
    if budget < per_step:
        raise ValueError(
            f"--budget {budget} is below one step ({per_step} trajectories: "
            f"{cfg.grpo.tasks_per_step} tasks x {cfg.grpo.num_generations} rollouts x {cfg.compute.processes} processes)"
        )
    steps = budget // per_step
    every = max(1, math.ceil(steps / max(evals, 1)))
    return steps, every, per_step


def run_configs(
    base: Path, out: Path, methods: list[str], repeats: int, budget: int, evals: int, sets: dict
) -> list[tuple[str, str, int, RunConfig]]:
    """(run id, method, repeat, config) for every run of the experiment, all validated before any starts."""
    probe = load_config(base, sets)
    steps, every, _ = plan_steps(probe, budget, evals)
    plans = []
    for k in range(repeats):
        seed = probe.seed + k
        for method in methods:
            overrides = {
                "synthesis.deterministic": True,  # an experiment's runs repeat exactly, whatever the load
                **sets,
                "name": method,
                "method": method,
                "seed": seed,
                "buffer.seed": seed,
                "synthesis.seed": seed,
                "output_dir": str(out / "runs"),
                "workspace": str(out / "workspace"),
                "grpo.max_steps": steps,
                "grpo.save_steps": steps,
                "eval.every": every,
            }
            plans.append((f"{method}_r{k}", method, k, load_config(base, overrides)))  # run ids: rods_core.ids
    return plans


def launch(run_id: str, cfg: RunConfig, out: Path, timeout_s: float | None, log=print, resume: bool = False) -> dict:
    """One run through the lab's launcher (rods_lab.launch.train_to_end; `resume`: of the run folder there, from
    its last checkpoint); its output goes to logs/<run id>.log, appended to on a resume."""
    cfg_file = out / "configs" / f"{run_id}.yaml"
    cfg_file.parent.mkdir(parents=True, exist_ok=True)
    cfg_file.write_text(dump_config(cfg))
    log_file = out / "logs" / f"{run_id}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with log_file.open("a" if resume else "w") as fh:
        rc = train_to_end(cfg_file, run_id, fh, resume=resume, timeout_s=timeout_s)
    wall = time.perf_counter() - t0
    tail = log_file.read_text(errors="replace").splitlines()[-15:]
    status = "finished" if rc == 0 else f"failed ({rc})"
    log(f"  {run_id}: {status} in {wall:.0f} s")
    return {
        "run": run_id,
        "method": cfg.method,
        "seed": cfg.seed,
        "status": status,
        "wall_s": round(wall, 1),
        "run_dir": str(Path(cfg.output_dir) / run_id),
        "log": str(log_file),
        "log_tail": tail if rc != 0 else [],
    }


def run(
    budget: int,
    methods: list[str],
    repeats: int = 1,
    config: Path = Path("configs/demo-cpu.yaml"),
    evals: int = 4,
    sets: dict | None = None,
    out: Path | None = None,
    timeout_s: float | None = None,
    log=print,
) -> Path:
    """Run the experiment and write its report; returns the output folder."""

    sets = dict(sets or {})
    out = Path(out or RESULTS / time.strftime("%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    plans = run_configs(Path(config), out, methods, repeats, budget, evals, sets)
    build_before_runs(plans[0][3], out / "configs" / "model-build.yaml", log)
    settings = design_settings(plans[0][3], budget, methods, repeats, config, evals, sets)
    steps, per_step = settings["max_steps"], settings["trajectories_per_step"]
    log(f"curriculum: {len(plans)} runs x {steps} steps ({steps * per_step} trajectories each) into {out}")
    runs = []
    t0 = time.perf_counter()
    for run_id, _method, _k, cfg in plans:
        runs.append(launch(run_id, cfg, out, timeout_s, log))
        (out / "manifest.json").write_text(json.dumps({"settings": settings, "runs": runs}, indent=2))
    settings["wall_s"] = round(time.perf_counter() - t0, 1)
    (out / "manifest.json").write_text(json.dumps({"settings": settings, "runs": runs}, indent=2))
    write_report(out, settings, runs, log)
    return out


def design_settings(
    cfg: RunConfig, budget: int, methods: list[str], repeats: int, config: Path, evals: int, sets: dict
) -> dict:
    """An experiment's design as its manifest records it (what the report and a restart read back)."""

    steps, every, per_step = plan_steps(cfg, budget, evals)
    return {
        "budget": budget,
        "methods": methods,
        "repeats": repeats,
        "config": str(config),
        "sets": sets,
        "max_steps": steps,
        "eval_every": every,
        "trajectories_per_step": per_step,
        "trajectories_per_run": steps * per_step,
        "machine": describe(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def read_manifest(folder: Path) -> dict:
    """An experiment folder's manifest ({"settings", "runs"}); ValueError when the folder has none."""
    manifest = Path(folder) / "manifest.json"
    if not manifest.is_file():
        raise ValueError(f"{folder}: no manifest.json; not a `rods bench curriculum` folder")
    return json.loads(manifest.read_text())


def report_again(out: Path, log=print) -> Path:
    """Rewrite a finished experiment's report from its manifest (e.g. after a newer `rods bench systems`)."""

    data = read_manifest(out)
    write_report(Path(out), data["settings"], data["runs"], log)
    return Path(out)


# The settings that make two experiments one design (seeds aside): their runs may be pooled as repeats.
_DESIGN = ("config", "budget", "max_steps", "eval_every", "trajectories_per_step")
# Run-config fields that differ between the runs of one design by construction (those run_configs sets per run).
_PER_RUN = ("name", "method", "seed", "buffer.seed", "synthesis.seed", "output_dir", "workspace")


def parse_source(text: str | Path) -> tuple[Path, list[str] | None]:
    """An experiment folder to pool, optionally with the methods to take from it: `DIR` or `DIR:rods,static`."""
    text = str(text)
    folder, sep, tail = text.rpartition(":")
    if sep and tail and all(m in METHODS for m in tail.split(",")):
        return Path(folder), parse_methods(tail)
    return Path(text), None


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _run_settings(cfg: dict) -> dict:
    """A run's resolved config, flattened, without the fields that differ between runs by construction; a run
    written before `synth:` was renamed `synthesis:` reads as one written after, so the two may pool."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigRenamedWarning)  # a run's own record, not a file to fix
        cfg = renamed_sections(cfg)
    return {k: v for k, v in _flat(cfg).items() if k not in _PER_RUN}


def pool_runs(sources: list, out: Path) -> tuple[dict, list[dict]]:
    """Link the runs of finished experiments of one design into `out/runs` as one experiment's repeats
    (source order, renumbered r0..r{K-1} per method) and write its manifest; returns (settings, runs meta).

    A source is a folder, or `folder:method,...` to take only those methods' runs from it (a method's runs
    reused from an earlier experiment while the others were rerun under changed settings: the report lists
    every setting that differs between methods). Refused (ValueError): a folder without a manifest or
    without a method asked of it; designs that differ (config, budget, steps, evaluations, overrides other
    than `seed`); runs of one method with different settings; a seed used twice by one method (not an
    independent repeat); methods with different seeds (repeat k of every method shares seed base + k). Run
    `rods bench curriculum ... --set seed=N` to add repeats to a design."""
    picks = [parse_source(s) for s in sources]
    if len(picks) < 2:
        raise ValueError("give two or more experiment folders to pool")
    manifests = [read_manifest(folder) for folder, _ in picks]
    first = manifests[0]["settings"]

    def design(settings: dict) -> dict:
        sets = {k: v for k, v in (settings.get("sets") or {}).items() if k != "seed"}
        return {**{k: settings.get(k) for k in _DESIGN}, "sets": sets}

    theirs = design(first)
    for (folder, _), m in zip(picks[1:], manifests[1:], strict=True):
        mine = design(m["settings"])
        diff = [k for k in mine if mine[k] != theirs[k]]
        if diff:
            raise ValueError(f"{folder}: another design than {picks[0][0]} ({', '.join(diff)} differ); not pooled")
    out = Path(out)
    if (out / "runs").exists():
        raise ValueError(f"{out}: already holds runs; give a new folder")
    seeds: dict[str, dict[int, Path]] = {}  # method -> seed -> folder
    settings_of: dict[str, tuple[str, dict]] = {}  # method -> (first run, its settings)
    links, runs_meta = [], []
    for (folder, only), m in zip(picks, manifests, strict=True):
        missing = sorted(set(only or []) - set(m["settings"]["methods"]))
        if missing:
            raise ValueError(f"{folder}: has no runs of {', '.join(missing)} (methods {m['settings']['methods']})")
        for meta in m["runs"]:
            method = meta["method"]
            if only is not None and method not in only:
                continue
            src = (Path(folder) / "runs" / meta["run"]).resolve()
            cfg = yaml.safe_load((src / "config.yaml").read_text()) or {}
            mine, seed = _run_settings(cfg), int(cfg.get("seed", 0))
            if seed in seeds.setdefault(method, {}):
                raise ValueError(
                    f"{folder}: {meta['run']} repeats seed {seed} of {seeds[method][seed]}: not an independent "
                    "repeat; add repeats with `--set seed=N` (N past the seeds used)"
                )
            first_run, ref = settings_of.setdefault(method, (f"{folder}/runs/{meta['run']}", mine))
            diff = sorted(k for k in mine.keys() | ref.keys() if mine.get(k) != ref.get(k))
            if diff:
                raise ValueError(
                    f"{folder}: {meta['run']} has other settings than {first_run} ({', '.join(diff[:5])}); not pooled"
                )
            seeds[method][seed] = Path(folder)
            name = f"{method}_r{len(seeds[method]) - 1}"
            links.append((out / "runs" / name, src))
            runs_meta.append({**meta, "run": name, "pooled_from": f"{folder}/runs/{meta['run']}"})
    if not seeds:
        raise ValueError("no runs to pool: the folders (and methods asked of them) hold none")
    if len({frozenset(s) for s in seeds.values()}) > 1:
        got = "; ".join(f"{m} {sorted(s)}" for m, s in seeds.items())
        raise ValueError(f"the methods were run with different seeds ({got}): repeat k of every method must share one")
    (out / "runs").mkdir(parents=True)
    for link, src in links:
        link.symlink_to(src, target_is_directory=True)
    settings = {
        **first,
        "methods": list(seeds),
        "sets": theirs["sets"],
        "repeats": len(next(iter(seeds.values()))),
        "wall_s": round(sum(meta.get("wall_s") or 0 for meta in runs_meta), 1),  # the pooled runs' own
        "pooled_from": [str(s) for s in sources],
        "differs_by_method": differing_settings({m: ref for m, (_, ref) in settings_of.items()}),
    }
    (out / "manifest.json").write_text(json.dumps({"settings": settings, "runs": runs_meta}, indent=2))
    return settings, runs_meta


def differing_settings(by_method: dict[str, dict]) -> dict[str, dict[str, object]]:
    """setting -> {method: value} for every run setting that is not the same for all methods (a pooled
    experiment may reuse one method's runs from before a change the others were rerun under)."""
    keys = sorted(set().union(*by_method.values())) if by_method else []
    return {
        k: {m: s.get(k) for m, s in by_method.items()}
        for k in keys
        if len({json.dumps(s.get(k), sort_keys=True) for s in by_method.values()}) > 1
    }


def pool(sources: list, out: Path | None = None, log=print) -> Path:
    """Pool finished experiments of one design into one report (pool_runs, then the usual report)."""

    out = Path(out or RESULTS / f"pooled-{time.strftime('%Y%m%d-%H%M%S')}")
    settings, runs_meta = pool_runs(list(sources), out)
    log(f"pooled {len(runs_meta)} runs ({settings['repeats']} repeats a method) into {out}")
    write_report(out, settings, runs_meta, log)
    return out

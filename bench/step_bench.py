"""GRPO step time of `rods train` on a config: median step and its split, at 1 and at 2 processes.

Each arm is a `rods train` subprocess (the real run: curriculum, synthesis, store) of `--steps` steps; the
first `--warmup` steps are not counted. Figures come from the run's own step rows (`time/*`, measured
directly, storage/schema.py), so this benchmark reports what a run reports. Tokens/s are the model's
generated tokens per second of generation (`train/tokens / time/gen_s`) and per second of step.
Run: `python -m bench.step_bench --config configs/demo-cpu.yaml --processes 1 2`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rods_core.config import load_config
from rods_lab.experiments.machine import describe
from rods_lab.launch import train_command
from storage.reader import RunReader

ROOT = Path(__file__).resolve().parent.parent
SPLIT = ("rollout_s", "gen_s", "env_s", "reward_s", "render_s", "update_s", "optimizer_s", "curriculum_s", "store_s")


def arm(
    config: Path,
    processes: int,
    tasks: int,
    steps: int,
    warmup: int,
    sets: list[str],
    threads: int = 1,
    neighbour: bool = False,
) -> dict:
    """One `rods train` of `tasks` tasks a step in all, split over `processes` processes of `threads` torch
    threads each, optionally beside a busy single-threaded neighbour process."""
    work = Path(tempfile.mkdtemp(prefix="rods-step-"))
    run_id = f"step_p{processes}"
    overrides = [
        f"grpo.max_steps={steps}",
        f"grpo.tasks_per_step={tasks // processes}",
        f"grpo.save_steps={steps + 1}",
        "eval.every=0",
        "eval.limit=1",  # the step-0 and final evaluations are outside the timed steps; keep them short
        f"output_dir={work / 'runs'}",
        f"workspace={work / 'ws'}",
        f"compute.threads={threads}",
        *sets,
    ]
    cmd = train_command(
        config, run_id, options=["--processes", str(processes), *[a for s in overrides for a in ("--set", s)]]
    )
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if neighbour else None
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=7200)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"step bench: rods train failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    rows = RunReader(work / "runs" / run_id).step_metrics().sort_values("step")
    timed = rows[rows.step > warmup]
    med = {k: round(statistics.median(timed[f"time/{k}"]), 3) for k in ("step_s", *SPLIT)}
    tokens = timed["train/tokens"]
    return {
        "processes": processes,
        "threads": threads,
        "busy_neighbour": neighbour,
        "timed_steps": len(timed),
        "rollouts_per_step": float(timed["train/trajectories"].median()),
        "median_step_s": med.pop("step_s"),
        "median_split_s": med,
        "step_s_all": [round(v, 2) for v in timed["time/step_s"]],
        # how unevenly the processes' work fell (0 with one process), and rank 0's wait for the others
        "mean_rank_token_spread": round(float(timed["train/rank_token_spread"].mean()), 3),
        "mean_gather_s": round(float(timed["time/gather_s"].mean()), 3),
        "gen_tokens_per_gen_s": round(float(tokens.sum() / timed["time/gen_s"].sum()), 1),
        "gen_tokens_per_step_s": round(float(tokens.sum() / timed["time/step_s"].sum()), 1),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def run(
    config: Path, processes: list[int], steps: int, warmup: int, sets: list[str], threads_arms: bool = False
) -> dict:
    cfg = load_config(config)
    tasks = cfg.grpo.tasks_per_step * cfg.compute.processes  # the config's whole batch, the same in every arm
    bad = [n for n in processes if tasks % n]
    if bad:
        raise SystemExit(f"step bench: {tasks} tasks a step cannot be split over {bad} processes")
    out = {
        "machine": describe(),
        "config": str(config),
        "sets": sets,
        "tasks_per_step": tasks,
        "num_generations": cfg.grpo.num_generations,
        "arms": {},
    }
    plan = [(f"{n} process(es) x 1 thread", n, 1, False) for n in processes]
    if threads_arms:  # the thread rule on a GRPO step: 1 vs 2 threads in one process, quiet and loaded
        plan += [
            ("1 process x 2 threads", 1, 2, False),
            ("1 process x 1 thread, busy neighbour", 1, 1, True),
            ("1 process x 2 threads, busy neighbour", 1, 2, True),
        ]
    for name, n, threads, neighbour in plan:
        out["arms"][name] = arm(config, n, tasks, steps, warmup, sets, threads, neighbour)
        print(name, json.dumps(out["arms"][name]), file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo-cpu.yaml")
    p.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--set", dest="sets", action="append", default=[], help="config override key=value")
    p.add_argument("--threads-arms", action="store_true", help="also 1 vs 2 threads, quiet and beside a neighbour")
    a = p.parse_args()
    print(json.dumps(run(a.config, a.processes, a.steps, a.warmup, a.sets, a.threads_arms), indent=2))

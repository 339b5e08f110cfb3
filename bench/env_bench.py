"""Environment benchmark: tool calls per second on one core, and ms per task for replay + check.

Goals: >= 5,000 calls/s, <= 2 ms per task. Run: `rods bench env` or `python -m bench.env_bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.environment import BfclEnvironment
from rods_core.benchmarks.bfcl.seeds import load_seeds


def run(repeats: int = 3) -> dict:
    tasks = load_seeds("all")
    # Calls/s: execution of parsed ground-truth calls in already-built environments.
    best_calls = 0.0
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        for task in tasks:
            env = BfclEnvironment(task)
            for turn, calls in enumerate(task.ground_truth):
                env.start_turn(turn)
                for c in calls:
                    env.execute(c)
                    n += 1
        best_calls = max(best_calls, n / (time.perf_counter() - t0))
    # Replay + check: a model-side environment, the ground-truth side, and the per-turn checks.
    best_ms = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for task in tasks:
            score_calls(task, task.ground_truth)
        best_ms = min(best_ms, 1000 * (time.perf_counter() - t0) / len(tasks))
    by_cat = {}
    for cat in ("base", "miss_func", "miss_param", "long_context"):
        sub = [t for t in tasks if t.category == cat]
        t0 = time.perf_counter()
        for task in sub:
            score_calls(task, task.ground_truth)
        by_cat[cat] = round(1000 * (time.perf_counter() - t0) / len(sub), 3)
    return {
        "tasks": len(tasks),
        "calls_per_s_incl_env_setup": round(best_calls),
        "replay_check_ms_per_task": round(best_ms, 3),
        "replay_check_ms_per_task_by_category": by_cat,
        "goals": {"calls_per_s": 5000, "ms_per_task": 2.0},
        "cpu": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="take the best of this many passes")
    print(json.dumps(run(parser.parse_args().repeats), indent=2))

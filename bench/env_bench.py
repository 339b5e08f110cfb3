"""Environment benchmark: tool calls per second on one core, and ms per task for replay + check, through the
protocol: each task's reference path played to its score in a fresh environment (`Benchmark.environment`,
`reference_policy`, `protocols.play`), as verification and the run's episodes drive it. A task's time holds its
environment's setup, the messages' parsing, the calls' execution and the per-turn checks; the calls are the
ground truth's (`Benchmark.facts`).

Goals: >= 5,000 calls/s, <= 2 ms per task. Run: `rods bench env` or `python -m bench.env_bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rods_core.benchmarks.protocols import play
from rods_core.benchmarks.registry import make_benchmark

BENCHMARK = "bfcl_multi_turn"


def _replay_s(bench, tasks: list, workdir: Path) -> float:
    """Seconds to play every task's reference path to its score; raises if one falls short of full marks."""
    t0 = time.perf_counter()
    for task in tasks:
        score = play(bench.environment(task, workdir), bench.reference_policy(task))
        if not score.accuracy:
            raise RuntimeError(f"env bench: {task.id}'s reference path scored {score.progress:.2f}")
    return time.perf_counter() - t0


def run(repeats: int = 3) -> dict:
    bench = make_benchmark(BENCHMARK)
    tasks = bench.seeds("all")
    calls = sum(bench.facts(t).calls for t in tasks)
    groups = sorted({bench.group_of(t) for t in tasks})
    with tempfile.TemporaryDirectory(prefix="env-bench-") as tmp:
        best_s = min(_replay_s(bench, tasks, Path(tmp)) for _ in range(repeats))
        by_group = {}
        for group in groups:
            sub = [t for t in tasks if bench.group_of(t) == group]
            by_group[group] = round(1000 * _replay_s(bench, sub, Path(tmp)) / len(sub), 3)
    return {
        "tasks": len(tasks),
        "calls": calls,
        "episode_calls_per_s": round(calls / best_s),
        "episode_ms_per_task": round(1000 * best_s / len(tasks), 3),
        "episode_ms_per_task_by_group": by_group,
        "goals": {"calls_per_s": 5000, "ms_per_task": 2.0},
        "cpu": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="take the best of this many passes")
    print(json.dumps(run(parser.parse_args().repeats), indent=2))

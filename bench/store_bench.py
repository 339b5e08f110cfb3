"""Store benchmark: write 1M task_stats rows the way a run does, then time the app's queries; and the
control store under contention.

Prints the store's write time per step (append + flush + the compactions it triggers, + pools.json)
as a share of a step (goal <= 2% of a 30 s step), and p50/p95 latency of the app's queries over the
finished log (goal p95 <= 300 ms). Run: `rods bench store` or `python -m bench.store_bench`.
`python -m bench.store_bench contention [URL]` runs bench.control_bench: 8 processes adding decisions while
one lists them and one claims them, and prints the decisions per second the control store took (SQLite in
a temporary folder, plus PostgreSQL when a URL is given or $RODS_TEST_POSTGRES_URL is set).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

from bench.control_bench import contention_report
from rods_core.benchmarks.registry import make_benchmark
from storage.events import EventLog, split_live
from storage.pools import write_pools_snapshot
from storage.reader import RunReader
from storage.schema import REGIONS


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)]


def _step_events(step: int, tasks_per_step: int, n_tasks: int, rng: random.Random) -> dict[str, list[dict]]:
    """One step's events: per-task statistics for a batch, the step row, a few moves and changes."""
    ids = rng.sample(range(n_tasks), tasks_per_step)
    stats = []
    for i in ids:
        mean = rng.random()
        stats.append(
            {
                "step": step,
                "task_id": f"task_{i}",
                "n": 16,
                "mean": mean,
                "var": mean * (1 - mean) / 2,
                "smoothed_mean": mean,
                "smoothed_var": 0.1,
                "region": REGIONS[i % 3],
            }
        )
    return {
        "task_stats": stats,
        "region_change": [{"step": step, "task_id": f"task_{i}", "old": "hard", "new": "boundary"} for i in ids[:3]],
        "buffer": [
            {"step": step, "task_id": f"task_{i}", "from_pool": "staged", "to_pool": "active", "reason": "probe passed"}
            for i in ids[:2]
        ],
        # Half the variants descend from an earlier variant, so lineage queries walk real chains.
        "variant": [
            {
                "step": step,
                "variant_id": f"v{step}",
                "accepted": step % 3 > 0,
                "parent_id": f"v{step - rng.randint(1, 5)}" if step > 5 and rng.random() < 0.5 else f"task_{ids[0]}",
                "stages": {"plan": "ok", "execute": "ok", "critique": "ok"},
                "reason": None,
            }
        ],
        "step": [{"step": step, "wall_s": step * 30.0, "reward/mean": 0.5, "reward/std": 0.3, "train/loss": 0.1}],
    }


def write_phase(out: Path, rows: int, tasks_per_step: int, pool_tasks: list) -> dict:
    rng = random.Random(0)
    n_steps = math.ceil(rows / tasks_per_step)
    n_tasks = max(tasks_per_step * 2, 1000)
    log, per_step, snapshot_ms = EventLog(out), [], []
    for step in range(n_steps):
        events = _step_events(step, tasks_per_step, n_tasks, rng)
        t0 = time.perf_counter()
        for kind, evs in events.items():
            log.append(kind, evs)
        log.flush()
        per_step.append(time.perf_counter() - t0)
        if step % 50 == 0:  # the snapshot is written every step by a run; sampled here to save time
            t0 = time.perf_counter()
            write_pools_snapshot(out, {"active": pool_tasks}, step=step)
            snapshot_ms.append((time.perf_counter() - t0) * 1000)
    log.close()
    return {"steps": n_steps, "per_step": per_step, "snapshot_ms": snapshot_ms}


def query_phase(out: Path, repeats: int) -> dict:
    reader = RunReader(out)
    queries = {
        "latest_step": reader.latest_step,
        "step_metrics": reader.step_metrics,
        "task_stats_at_latest": reader.task_stats_at,
        "latest_task_stats": reader.latest_task_stats,
        "region_counts": reader.region_counts,
        "variance_by_region": reader.variance_by_region,
        "variants_with_lineage": reader.variants,
        "buffer_pools": reader.buffer_pools,
        "eval_curve": reader.eval_curve,
    }
    result = {}
    for name, fn in queries.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        result[name] = {"p50_ms": round(_pct(times, 0.5), 1), "p95_ms": round(_pct(times, 0.95), 1)}
    return result


def run(
    rows: int = 1_000_000,
    tasks_per_step: int = 512,
    step_s: float = 30.0,
    out: Path = Path("bench/results/store"),
    repeats: int = 20,
) -> dict:
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    w = write_phase(out, rows, tasks_per_step, make_benchmark("bfcl_multi_turn").seeds("train"))
    per = w["per_step"]
    mean_s = sum(per) / len(per) + sum(w["snapshot_ms"]) / len(w["snapshot_ms"]) / 1000
    files = {k: len(split_live(out / "events" / k)[0]) for k in ("task_stats", "step", "buffer", "variant")}
    return {
        "rows": {"task_stats": RunReader(out).counts()["task_stats"], "steps": w["steps"]},
        "write_per_step_ms": {
            "mean": round(sum(per) / len(per) * 1000, 2),
            "p95": round(_pct(per, 0.95) * 1000, 2),
            "max": round(max(per) * 1000, 1),
        },
        "pools_snapshot_ms_400_tasks": round(sum(w["snapshot_ms"]) / len(w["snapshot_ms"]), 1),
        "write_share_of_step": {"step_s": step_s, "mean_pct": round(100 * mean_s / step_s, 3), "goal_pct": 2.0},
        "live_files": files,
        "queries": query_phase(out, repeats),
        "query_goal_p95_ms": 300,
        "disk_mb": round(sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6, 1),
    }


def main(argv: list[str]) -> dict:
    """The store figures (`--rows`, `--tasks-per-step`, `--step-s`, `--out`), or `contention [URL]`'s."""
    if argv[:1] == ["contention"]:
        return contention_report(*argv[1:2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="task_stats rows to write")
    parser.add_argument("--tasks-per-step", type=int, default=512, help="rows per step")
    parser.add_argument("--step-s", type=float, default=30.0, help="step time the write share is measured against")
    parser.add_argument("--out", type=Path, default=Path("bench/results/store"), help="scratch run folder")
    a = parser.parse_args(argv)
    return run(rows=a.rows, tasks_per_step=a.tasks_per_step, step_s=a.step_s, out=a.out)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))

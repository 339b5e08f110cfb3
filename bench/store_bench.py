"""Store benchmark: write 1M task_stats rows the way a run does, then time the app's queries; and the
control store under contention.

Prints the store's write time per step (append + flush + the compactions it triggers, + pools.json)
as a share of a step (goal <= 2% of a 30 s step), and p50/p95 latency of the app's queries over the
finished log (goal p95 <= 300 ms). Run: `rods bench store` or `python -m bench.store_bench`.
`python -m bench.store_bench contention [URL]` runs `contention`: 8 processes adding decisions while one
lists them and one claims them, and prints the decisions per second the control store took (SQLite in
a temporary folder, plus PostgreSQL when a URL is given or $RODS_TEST_POSTGRES_URL is set).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

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
    from rods_core.seeds import load_seeds

    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    w = write_phase(out, rows, tasks_per_step, load_seeds("train"))
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


# ----- the control store under contention ------------------------------------------------------------
def _add_decisions(target: str, run_id: str, n: int, go, out) -> None:
    """A writer: n decisions as fast as it can once `go` is set; reports the ids it was told and its span."""
    from storage.control import ControlDB

    try:
        db = ControlDB(target)
        go.wait()
        t0 = time.time()
        ids = [
            db.add_decision(run_id, f"task_{os.getpid()}_{i}", "approve", author=f"w{os.getpid()}").id for i in range(n)
        ]
        out.put(("writer", {"ids": ids, "start": t0, "end": time.time()}))
    except Exception as e:  # noqa: BLE001 - reported to the caller, which fails on any
        out.put(("error", f"writer: {type(e).__name__}: {e}"))


def _list_decisions(target: str, run_id: str, go, stop, out) -> None:
    """The app: lists the run's decisions and the runs until `stop`."""
    from storage.control import ControlDB

    try:
        db = ControlDB(target)
        go.wait()
        reads = 0
        while not stop.is_set():
            db.decisions(run_id)
            db.list_runs()
            reads += 1
        out.put(("reader", {"reads": reads}))
    except Exception as e:  # noqa: BLE001
        out.put(("error", f"reader: {type(e).__name__}: {e}"))


def _claim_decisions(target: str, run_id: str, go, stop, out) -> None:
    """A trainer: claims pending decisions and marks each applied until `stop`, then one last round."""
    from storage.control import ControlDB

    try:
        db = ControlDB(target)
        go.wait()
        claimed, double = [], []
        while True:
            last = stop.is_set()
            for d in db.claim_decisions(run_id):
                claimed.append(d.id)
                if not db.mark_decision(d.id, "applied", "claimed under contention", step=1):
                    double.append(d.id)
            if last:
                break
        out.put(("claimer", {"claimed": claimed, "double_marked": double}))
    except Exception as e:  # noqa: BLE001
        out.put(("error", f"claimer: {type(e).__name__}: {e}"))


def contention(target: str, writers: int = 8, per_writer: int = 25, run_id: str = "contended") -> dict:
    """`writers` processes each add `per_writer` decisions at once while one process lists them and one
    claims and marks them. Returns what each was told (ids returned, ids claimed, errors) and the rate."""
    ctx = multiprocessing.get_context("spawn")
    go, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_add_decisions, args=(target, run_id, per_writer, go, out)) for _ in range(writers)]
    procs += [ctx.Process(target=f, args=(target, run_id, go, stop, out)) for f in (_list_decisions, _claim_decisions)]
    for p in procs:
        p.start()
    go.set()  # the store was opened by each process before: what is timed is the writes
    results: dict[str, list] = {"writer": [], "reader": [], "claimer": [], "error": []}
    while len(results["writer"]) + len(results["error"]) < writers:
        role, value = out.get(timeout=300)
        results[role].append(value)
    stop.set()
    while sum(len(v) for v in results.values()) < len(procs):
        role, value = out.get(timeout=300)
        results[role].append(value)
    for p in procs:
        p.join(timeout=60)
    spans = results["writer"]
    ids = [i for w in spans for i in w["ids"]]
    seconds = max(w["end"] for w in spans) - min(w["start"] for w in spans) if spans else float("nan")
    claimer = results["claimer"][0] if results["claimer"] else {"claimed": [], "double_marked": []}
    return {
        "ids": ids,
        "claimed": claimer["claimed"],
        "double_marked": claimer["double_marked"],
        "reads": sum(r["reads"] for r in results["reader"]),
        "errors": results["error"],
        "exit_codes": [p.exitcode for p in procs],
        "decisions_per_s": round(len(ids) / seconds, 1) if seconds > 0 else None,
    }


def contention_report(url: str | None = None, writers: int = 8, per_writer: int = 50) -> dict:
    """Decisions per second at `writers` writers, for SQLite (a temporary file) and PostgreSQL if given."""
    targets = {}
    with tempfile.TemporaryDirectory() as tmp:
        targets["sqlite"] = str(Path(tmp) / "control.sqlite")
        url = url or os.environ.get("RODS_TEST_POSTGRES_URL")
        if url:
            targets["postgresql"] = url
        report = {}
        for name, target in targets.items():
            r = contention(target, writers, per_writer, run_id=f"bench_{os.getpid()}_{time.time_ns()}")
            report[name] = {
                "writers": writers,
                "decisions": len(r["ids"]),
                "unique_ids": len(set(r["ids"])),
                "errors": r["errors"],
                "decisions_per_s": r["decisions_per_s"],
            }
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["contention"]:
        print(json.dumps(contention_report(*sys.argv[2:3]), indent=2))
    else:
        print(json.dumps(run(), indent=2))

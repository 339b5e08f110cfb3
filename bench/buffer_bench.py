"""Detector + replay-buffer bookkeeping per training step: milliseconds per step, and (with --run) as a
share of that run's measured median step (goal <= 0.5%).

Scenarios: the paper's batch (32 tasks x 16 rollouts) over the 400 train seeds with P_max 50; the same
batch over an 800-task active pool (400 seeds + 400 variants); and a whole-pool matrix (800 x 16).
Rewards come from a simulated policy (4 checked turns, each passed with a per-task skill that grows with
practice) so tasks really move between regions; only buffer calls are timed (sample, observe,
boundary_tasks, offer), not reward simulation or variant construction. No step time is assumed: the
share is reported only against the `time/step_s` a real run logged.
Run: `python -m bench.buffer_bench [--run runs/<id>] [--steps N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

from rods_core.benchmarks.registry import make_benchmark
from rods_core.boundary import BoundaryDetector
from rods_core.buffer import ReplayBuffer
from rods_core.config import BufferConfig
from rods_core.ids import variant_id
from storage.reader import RunReader

GOAL_SHARE = 0.005


class SimulatedPolicy:
    """Progress rewards over 4 turns; a task's skill rises a little each time it is trained on."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.skill: dict[str, float] = {}

    def matrix(self, task_ids, g: int = 16) -> dict[str, list[float]]:
        out = {}
        for tid in task_ids:
            p = self.skill.setdefault(tid, self.rng.random())
            out[tid] = [sum(self.rng.random() < p for _ in range(4)) / 4 for _ in range(g)]
            self.skill[tid] = min(1.0, p + 0.02)
        return out


def variant_stock(seeds: list, n: int) -> list:
    """Distinct variants of the seeds (new ids and wording), built before any timing."""
    out = []
    for i in range(n):
        parent = seeds[i % len(seeds)]
        rec = parent.to_record()
        question = [[{**m, "content": f"{m['content']} (variant {i})"} for m in turn] for turn in rec["question"]]
        provenance = {"source": "synth", "parent_id": parent.id}
        out.append(
            type(parent).model_validate(
                {**rec, "id": variant_id(parent.id, f"{i:08x}"), "question": question, "provenance": provenance}
            )
        )
    return out


def timed_steps(
    buf: ReplayBuffer,
    policy: SimulatedPolicy,
    stock: list,
    steps: int,
    batch: int,
    start: int,
    whole_pool: bool = False,
) -> list[float]:
    ms = []
    for step in range(start, start + steps):
        t0 = time.perf_counter()
        ids = list(dict.fromkeys(buf.sample(batch)))
        elapsed = time.perf_counter() - t0
        if whole_pool:
            ids = list(dict.fromkeys(ids + buf.pools()["active"]))
        matrix = policy.matrix(ids)
        offers = [stock.pop() for _ in range(min(4, len(stock)))]
        t0 = time.perf_counter()
        buf.detector.update(step, matrix, fresh=buf.reprobes(matrix))  # as the RODS step feeds it
        buf.observe(step, matrix)
        buf.boundary_tasks(4)
        buf.offer(offers[: buf.room()], step)
        ms.append(1000 * (elapsed + time.perf_counter() - t0))
    return ms


def measured_step_s(run_dir: str | Path) -> float:
    """The median `time/step_s` a run logged; ValueError naming the folder when it logged none."""
    reader = RunReader(run_dir)
    if not reader.exists():
        raise ValueError(f"{run_dir}: no event log (not a run folder, or no step finished yet)")
    v = reader.scalar('SELECT median("time/step_s") FROM step WHERE "time/step_s" > 0')
    if v is None:
        raise ValueError(f"{run_dir}: no step row with a positive time/step_s")
    return float(v)


def summary(ms: list[float], step_s: float | None = None) -> dict:
    """Milliseconds per step; with a measured step time, the share of it and the goal check."""
    mean = statistics.fmean(ms)
    out = {
        "ms_mean": round(mean, 3),
        "ms_p50": round(statistics.median(ms), 3),
        "ms_p95": round(sorted(ms)[int(0.95 * (len(ms) - 1))], 3),
    }
    if step_s is not None:
        out["share_of_measured_step_pct"] = round(100 * mean / 1000 / step_s, 4)
        out["meets_goal"] = mean / 1000 / step_s <= GOAL_SHARE
    return out


def scenario(seeds: list, p_max: int, steps: int, whole_pool: bool = False, step_s: float | None = None) -> dict:
    policy = SimulatedPolicy()
    stock = variant_stock(seeds, p_max + 8 * steps)
    # the fill below admits p_max variants at once: the staged backlog bound must cover them
    cfg = BufferConfig(p_max=p_max, max_probe_wait=max(4, -(-p_max // 4)))
    buf = ReplayBuffer(seeds, BoundaryDetector(), cfg)
    if p_max > 50:  # fill the pool to 800 active before timing: variants offered and probed as boundary
        fill = [stock.pop() for _ in range(p_max)]
        buf.offer(fill, 0)
        matrix = {t.id: [1.0] * 8 + [0.0] * 8 for t in fill}
        buf.detector.update(0, matrix, fresh=buf.reprobes(matrix))
        buf.observe(0, matrix)
    ms = timed_steps(buf, policy, stock, steps, 32, start=1, whole_pool=whole_pool)
    pools = {k: len(v) for k, v in buf.pools().items()}
    t0 = time.perf_counter()
    blob = json.dumps(buf.state_dict())
    save_ms = 1000 * (time.perf_counter() - t0)
    return {
        **summary(ms, step_s),
        "pools_at_end": pools,
        "checkpoint_ms": round(save_ms, 1),
        "checkpoint_kb": len(blob) // 1024,
    }


def detector_only(steps: int = 200, step_s: float | None = None) -> dict:
    det, policy, ids = BoundaryDetector(), SimulatedPolicy(1), [f"t{i}" for i in range(400)]
    rng, ms = random.Random(0), []
    for step in range(steps):
        matrix = policy.matrix(rng.sample(ids, 32))
        t0 = time.perf_counter()
        det.update(step, matrix)
        ms.append(1000 * (time.perf_counter() - t0))
    return summary(ms, step_s)


def run(steps: int = 200, step_s: float | None = None, measured_in: str | None = None) -> dict:
    """Every scenario's figures; shares and goal checks only against `step_s`, a measured step time
    (`measured_step_s(run_dir)`, or the median step a benchmark just timed), named by `measured_in`."""
    seeds = make_benchmark("bfcl_multi_turn").seeds("train")
    return {
        "seeds": len(seeds),
        "steps": steps,
        "detector_only_32x16": detector_only(steps, step_s),
        "batch_32x16_pool_400_seeds_pmax_50": scenario(seeds, 50, steps, step_s=step_s),
        "batch_32x16_pool_800_active": scenario(seeds, 400, steps, step_s=step_s),
        "matrix_800x16_pool_800_active": scenario(seeds, 400, max(20, steps // 5), whole_pool=True, step_s=step_s),
        "measured_step_s": None if step_s is None else round(step_s, 3),
        "measured_in": measured_in,
        "goal": f"<= {100 * GOAL_SHARE}% of the measured median step"
        + ("" if step_s is not None else " (not checked: no measured step; pass --run runs/<id>)"),
        "cpu": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.buffer_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a run folder: its median logged time/step_s is the denominator")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per scenario")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    try:
        step_s = measured_step_s(args.run) if args.run is not None else None
    except ValueError as e:
        print(f"bench.buffer_bench: --run {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(run(args.steps, step_s, None if args.run is None else str(args.run)), indent=2))


if __name__ == "__main__":
    main()

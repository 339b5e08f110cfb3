"""Detector + replay-buffer bookkeeping per training step, as a share of a 30 s step (goal <= 0.5%).

Scenarios: the paper's batch (32 tasks x 16 rollouts) over the 400 train seeds with P_max 50; the same
batch over an 800-task active pool (400 seeds + 400 variants); and a whole-pool matrix (800 x 16).
Rewards come from a simulated policy (4 checked turns, each passed with a per-task skill that grows with
practice) so tasks really move between regions; only buffer calls are timed (sample, observe,
boundary_tasks, offer), not reward simulation or variant construction. Run: `python -m bench.buffer_bench`.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time

from rods_core.boundary import BoundaryDetector
from rods_core.buffer import BufferConfig, ReplayBuffer
from rods_core.seeds import load_seeds
from rods_core.tasks import Message, Provenance, Task

STEP_S = 30.0
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


def variant_stock(seeds: list[Task], n: int) -> list[Task]:
    """Distinct variants of the seeds (new ids and wording), built before any timing."""
    out = []
    for i in range(n):
        parent = seeds[i % len(seeds)]
        question = [[Message(content=f"{m.content} (variant {i})") for m in turn] for turn in parent.question]
        out.append(
            parent.model_copy(
                update={
                    "id": f"{parent.id}.v{i}",
                    "question": question,
                    "provenance": Provenance(source="synth", parent_id=parent.id),
                }
            )
        )
    return out


def timed_steps(
    buf: ReplayBuffer,
    policy: SimulatedPolicy,
    stock: list[Task],
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
        buf.observe(step, matrix)
        buf.boundary_tasks(4)
        buf.offer(offers[: buf.room()], step)
        ms.append(1000 * (elapsed + time.perf_counter() - t0))
    return ms


def summary(ms: list[float]) -> dict:
    mean = statistics.fmean(ms)
    return {
        "ms_mean": round(mean, 3),
        "ms_p50": round(statistics.median(ms), 3),
        "ms_p95": round(sorted(ms)[int(0.95 * (len(ms) - 1))], 3),
        "share_of_30s_step_pct": round(100 * mean / 1000 / STEP_S, 4),
        "meets_goal": mean / 1000 / STEP_S <= GOAL_SHARE,
    }


def scenario(seeds: list[Task], p_max: int, steps: int, whole_pool: bool = False) -> dict:
    policy = SimulatedPolicy()
    stock = variant_stock(seeds, p_max + 8 * steps)
    cfg = BufferConfig(p_max=p_max)
    buf = ReplayBuffer(seeds, BoundaryDetector(), cfg)
    if p_max > 50:  # fill the pool to 800 active before timing: variants offered and probed as boundary
        fill = [stock.pop() for _ in range(p_max)]
        buf.offer(fill, 0)
        buf.observe(0, {t.id: [1.0] * 8 + [0.0] * 8 for t in fill})
    ms = timed_steps(buf, policy, stock, steps, 32, start=1, whole_pool=whole_pool)
    pools = {k: len(v) for k, v in buf.pools().items()}
    t0 = time.perf_counter()
    blob = json.dumps(buf.state_dict())
    save_ms = 1000 * (time.perf_counter() - t0)
    return {
        **summary(ms),
        "pools_at_end": pools,
        "checkpoint_ms": round(save_ms, 1),
        "checkpoint_kb": len(blob) // 1024,
    }


def detector_only(steps: int = 200) -> dict:
    det, policy, ids = BoundaryDetector(), SimulatedPolicy(1), [f"t{i}" for i in range(400)]
    rng, ms = random.Random(0), []
    for step in range(steps):
        matrix = policy.matrix(rng.sample(ids, 32))
        t0 = time.perf_counter()
        det.update(step, matrix)
        ms.append(1000 * (time.perf_counter() - t0))
    return summary(ms)


def run(steps: int = 200) -> dict:
    seeds = load_seeds("train")
    return {
        "seeds": len(seeds),
        "steps": steps,
        "detector_only_32x16": detector_only(steps),
        "batch_32x16_pool_400_seeds_pmax_50": scenario(seeds, 50, steps),
        "batch_32x16_pool_800_active": scenario(seeds, 400, steps),
        "matrix_800x16_pool_800_active": scenario(seeds, 400, max(20, steps // 5), whole_pool=True),
        "goal": f"<= {100 * GOAL_SHARE}% of a {STEP_S:.0f} s step",
        "cpu": os.cpu_count(),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))

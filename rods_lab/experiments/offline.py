"""The paper's offline baseline: M verified variants synthesized up front (uniform over the pool's seeds, the same
synthesizer as rods), then static GRPO on seeds + variants. The paper compares RODS with a 17K-sample offline set;
here M is given, or measured from rods' own runs (the distinct variants a rods run trained on), and a large M is
as many as the synthesizer yields per seed; the report states the ratio of synthesized tasks and trajectories.

A variant equal to a held-out task by content is counted and left out (the set then holds fewer than M: said so).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_core.benchmarks.task_files import write_tasks
from rods_core.config import SynthesisConfig
from rods_core.rng import derive_seed

# arm -> how its M is chosen: "rods" = the distinct variants rods' run of the same repeat trained on; "large" =
# every variant the synthesizer yields for each seed (OFFLINE_LARGE_PER_SEED at most); an int = that M
OFFLINE_ARMS: dict[str, str] = {"offline_small": "rods", "offline_large": "large"}
OFFLINE_LARGE_PER_SEED = 50


def offline_variants(
    pool: list[TaskRecord],
    m: int,
    synth: SynthesisConfig,
    seed: int,
    heldout: dict[str, str] | None = None,
    benchmark: str = DEFAULT_BENCHMARK,
) -> tuple[list[TaskRecord], dict]:
    """(up to m variants, stats): ceil(m / seeds) asked of each seed of the benchmark's synthesizer (`benchmark`:
    the run's), then taken round-robin over the seeds so every seed contributes alike; held-out collisions left
    out and counted."""
    cfg = synth.model_copy(update={"seed": derive_seed(seed, "offline")})
    per_seed = math.ceil(m / max(len(pool), 1))
    cfg = cfg.model_copy(update={"max_attempts": max(cfg.max_attempts, 4 * per_seed)})
    keys = {t.content_key() for t in pool}
    synthesizer = make_benchmark(benchmark, synth=cfg).synthesizer
    by_seed, collided = [], 0
    for parent in pool:
        got = []
        for v in synthesizer.variants(parent, per_seed, cfg.seed, keys).accepted:
            if heldout and v.content_key() in heldout:
                collided += 1
                continue
            keys.add(v.content_key())
            got.append(v)
        by_seed.append(got)
    picked = [v for i in range(per_seed) for got in by_seed if i < len(got) for v in [got[i]]][:m]
    stats = {"asked": m, "made": len(picked), "per_seed_asked": per_seed, "heldout_collisions_excluded": collided}
    return picked, stats


def rods_distinct_variants(run_dir: Path, seed_ids: set[str]) -> int:
    """Distinct tasks outside the seeds that a finished run played in training (its task_stats rows)."""
    from storage.reader import RunReader  # DuckDB only when a run is read

    played = RunReader(run_dir).query("SELECT DISTINCT task_id FROM task_stats")
    return int(sum(t not in seed_ids for t in played.task_id))


def offline_m(
    arm: str, rods_dir: Path | None, pool: list[TaskRecord], large_ratio: int | None = None, rods_m: int | None = None
) -> int:
    """M of an offline arm's run (OFFLINE_ARMS): measured from the rods run of the same repeat (its folder, or
    `rods_m` where that run's summary gave it), or the large M: OFFLINE_LARGE_PER_SEED per seed, or with
    `large_ratio` that many times rods' M (the paper's ratio of synthesized data)."""
    rule = OFFLINE_ARMS[arm]
    if rule == "large" and large_ratio is None:
        return OFFLINE_LARGE_PER_SEED * len(pool)
    if rods_m is None:
        if rods_dir is None or not rods_dir.is_dir():
            raise ValueError(
                f"{arm}: M is measured from rods' run of the same repeat; add rods to --arms, before {arm}"
            )
        rods_m = rods_distinct_variants(rods_dir, {t.id for t in pool})
    return max(1, rods_m) * (large_ratio if rule == "large" else 1)


def write_offline_seeds(path: Path, pool: list[TaskRecord], variants: list[TaskRecord], stats: dict) -> None:
    """The offline arm's training set (seeds + variants) as a seeds file, and its stats beside it."""
    write_tasks(path, [*pool, *variants])
    path.with_suffix(".json").write_text(json.dumps(stats, indent=1))

"""Template synthesis throughput (accepted variants per second on one core, goal >= 50) and acceptance
per stage, per category and per class combination, over the train-split seeds: BFCL multi-turn's synthesizer
through the protocol (`Benchmark.synthesizer.variants`, as the run's synthesis worker calls it).

    python bench/synth_bench.py [--limit 400] [--n 4] [--attempts 24] [--seed 0]

Prints figures only; nothing is asserted. Wall time and this process's CPU time are both given (the
pipeline is single-threaded, so CPU time is the one-core figure on a shared machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rods_core.benchmarks.registry import make_benchmark  # noqa: E402
from rods_core.benchmarks.synthesis import merge_counts  # noqa: E402
from rods_core.config import SynthesisConfig  # noqa: E402

BENCHMARK = "bfcl_multi_turn"


def measure(limit: int = 400, n: int = 4, attempts: int = 24, seed: int = 0) -> dict:
    """Synthesize for `limit` train seeds spread over the split; the raw results and the timings."""
    bench = make_benchmark(BENCHMARK, synth=SynthesisConfig(n_per_parent=n, max_attempts=attempts, seed=seed))
    seeds = bench.seeds("train")
    step = max(1, len(seeds) // limit)
    parents = seeds[::step][:limit]
    bench.synthesizer.variants(parents[0], 1, seed)  # warm caches (docs, class imports, leak guard)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    results = [bench.synthesizer.variants(p, n, seed) for p in parents]
    return {
        "bench": bench,
        "parents": parents,
        "results": results,
        "wall_s": time.perf_counter() - wall0,
        "cpu_s": time.process_time() - cpu0,
    }


def figures(limit: int = 400, n: int = 4, attempts: int = 24, seed: int = 0) -> dict:
    """Throughput and acceptance per stage as numbers (for `rods bench systems`)."""
    m = measure(limit, n, attempts, seed)
    results = m["results"]
    accepted = sum(len(r.accepted) for r in results)
    stages = {}
    for stage, c in merge_counts(results).items():
        total = c["accepted"] + c["rejected"]
        stages[stage] = {
            "accepted": c["accepted"],
            "rejected": c["rejected"],
            "acceptance": round(c["accepted"] / total, 3) if total else None,
        }
    return {
        "parents": len(m["parents"]),
        "attempts": sum(len(r.attempts) for r in results),
        "accepted": accepted,
        "accepted_per_s_wall": round(accepted / m["wall_s"], 1),
        "accepted_per_s_cpu": round(accepted / m["cpu_s"], 1),
        "parent_yield": round(sum(bool(r.accepted) for r in results) / len(results), 3),
        "stages": stages,
        "goal_accepted_per_s": 50,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=400, help="train seeds to use (spread over the split)")
    ap.add_argument("--n", type=int, default=4, help="variants wanted per parent")
    ap.add_argument("--attempts", type=int, default=24, help="max attempts per parent")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    m = measure(args.limit, args.n, args.attempts, args.seed)
    bench, parents, results, wall, cpu = m["bench"], m["parents"], m["results"], m["wall_s"], m["cpu_s"]
    accepted = sum(len(r.accepted) for r in results)
    attempts = sum(len(r.attempts) for r in results)
    print(f"synth/parents {len(parents)}  attempts {attempts}  accepted {accepted}")
    print(f"synth/throughput  {accepted / wall:.1f} accepted/s wall  {accepted / cpu:.1f} accepted/s cpu (goal >= 50)")
    print(f"synth/attempts_per_s  {attempts / cpu:.1f} (cpu)")
    print(
        f"synth/parent_yield  {sum(bool(r.accepted) for r in results) / len(parents):.1%} of parents gave >= 1 variant"
    )

    print("\nper stage (candidates accepted / rejected, top reasons)")
    for stage, c in merge_counts(results).items():
        total = c["accepted"] + c["rejected"]
        share = c["accepted"] / total if total else 0.0
        top = "; ".join(f"{r} ({k})" for r, k in list(c["reasons"].items())[:4])
        print(f"  {stage:9s} {c['accepted']:5d} / {c['rejected']:5d}  ({share:.0%})  {top}")

    groups: dict[str, dict[str, Counter]] = {"category": defaultdict(Counter), "classes": defaultdict(Counter)}
    for p, r in zip(parents, results, strict=True):
        for key, name in (("category", bench.group_of(p)), ("classes", bench.facts(p).class_combo)):
            g = groups[key][name]
            g["parents"] += 1
            g["yielded"] += bool(r.accepted)
            g["variants"] += len(r.accepted)
            g["attempts"] += len(r.attempts)
    for key, table in groups.items():
        print(f"\nper {key}: parents, parent yield, variants, acceptance per attempt")
        for name, g in sorted(table.items(), key=lambda kv: -kv[1]["parents"]):
            print(
                f"  {name:42s} {g['parents']:4d}  {g['yielded'] / g['parents']:5.0%}  {g['variants']:5d}  "
                f"{g['variants'] / max(1, g['attempts']):5.0%}"
            )

    modes = Counter(
        "compose" if "rewrite=compose" in (t.provenance.note or "") else "substitute"
        for r in results
        for t in r.accepted
    )
    distances = [bench.distance(p, t) for p, r in zip(parents, results, strict=True) for t in r.accepted]
    changed = sum(d.values + d.calls > 0 for d in distances)  # a call or an argument value of the ground truth
    print(f"\nsynth/rewrite_modes {dict(modes)}  synth/ground_truth_changed {changed / max(1, accepted):.0%}")


if __name__ == "__main__":
    main()

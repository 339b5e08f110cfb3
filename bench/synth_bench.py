"""Template synthesis throughput (accepted variants per second on one core, goal >= 50) and acceptance
per stage, per category and per class combination, over the train-split seeds.

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

from rods_core.seeds import load_seeds  # noqa: E402
from rods_core.synth import SynthConfig, merge_counts, synthesize  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=400, help="train seeds to use (spread over the split)")
    ap.add_argument("--n", type=int, default=4, help="variants wanted per parent")
    ap.add_argument("--attempts", type=int, default=24, help="max attempts per parent")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    seeds = load_seeds("train")
    step = max(1, len(seeds) // args.limit)
    parents = seeds[::step][: args.limit]
    cfg = SynthConfig(n_per_parent=args.n, max_attempts=args.attempts, seed=args.seed)
    synthesize(parents[0], 1, set(), cfg)  # warm caches (docs, class imports, leak guard)

    wall0, cpu0 = time.perf_counter(), time.process_time()
    results = [synthesize(p, args.n, set(), cfg) for p in parents]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0

    accepted = sum(len(r.accepted) for r in results)
    attempts = sum(r.attempts for r in results)
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
        for key, name in (("category", p.category), ("classes", "+".join(sorted(p.involved_classes)))):
            g = groups[key][name]
            g["parents"] += 1
            g["yielded"] += bool(r.accepted)
            g["variants"] += len(r.accepted)
            g["attempts"] += r.attempts
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
    changed = sum(t.ground_truth != p.ground_truth for p, r in zip(parents, results, strict=True) for t in r.accepted)
    print(f"\nsynth/rewrite_modes {dict(modes)}  synth/ground_truth_changed {changed / max(1, accepted):.0%}")


if __name__ == "__main__":
    main()

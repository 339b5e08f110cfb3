"""Warm-start diversity at equal compute: how far the tiny model generalises to variants it never saw.

Arms: the demo seeds alone, and the seeds plus k verified variants of each (template synthesis), every arm
trained from the same initial weights on the same number of tokens (`rods sft --token-budget`, so more
diverse data means fewer epochs). Each arm is scored greedily on a fixed held-out set of fresh variants of
the demo seeds (synthesized under another seed; none shares content with any arm's training variants) and
on the seeds themselves. Run: `python -m bench.warmstart_bench --arms 0 2 6 --tokens 1200000`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.demo_model import demo_tasks
from rods_core.benchmarks.task_files import write_tasks
from rods_core.config import RunConfig
from rods_core.tasksets import fresh_variants, run_benchmark
from rods_lab.experiments.machine import describe

ROOT = Path(__file__).resolve().parent.parent


def _rods(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=7200
    )
    if proc.returncode != 0:
        raise RuntimeError(f"rods {' '.join(args[:2])} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def held_out_set(per_seed: int, exclude_k: int) -> tuple[list, list]:
    """(held-out variants, demo seeds): fresh variants of the seeds, minus any that a training arm holds."""
    seeds, cfg = demo_tasks(), RunConfig()
    bench = run_benchmark(cfg)
    trained = (
        {t.content_key() for t in fresh_variants(seeds, exclude_k, cfg, "warm-start", bench)} if exclude_k else set()
    )
    held = [
        t for t in fresh_variants(seeds, per_seed, cfg, "warmstart-heldout", bench) if t.content_key() not in trained
    ]
    return held, seeds


def run(arms: list[int], tokens: int, processes: int, held_per_seed: int, exclude_k: int | None = None) -> dict:

    work = Path(tempfile.mkdtemp(prefix="rods-warmstart-"))
    held, seeds = held_out_set(held_per_seed, max(arms) if exclude_k is None else exclude_k)
    write_tasks(work / "heldout.jsonl", held)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    write_tasks(ROOT / "bench" / "results" / "warmstart_heldout.jsonl", held)  # to score other models on
    write_tasks(work / "seeds.jsonl", seeds)
    _rods("model", "init-tiny", "--out", str(work / "init"), "--json")
    out = {"machine": describe(), "token_budget": tokens, "processes": processes, "held_out": len(held), "arms": {}}
    for k in arms:
        t0 = time.perf_counter()
        model = work / f"k{k}"
        sft = _rods("sft", "--model", str(work / "init"), "--out", str(model), "--demo", "--variants", str(k),
                    "--token-budget", str(tokens), "--loss-target", "1e-6",  # equal compute: no early stop
                    "--processes", str(processes), "--samples", "8", "--json")  # fmt: skip
        heldout = _rods("eval", "--model", str(model), "--tasks", str(work / "heldout.jsonl"), "--json")
        arm = {
            "conversations": sft["sft/tasks"],
            "epochs": sft["sft/epochs"],
            "sft_minutes": round(sft["sft/seconds"] / 60, 1),
            "final_loss": round(sft["sft/final_loss"], 4),
            "seeds/progress": round(sft["eval/progress"], 3),
            "seeds/format_valid": round(sft["eval/format_valid"], 3),
            "seeds/share_differing_x8": round(sft["sampled/share_differing"], 3),
            "heldout/progress": round(heldout["eval/progress"], 3),
            "heldout/accuracy": round(heldout["eval/accuracy"], 3),
            "heldout/format_valid": round(heldout["eval/format_valid"], 3),
            "wall_minutes": round((time.perf_counter() - t0) / 60, 1),
            "model": str(model),
        }
        out["arms"][f"k={k}"] = arm
        print(f"k={k}: {arm}", file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, nargs="+", default=[0, 2, 6], help="variants per seed, one arm each")
    p.add_argument("--tokens", type=int, default=1_200_000, help="SFT tokens per arm")
    p.add_argument("--processes", type=int, default=2, help="SFT processes")
    p.add_argument("--held-out-per-seed", type=int, default=2, help="fresh held-out variants per demo seed")
    p.add_argument(
        "--exclude-k",
        type=int,
        default=None,
        help="held-out set filtered against the variants of this arm (default: the largest arm), so a rerun of "
        "one arm scores on the same held-out set as the full curve",
    )
    a = p.parse_args()
    print(json.dumps(run(a.arms, a.tokens, a.processes, a.held_out_per_seed, a.exclude_k), indent=2))

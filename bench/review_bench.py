"""Review page benchmark: render time of pages/3_Review.py over a run with thousands of staged variants.

`build_review_run` writes a run folder with the project's own writers (EventLog, write_pools_snapshot) and
registers it in a control DB: BFCL train seeds as parents with statistics, `n` variants awaiting review
(every synthesis stage passed, a reworded first turn each, so each replays as its parent does), as a gated run at
the paper's rate of ~16 variants a step. The tests use it as a fixture; `main` renders the page with
AppTest: `cold` is the first render (caches empty), `warm` a re-render. Prints figures; asserts nothing.
Run: `python -m bench.review_bench [--variants 2000]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.app_bench import accepted_variant_rows, timed_runs
from rods_core.benchmarks.registry import make_benchmark
from rods_core.ids import variant_id
from rods_core.reasons import OfferReason
from storage.control import ControlDB
from storage.events import EventLog
from storage.pools import write_pools_snapshot

ROOT = Path(__file__).resolve().parent.parent
PER_STEP = 16  # the paper: 8 parents x 2 variants a step


def _variant(parent, i: int):
    said = parent.user_texts[0]
    rec = {
        **parent.to_record(),
        "id": variant_id(parent.id, f"{i:08x}"),
        "question": [[{"role": "user", "content": f"{said} (variant {i})"}], *parent.to_record()["question"][1:]],
        "provenance": {"source": "synth", "parent_id": parent.id, "created_step": 1 + i // PER_STEP},
    }
    return type(parent).model_validate(rec)


def build_review_run(ws: Path, runs: Path, run_id: str, variants: int, review: str = "gated") -> Path:
    """A finished run folder with `variants` staged variants (awaiting review when gated), registered in
    ws/control.sqlite; returns the run folder."""
    run_dir = runs / run_id
    seeds = make_benchmark("bfcl_multi_turn").seeds("train")
    staged = [_variant(seeds[i % len(seeds)], i) for i in range(variants)]
    steps = 1 + (variants - 1) // PER_STEP
    log = EventLog(run_dir)
    log.append(
        "task_stats",
        [
            {"step": steps, "task_id": s.id, "n": 8, "mean": m, "var": m * (1 - m), "region": r}
            for k, s in enumerate(seeds)
            for m, r in [((k % 9) / 8, ("hard", "boundary", "boundary", "mastered")[k % 4])]
        ],
    )
    log.append(
        "step", [{"step": s, "wall_s": 30.0 * s, "buffer/staged": float(PER_STEP * s)} for s in range(1, steps + 1)]
    )
    log.append("variant", accepted_variant_rows(staged))
    reason = str(OfferReason.AWAITING_REVIEW if review == "gated" else OfferReason.STAGED)
    log.append(
        "buffer",
        [
            {
                "step": v.provenance.created_step,
                "task_id": v.id,
                "from_pool": None,
                "to_pool": "staged",
                "reason": reason,
            }
            for v in staged
        ],
    )
    log.close()
    write_pools_snapshot(run_dir, {"seeds": seeds, "staged": staged, "active": seeds}, steps)
    db = ControlDB(ws / "control.sqlite")
    cfg = {"method": "rods", "buffer": {"review": review}, "grpo": {"max_steps": steps}}
    db.create_run(run_id, run_dir, cfg, "rods", name=run_id)
    db.update_run(run_id, status="finished", step=steps)
    return run_dir


def render_times(page: str, run_id: str, repeats: int = 3) -> list[float]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / page), default_timeout=300)
    at.session_state["lab_run"] = run_id
    return timed_runs(at, page, repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=2000)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="review-bench-"))
    os.environ["RODS_WORKSPACE"], os.environ["RODS_RUNS"] = str(base / "ws"), str(base / "runs")
    t0 = time.perf_counter()
    build_review_run(base / "ws", base / "runs", "review_bench", args.variants)
    built = time.perf_counter() - t0
    times = render_times("pages/3_Review.py", "review_bench")
    out = {
        "variants": args.variants,
        "build_s": round(built, 2),
        "cold_s": round(times[0], 3),
        "warm_s": [round(t, 3) for t in times[1:]],
        "load_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()

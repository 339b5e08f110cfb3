"""App benchmark: every page renders in <= 2 s over a run with 1M task_stats and 1M rollout rows.

Builds a synthetic store with storage.events.EventLog (1,250 steps x 800 tasks of task_stats, 1,250
steps x 50 tasks x 16 rollouts, step rows, variants with lineage, buffer moves, evals) and a pools.json
of 800 tasks (400 BFCL train seeds + 400 variants), registers it in a control DB, then renders each page
with streamlit's AppTest: `cold` is the first render (query caches empty), `warm` a re-render.
Prints figures; asserts nothing. Run: `python -m bench.app_bench [--keep DIR]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rods_core.benchmarks.registry import make_benchmark
from rods_core.ids import variant_id
from rods_core.reasons import OfferReason, PromoteReason, RetireReason
from storage.control import ControlDB
from storage.events import EventLog
from storage.pools import write_pools_snapshot
from storage.reader import RunReader

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "app.py",
    "pages/1_Launch.py",
    "pages/2_Boundary.py",
    "pages/3_Review.py",
    "pages/4_Buffer.py",
    "pages/5_Seeds.py",
    "pages/6_Compare.py",
]
STEPS, TASKS, ROLLOUT_TASKS, G = 1250, 800, 50, 16


def accepted_variant_rows(variants: list) -> list[dict]:
    """`variant` events for variants that passed every synthesis stage, at their creation step."""
    stages = ("plan", "execute", "rewrite", "critique", "augment")
    return [
        {
            "step": v.provenance.created_step,
            "variant_id": v.id,
            "parent_id": v.provenance.parent_id,
            "accepted": True,
            "reason": "accepted",
            "task": v.to_record(),
            "stages": [{"stage": s, "accepted": True, "reason": "ok"} for s in stages],
        }
        for v in variants
    ]


def _tasks():
    seeds = make_benchmark("bfcl_multi_turn").seeds("train")
    variants = []
    for i, s in enumerate(seeds):
        said = s.question[0][0].content if s.question and s.question[0] else ""
        q = [
            [{"role": "user", "content": f"{said} (variant {i})"}],
            *[[m.model_dump() for m in t] for t in s.question[1:]],
        ]
        rec = {
            **s.to_record(),
            "id": variant_id(s.id, f"{i:08x}"),
            "question": q,
            "provenance": {"source": "synth", "parent_id": s.id, "created_step": i},
        }
        variants.append(type(s).model_validate(rec))
    return seeds, variants


def _chunks(n: int, size: int = 200_000):
    for lo in range(0, n, size):
        yield lo, min(n, lo + size)


def build_store(run_dir: Path, rng: np.random.Generator) -> dict[str, int]:
    """Write the synthetic run's tables; returns their row counts.

    Length: every table of the synthetic run in one pass, in the order the pages read them."""
    seeds, variants = _tasks()
    ids = np.array([t.id for t in seeds + variants])
    log = EventLog(run_dir, max_buffer_rows=250_000)
    n = STEPS * TASKS
    for lo, hi in _chunks(n):
        k = np.arange(lo, hi)
        mean = rng.random(hi - lo)
        var = mean * (1 - mean) * rng.random(hi - lo) * 0.5
        reg = np.where(mean >= 0.8, "mastered", np.where(mean <= 0.2, "hard", "boundary"))
        log.append(
            "task_stats",
            [
                {
                    "step": int(s),
                    "task_id": str(t),
                    "n": G,
                    "mean": float(m),
                    "var": float(v),
                    "smoothed_mean": float(m),
                    "smoothed_var": float(v),
                    "region": str(r),
                }
                for s, t, m, v, r in zip(k // TASKS + 1, ids[k % TASKS], mean, var, reg, strict=True)
            ],
        )
    n_roll = STEPS * ROLLOUT_TASKS * G
    for lo, hi in _chunks(n_roll):
        k = np.arange(lo, hi)
        reward = rng.random(hi - lo)
        log.append(
            "rollouts",
            [
                {
                    "step": int(s),
                    "task_id": str(t),
                    "sample": int(j),
                    "reward": float(r),
                    "accuracy": float(r > 0.9),
                    "n_calls": 3,
                }
                for s, t, j, r in zip(k // (ROLLOUT_TASKS * G) + 1, ids[(k // G) % TASKS], k % G, reward, strict=True)
            ],
        )
    log.append(
        "step",
        [
            {
                "step": s,
                "wall_s": 30.0 * s,
                "reward/mean": float(rng.random()),
                "time/step_s": 30.0,
                "train/trajectories": float(ROLLOUT_TASKS * G),
                "boundary/informative_share": float(rng.random()),
                "buffer/active": 600.0,
                "buffer/staged": 50.0,
            }
            for s in range(1, STEPS + 1)
        ],
    )
    log.append(
        "eval",
        [
            {
                "step": s,
                "split": "test",
                "accuracy": s / STEPS / 2,
                "progress": s / STEPS,
                "per_category": {"base": 0.5},
                "trajectories": s * ROLLOUT_TASKS * G,
            }
            for s in range(50, STEPS + 1, 50)
        ],
    )
    log.append("variant", accepted_variant_rows(variants))
    staged, active, retired = variants[:50], variants[50:250], variants[250:]
    log.append(
        "buffer",
        [
            {
                "step": 1,
                "task_id": v.id,
                "from_pool": None,
                "to_pool": "staged",
                "reason": str(OfferReason.AWAITING_REVIEW),
            }
            for v in variants
        ]
        + [
            {
                "step": 2,
                "task_id": v.id,
                "from_pool": "staged",
                "to_pool": "active",
                "reason": str(PromoteReason.BOUNDARY),
            }
            for v in active + retired
        ]
        + [
            {
                "step": 3,
                "task_id": v.id,
                "from_pool": "active",
                "to_pool": "retired",
                "reason": str(RetireReason.RETIRE_MASTERED),
            }
            for v in retired
        ],
    )
    log.close()
    write_pools_snapshot(
        run_dir, {"seeds": seeds, "staged": staged, "active": seeds + active, "retired": retired}, STEPS
    )
    return {"task_stats": n, "rollouts": n_roll, "tasks": len(ids)}


def render_times(pages: list[str], repeats: int = 2) -> dict[str, list[float]]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    out = {}
    for page in pages:
        st.cache_data.clear()
        out[page] = timed_runs(AppTest.from_file(str(ROOT / page), default_timeout=120), page, repeats)
    return out


def timed_runs(at, page: str, repeats: int) -> list[float]:
    """Seconds of each of `repeats` runs of one AppTest; a page that raises stops the bench."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception[0].message}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="build the store in this folder and keep it (reused if present)")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="app-bench-"))
    ws, runs = base / "ws", base / "runs"
    run_dir = runs / "bench-1m"
    sys.path.insert(0, str(ROOT))
    os.environ["RODS_WORKSPACE"], os.environ["RODS_RUNS"] = str(ws), str(runs)
    if not (run_dir / "pools.json").exists():
        t0 = time.perf_counter()
        sizes = build_store(run_dir, np.random.default_rng(0))
        print(f"built the store in {time.perf_counter() - t0:.1f} s: {sizes}")
        db = ControlDB(ws / "control.sqlite")
        db.create_run("bench-1m", run_dir, {"grpo": {"max_steps": STEPS}, "buffer": {"review": "gated"}}, "rods")
        db.update_run("bench-1m", status="finished", step=STEPS)
    print(f"rows: {RunReader(run_dir).counts()}")
    render_times(["app.py"], repeats=1)  # imports (streamlit, plotly, duckdb, pandas) are not page time
    # AppTest scans every installed package for custom components on each run (~0.6 s here); a server does
    # that once at startup, so it is not page time either.
    from streamlit.components.v2.component_manager import BidiComponentManager

    BidiComponentManager.discover_and_register_components = lambda self, **kw: None
    print(f"{'page':<22}{'cold s':>8}{'warm s':>8}")
    for page, (cold, warm) in render_times(PAGES).items():
        print(f"{page:<22}{cold:>8.2f}{warm:>8.2f}{'  > 2 s' if cold > 2 else ''}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

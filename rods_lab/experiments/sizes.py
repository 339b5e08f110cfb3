"""The sizes behind every figure of the paper's report (held-out sets with their hashes, the pool, K, runs per arm,
trajectories per run) and the machine's load as each run started (recorded by `rods bench paper` in the manifest),
so a reader can tell an N and a loaded run from the report alone. Pure functions over the manifest and run table.
"""

from __future__ import annotations

import pandas as pd


def sizes(settings: dict, runs: pd.DataFrame) -> dict:
    """Held-out sets (tasks, sha256), pool seeds, K asked, runs per arm, and trajectories per run: planned
    (steps x trajectories per step) and the least and most any run of each arm consumed."""
    planned = None
    if settings.get("max_steps") and settings.get("trajectories_per_step"):
        planned = int(settings["max_steps"]) * int(settings["trajectories_per_step"])
    per_arm = {}
    for arm, g in runs.groupby("method", sort=False) if not runs.empty else []:
        per_arm[arm] = {"runs": len(g), "seeds": sorted(int(s) for s in g.seed),
                        "trajectories_min": float(g.trajectories.min()),
                        "trajectories_max": float(g.trajectories.max())}  # fmt: skip
    return {
        "heldout_sets": settings.get("heldout_sets") or {},
        "heldout_spec": settings.get("heldout"),
        "pool": len(settings["pool"]) if settings.get("pool") else None,
        "repeats": settings.get("repeats"),
        "steps": settings.get("max_steps"),
        "trajectories_per_step": settings.get("trajectories_per_step"),
        "trajectories_per_run": planned,
        "arms": per_arm,
    }


def loads(runs_meta: list[dict]) -> list[dict]:
    """Per run of the manifest: its arm, status, wall seconds and the 1-minute load average as it started (None
    where the manifest has none: an experiment from before the load was recorded, or a run not started)."""
    return [
        {"run": m.get("run"), "arm": m.get("arm") or m.get("method"), "status": m.get("status"),
         "wall_s": m.get("wall_s"), "load_1min_at_start": m.get("load_1min_at_start")}
        for m in runs_meta
    ]  # fmt: skip


def markdown(size: dict, per_run: list[dict], cores: int | None) -> list[str]:
    """The sizes and the load per run as Markdown lines."""
    lines = ["## Sizes", ""]
    for name, s in size["heldout_sets"].items():
        lines.append(f"- {name}: {s['n']} tasks, sha256 `{s['sha256']}`")
    if not size["heldout_sets"]:
        lines.append("- held-out: no experiment-level sets (each run's own `eval`)")
    lines += [
        f"- pool: {size['pool'] if size['pool'] is not None else 'not recorded'} seeds; K asked: {size['repeats']}; "
        f"{size['steps']} steps x {size['trajectories_per_step']} = {size['trajectories_per_run']} trajectories a run",
        "",
        "| arm | runs | run seeds | trajectories per run |",
        "|---|---|---|---|",
    ]
    for arm, a in size["arms"].items():
        t = (
            f"{a['trajectories_min']:.0f}"
            if a["trajectories_min"] == a["trajectories_max"]
            else f"{a['trajectories_min']:.0f} .. {a['trajectories_max']:.0f}"
        )
        lines.append(f"| {arm} | {a['runs']} | {', '.join(map(str, a['seeds']))} | {t} |")
    lines += ["", f"Load average (1 min) as each run started, on {cores or '?'} cores:", ""]
    lines += ["| run | arm | status | wall s | load at start |", "|---|---|---|---|---|"]
    for r in per_run:
        load = "not recorded" if r["load_1min_at_start"] is None else f"{r['load_1min_at_start']:.2f}"
        lines.append(f"| {r['run']} | {r['arm']} | {r['status'] or '—'} | {r['wall_s'] or '—'} | {load} |")
    return [*lines, ""]

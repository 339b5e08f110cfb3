"""Watching does not slow training: a demo run's step time with the Home, Boundary and Review pages open in a
browser (live refresh) against the same run with no browser.

One `rods train` run (the config's processes) and one served app (`streamlit run app.py`, up the whole time)
share the machine; headless chromium (Playwright, Debian's chromium) opens the three pages on the run for
blocks of steps and closes them for the blocks between, so a drift in step time over the run (the pool and
the policy change) hits both conditions alike. A step that straddles a switch is dropped. Prints the median
step of each condition, their ratio (goal <= 1.1) and a bootstrap 95% interval over the steps, and where the
cores went in each condition: CPU seconds per wall second of the trainer's processes, the streamlit server's
and the browser's (so a slowdown can be put on the server's queries and charts or on the browser's drawing).
Run: `python -m bench.app_watch_bench [--steps 26 --block 4]` (needs models/tiny-demo: `make demo-model`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from rods_core.statistics import bootstrap_stat, quantile_interval
from rods_lab.experiments.machine import describe
from rods_lab.launch import train_command
from storage.reader import RunReader

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
PAGES = ("", "Boundary", "Review")  # Home, Boundary, Review


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"app watch bench: timed out waiting for {what}")
        time.sleep(0.5)
    return value


def _done_steps(run_dir: Path) -> int:
    """The last step whose row is in the event log (0 before the first)."""
    try:
        return int(RunReader(run_dir).scalar("SELECT max(step) FROM step") or 0)
    except Exception:  # noqa: BLE001 - the log may not exist yet
        return 0


def cpu_seconds(roots: dict[str, list[int]]) -> dict[int, tuple[str, float]]:
    """pid -> (group, user + system CPU seconds so far) of every live process under each group's root pids."""
    import psutil

    seen: dict[int, tuple[str, float]] = {}
    for group, pids in roots.items():
        for pid in pids:
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    t = proc.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                # a process under two roots counts in the first group named; this script itself polls the log
                seen.setdefault(proc.pid, ("bench" if proc.pid == os.getpid() else group, t.user + t.system))
    return seen


def cores_used(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], wall: float) -> dict:
    """CPU seconds each group spent between two snapshots, per wall second (1.0 = one core busy throughout).
    A process born in between counts from 0; one that died in between is lost (pages close after the
    snapshot, so the browser's renderers are counted)."""
    used: dict[str, float] = {}
    for pid, (group, cpu) in after.items():
        used[group] = used.get(group, 0.0) + cpu - before.get(pid, (group, 0.0))[1]
    return {g: v / wall for g, v in used.items()}


def ratio_interval(watched: list[float], quiet: list[float], boots: int = 4000) -> tuple[float, float, float]:
    """median(watched) / median(quiet) and a bootstrap 95% interval (steps resampled within each condition)."""
    w, q = np.asarray(watched, dtype=float), np.asarray(quiet, dtype=float)
    draws = bootstrap_stat(lambda i, j: np.median(w[i]) / np.median(q[j]), len(w), len(q), boots=boots)
    return (float(draws[0]), *quantile_interval(draws[1:]))


def run(config: Path, steps: int, block: int, warmup: int) -> dict:
    """Train with the pages open and closed in turns; returns the figures.

    Length: the experiment's timeline (launch, browser blocks, teardown), read in the order it happens."""
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="rods-watch-"))
    ws, runs = work / "ws", work / "runs"
    run_id = "watched"
    env = {**os.environ, "RODS_WORKSPACE": str(ws), "RODS_RUNS": str(runs), "PYTHONUNBUFFERED": "1"}
    sets = [f"grpo.max_steps={steps}", "eval.every=0", f"grpo.save_steps={steps + 1}", f"output_dir={runs}",
            f"workspace={ws}", "eval.limit=4"]  # fmt: skip
    trainer = subprocess.Popen(
        train_command(config, run_id, options=[a for s in sets for a in ("--set", s)]),
        cwd=ROOT, env=env, stdout=(work / "train.log").open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=(work / "server.log").open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    run_dir = runs / run_id
    phases: dict[int, str] = {}  # step -> condition it ran under (steps that straddle a switch are left out)
    cpu: dict[str, dict[str, float]] = {"watched": {}, "quiet": {}}  # condition -> group -> CPU seconds
    cpu_wall = {"watched": 0.0, "quiet": 0.0}
    # the browser is a child of Playwright's driver, itself a child of this process
    roots = {"trainer": [trainer.pid], "server": [server.pid], "browser": [os.getpid()]}
    try:
        _wait(lambda: _healthy(url), 120, "the streamlit server")
        _wait(lambda: _done_steps(run_dir) >= warmup, 3600, f"{warmup} warm-up steps")
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            watched, pages = False, []
            while trainer.poll() is None:
                start = _done_steps(run_dir)
                if start >= steps:
                    break
                watched = not watched
                if watched:
                    for name in PAGES:
                        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
                        pg.goto(f"{url}/{name}")
                        pages.append(pg)
                target = min(start + block, steps)
                t0, snap0 = time.monotonic(), cpu_seconds(roots)
                _wait(lambda t=target: _done_steps(run_dir) >= t or trainer.poll() is not None, 3600, "a block")
                end = _done_steps(run_dir)
                wall = time.monotonic() - t0
                cond = "watched" if watched else "quiet"
                for group, cores in cores_used(snap0, cpu_seconds(roots), wall).items():
                    cpu[cond][group] = cpu[cond].get(group, 0.0) + cores * wall
                cpu_wall[cond] += wall
                for s in range(start + 2, end + 1):  # step start+1 began under the previous condition
                    phases[s] = "watched" if watched else "quiet"
                for pg in pages:
                    pg.close()
                pages = []
            browser.close()
        trainer.wait(timeout=3600)
    finally:
        for proc in (trainer, server):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    rows = RunReader(run_dir).step_metrics().set_index("step")["time/step_s"]
    by = {c: [float(rows[s]) for s, ph in phases.items() if ph == c and s in rows.index] for c in ("watched", "quiet")}
    ratio, lo, hi = ratio_interval(by["watched"], by["quiet"])
    return {
        "machine": describe(),
        "config": str(config),
        "pages": [p or "Home" for p in PAGES],
        "block_steps": block,
        "steps": {c: len(v) for c, v in by.items()},
        "median_step_s": {c: round(statistics.median(v), 2) for c, v in by.items()},
        "ratio_watched_over_quiet": round(ratio, 3),
        "ci95": [round(lo, 3), round(hi, 3)],
        # met when the whole interval is at or below 1.1, missed when all of it is above, else undecided
        "goal_1_1x_met": True if hi <= 1.1 else False if lo > 1.1 else None,
        # cores busy on average in each condition ("bench": this script polling the run's log)
        "cores_used": {
            c: {g: round(v / cpu_wall[c], 3) for g, v in sorted(cpu[c].items())} for c in cpu if cpu_wall[c]
        },
        "step_s": {c: [round(x, 2) for x in v] for c, v in by.items()},
    }


def _healthy(url: str) -> bool:
    try:
        return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200
    except OSError:
        return False


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo-cpu.yaml")
    p.add_argument("--steps", type=int, default=26)
    p.add_argument("--block", type=int, default=4, help="steps per condition before switching")
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    print(json.dumps(run(a.config, a.steps, a.block, a.warmup), indent=2))

"""A run's status as the app and `rods runs list` show it, read-only, plus the one explicit write that
records dead runs as failed; the log's tail and progress/ETA for the run cards.

A run launched from the app is registered `queued` with its pid; the trainer then registers itself as
`running`. A process that dies before registering (bad model path, crash at import) is shown `failed`
from its pid and start time with no write at all; `reconcile_dead_runs` stores that verdict, called by
the Home page once per refresh and by `rods runs list`, never from a cached view.
"""

from __future__ import annotations

import os
from pathlib import Path

from storage.control import ControlDB, Run, process_alive

LOG_FILE = "train.log"


def died_before_registering(run: Run) -> bool:
    """A queued run whose process is gone: it can no longer register, so it has failed."""
    return run.status == "queued" and bool(run.pid) and not process_alive(run.pid, run.proc_start)


def run_status(db: ControlDB, run: Run) -> str:
    """The status to show, derived without writing: `failed` for a run that died before registering,
    else the store's live status (`lost`, `stale` for a running one whose process or heartbeat is gone)."""
    return "failed" if died_before_registering(run) else db.run_status(run)


def dead_run_message(run: Run) -> str:
    """Why a run that died before registering failed: its log's last lines."""
    return (tail(Path(run.out_dir) / LOG_FILE, 5) or "the process exited before it registered")[-1000:]


def reconcile_dead_runs(db: ControlDB) -> list[str]:
    """Store `failed` (with the log's tail as message) for every run that died before registering;
    returns their ids. The only write of this module."""
    dead = [r for r in db.list_runs() if died_before_registering(r)]
    for r in dead:
        db.update_run(r.id, status="failed", message=dead_run_message(r))
    return [r.id for r in dead]


def tail(path: str | Path, lines: int = 40, max_bytes: int = 64_000) -> str:
    """The last `lines` lines of a (possibly growing) text file; "" when it does not exist."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    return "\n".join(text.splitlines()[-lines:])


def progress(
    step: int | None, max_steps: int, step_seconds: list[float], window: int = 10
) -> tuple[float, float | None]:
    """(fraction done, seconds left) from the mean of the last `window` step durations; None before a step."""
    if not step or max_steps <= 0:
        return 0.0, None
    done = min(step / max_steps, 1.0)
    recent = [s for s in step_seconds[-window:] if s == s and s > 0]  # drop NaN and zeros
    if not recent:
        return done, None
    return done, max(max_steps - step, 0) * sum(recent) / len(recent)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA —"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"ETA {h}h{m:02d}m" if h else f"ETA {m}m{s:02d}s"

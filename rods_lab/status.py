"""A run's status as the app and `rods runs list` show it, read-only, plus the one explicit write that
records dead runs as failed; the state a run is counted and named in on Home (`run_state`); the log's tail
and progress/ETA for the run cards.

A run launched from the app is registered `queued` with its pid; the trainer then registers itself as
`running`. A process that dies before registering (bad model path, crash at import) is shown `failed`
from its pid and start time with no write at all; `reconcile_dead_runs` stores that verdict, called by
the Home page once per refresh and by `rods runs list`, never from a cached view. Process liveness is read
through rods_lab/processes.py; nothing here reaps or signals.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rods_lab.processes import process_alive
from storage.build_progress import BuildProgress
from storage.control import ControlDB, Run

LOG_FILE = "train.log"


def died_before_registering(run: Run) -> bool:
    """A queued run whose process is gone: it can no longer register, so it has failed."""
    return run.status == "queued" and bool(run.pid) and not process_alive(run.pid, run.proc_start)


def run_status(db: ControlDB, run: Run | str, heartbeat_timeout_s: float = 120.0) -> str:
    """The status to show, derived without writing or reaping: `failed` for a run that died before
    registering; for a `running` one, `lost` when its process is gone (or its pid was reused) and `stale`
    when it lives but its heartbeat is older than the timeout; else the stored status. `run`: a row or an id."""
    if isinstance(run, str):
        found = db.get_run(run)
        if found is None:
            raise KeyError(f"no run {run!r}")
        run = found
    if died_before_registering(run):
        return "failed"
    if run.status != "running":
        return run.status
    if not process_alive(run.pid, run.proc_start):
        return "lost"
    beat = run.heartbeat_at
    if beat is None or datetime.now(UTC) - beat > timedelta(seconds=heartbeat_timeout_s):
        return "stale"
    return "running"


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


# Every state a run can be in, in the order Home counts them: state -> (counter label, icon). A run's card
# shows the icon of the state it is counted in and a word that starts with the counter's label.
STATES: dict[str, tuple[str, str]] = {
    "building": ("Building", ":violet[:material/construction:]"),
    "waiting": ("Waiting for a build", ":gray[:material/hourglass_top:]"),
    "starting": ("Starting", ":blue[:material/rocket_launch:]"),
    "running": ("Running", ":green[:material/play_circle:]"),
    "queued": ("Queued", ":gray[:material/schedule:]"),
    "stale": ("Stale", ":orange[:material/hourglass_empty:]"),
    "finished": ("Finished", ":blue[:material/check_circle:]"),
    "failed": ("Failed", ":red[:material/error:]"),
    "stopped": ("Stopped", ":gray[:material/stop_circle:]"),
}
BUILDING_PHASES = ("tokenizer", "variants", "sft")


@dataclass(frozen=True)
class RunState:
    """What Home counts a run as (`state`, a key of STATES), the card's icon, and the card's word."""

    state: str
    icon: str
    word: str


def _state(state: str, detail: str = "") -> RunState:
    label, icon = STATES[state]
    return RunState(state, icon, label.lower() + (f": {detail}" if detail else ""))


def run_state(status: str, build: BuildProgress | None, has_steps: bool) -> RunState:
    """The one mapping from a run's shown status (`run_status`: the store's, or derived `lost`/`stale`), its
    model build (build.json, None when it wrote none) and whether a step was logged, to the state it is
    counted in and the card's icon and word.

    Before the first step a live run is building the model, waiting for another run's build of the same
    folder, or starting (the model is there: the policy and the trainer load, the step-0 evaluation runs).
    A process gone without recording an outcome (`lost`) and a failed build count as failed; `stale` (alive,
    no heartbeat for the store's timeout) counts as stale in every phase."""
    phase = build.phase if build is not None and not has_steps else None
    if status == "lost":
        return _state("failed", "the process ended without recording an outcome")
    if status == "failed":
        return _state("failed", "model build" if phase == "failed" else "")
    if status in ("finished", "stopped", "stale"):
        return _state(status)
    if phase == "failed":
        return _state("failed", "model build")
    if status in ("queued", "running") and phase == "waiting":
        return _state("waiting")
    if status in ("queued", "running") and phase in BUILDING_PHASES:
        return _state("building", "the model")
    if status == "queued":
        return _state("queued")
    if status == "running":
        return _state("running") if has_steps else _state("starting")
    return _state("failed", f"unknown status {status!r}")


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

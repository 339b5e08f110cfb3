"""The app's hold on training processes: whether a run's process lives, reaping exited children, and signals.

The store only records a run's pid and start time (storage/control.py); everything that looks at or acts on a
process is here, through psutil, so it runs on Linux and macOS alike. Reads (`process_alive`) change nothing;
`reap_children` and `stop_run` say in their names that they act.
"""

from __future__ import annotations

import os
import signal

import psutil

from rods_core.process_identity import same_process
from storage.control import ControlDB


def process_alive(pid: int | None, start: int | None) -> bool:
    """True when `pid` runs and is the process that started at `start`; a zombie is not alive. Reads only."""
    return same_process(pid, start)


def reap_children(pids: set[int]) -> list[int]:
    """Collect those of `pids` that are this process's exited children (runs it launched that ended and that
    nobody waits for), so they stop holding their pid and process-table slot; returns the reaped pids. Only
    the given pids: another exited child keeps its status for whoever waits for it. The one call that reaps."""
    reaped = []
    for child in psutil.Process().children():
        try:
            if child.pid not in pids or child.status() != psutil.STATUS_ZOMBIE:
                continue
            if os.waitpid(child.pid, os.WNOHANG)[0] == child.pid:
                reaped.append(child.pid)
        except (psutil.NoSuchProcess, ChildProcessError):
            continue
    return reaped


def signal_process(pid: int | None, start: int | None, sig: int = signal.SIGTERM) -> bool:
    """Send `sig` to the run's process group (a launched run leads its own session), or to the process alone
    when it leads no group of its own; nothing when the process is gone or its pid was reused. True if sent."""
    if not process_alive(pid, start):
        return False
    try:
        group = os.getpgid(pid)
        if group == pid and group != os.getpgrp():
            os.killpg(group, sig)
        else:  # not a group leader (or our own group): signal only the process
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop_run(
    db: ControlDB, run_id: str, sig: int = signal.SIGTERM, by: str | None = None, signed: str | None = None
) -> bool:
    """Signal the run's process group and record the run stopped (`by`: who asked; `signed`: as the audit chain
    records them); True if a signal went."""
    run = db.get_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r}")
    sent = signal_process(run.pid, run.proc_start, sig)
    db.mark_stopped(run_id, by=by, signed=signed)
    return sent

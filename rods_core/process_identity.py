"""A process's identity: its pid and its start time, so a reused pid is never taken for the run that had it.

Read through psutil (Linux, macOS, Windows), never by parsing /proc by hand. Reads only: liveness as the app
shows it, reaping and signals live in rods_lab/processes.py.
"""

from __future__ import annotations

import psutil

# psutil derives a Linux start time from the boot time, which moves when the wall clock is adjusted: two reads
# of one process may differ by up to a second. A pid reused within a second of the run's start is not a risk.
START_TOLERANCE_MS = 1000


def process_start(pid: int | None) -> int | None:
    """Start time of a live (non-zombie) process in milliseconds since the epoch, or None when it is gone."""
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return None
        return round(proc.create_time() * 1000)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def same_process(pid: int | None, start: int | None) -> bool:
    """True when `pid` runs and is the process that started at `start` (not a reused pid). Reads only."""
    now = process_start(pid)
    return now is not None and start is not None and abs(now - start) <= START_TOLERANCE_MS

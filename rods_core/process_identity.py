"""A process's identity: its pid and its start time, so a reused pid is never taken for the run that had it.

Read through psutil (Linux, macOS, Windows), never by parsing /proc by hand. Reads only: liveness as the app
shows it, reaping and signals live in rods_lab/processes.py.
"""

from __future__ import annotations

import psutil

# Start times are kept in hundredths of a second since boot (Linux's clock ticks, so a value stored by the
# /proc reading of earlier versions still matches): a 32-bit column holds them for 248 days of uptime, where
# ms since the epoch would overflow it. Two reads may differ by float rounding, hence a tolerance of 2.
START_TOLERANCE = 2


def process_start(pid: int | None) -> int | None:
    """Start time of a live (non-zombie) process in hundredths of a second since boot, or None when gone."""
    if not pid:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return None
        return round((proc.create_time() - psutil.boot_time()) * 100)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def same_process(pid: int | None, start: int | None) -> bool:
    """True when `pid` runs and is the process that started at `start` (not a reused pid). Reads only."""
    now = process_start(pid)
    return now is not None and start is not None and abs(now - start) <= START_TOLERANCE

"""Re-verification of a hand-edited task (the app's editor, the trainer's `edit` decisions).

An edit is held to the synthesis pipeline's Execute and Critique checks: its ground truth replays with
no failing call and passes the checker, it changes state or returns information, it keeps the structure
of the task it was derived from, and it copies no test-split task and no other task in the pool.
"""

from __future__ import annotations

from rods_core.benchmarks.bfcl.seeds import leak_guard
from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.synth.critique import replays_clean, same_structure
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.synthesis import StageError


def verify_task(task: Task, parent: Task | None = None, pool_keys: set[str] | None = None) -> tuple[bool, str]:
    """(True, "verified") or (False, the first reason it fails)."""
    leak = leak_guard().reason(task)
    if leak:
        return False, f"test-split leak: {leak}"
    if pool_keys and task.content_key() in pool_keys:
        return False, "duplicate: the pool already holds a task with the same content"
    try:
        replays_clean(task, stage="execute")
        if parent is not None:
            same_structure(task, signature(parent))
    except StageError as e:
        return False, f"{e.stage}: {e.reason}"
    return True, "verified"

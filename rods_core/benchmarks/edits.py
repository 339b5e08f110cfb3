"""A hand-edited task of any benchmark (the Review editor, the trainer's `edit` decisions), read as hostile
input: parsed as the benchmark's task model, then held to its leak guard, the pool's duplicates and its own
verifier (the ground-truth path executed in a fresh environment)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.scratch import scratch_folder


def parse_edit(bench: Benchmark, record: Any) -> Any:
    """The record as a task of the benchmark; ValueError naming each field that fails its schema."""
    try:
        return bench.task_type.model_validate(record)
    except ValidationError as e:
        why = "; ".join(f"{'.'.join(map(str, x['loc'])) or '(record)'}: {x['msg']}" for x in e.errors())
        raise ValueError(f"not a {bench.name} task: {why}") from None


def verify_edit(
    bench: Benchmark,
    task: Any,
    pool_keys: set[str] | frozenset[str] = frozenset(),
    parent: Any = None,
    scratch: Path | None = None,
) -> tuple[bool, str]:
    """The one check of an edited task, the trainer's and the app's: (True, "verified") or (False, the first
    reason it fails): test-split leak, a duplicate of a pool task (`pool_keys`: their content keys), or the
    benchmark's `edit_problem` (BFCL multi-turn: a clean replay keeping the structure of `parent`, the edited
    task's parent or itself; the others: the reference policy to full marks), played inside `scratch` (the
    trainer's run scratch folder; the system's temporary folder for the app, which never writes a run's)."""
    leak = bench.leak_reason(task)
    if leak:
        return False, f"test-split leak: {leak}"
    if task.content_key() in pool_keys:
        return False, "duplicate: the pool already holds a task with the same content"
    with scratch_folder(scratch, "rods_edit_verify_") as tmp:
        try:  # hostile content may break the environment itself, not only fail its checks
            problem = bench.edit_problem(task, parent, tmp)
        except Exception as e:  # noqa: BLE001 - a task that breaks its verifier is refused with the reason
            return False, f"verification raised {type(e).__name__}: {e}"
    return (False, problem) if problem else (True, "verified")

"""Run ids and task ids by one rule: ASCII letters, digits and `_`, at most 128 characters.

Why this rule: a run id becomes a folder name, so it may hold no separator, `..` or control character;
a task id becomes part of a Python name in bfcl-eval's own executor (it `eval()`s
`<model>_<task id>_<class>_instance.<method>(...)`, after mapping `-./:` to `_`), so anything outside
`[A-Za-z0-9_]` either breaks every call ("invalid decimal literal") or makes two ids share one cached
instance. BFCL's own ids (`multi_turn_base_12`) follow the rule; derived ids append `_v<digest>`
(a synthesized variant) or `_e<n>` (a researcher's edit) and stay within the length bound.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Container

from rods_core.inputs import DoorError

MAX_ID_LEN = 128
ID_RULE = f"1 to {MAX_ID_LEN} characters from A-Z, a-z, 0-9 and _ (no separators, dots, dashes or spaces)"
_ID = re.compile(r"[A-Za-z0-9_]+", re.ASCII)
_NOT_ID = re.compile(r"[^A-Za-z0-9_]+", re.ASCII)


class IdError(DoorError):
    """An identifier breaks the rule; the message names the id (escaped) and the rule."""


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LEN and _ID.fullmatch(value) is not None


def _check(value: object, kind: str) -> str:
    if not is_valid_id(value):
        shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else repr(value[:80]) + "…"
        raise IdError(f"{kind} {shown} is not a valid id: use {ID_RULE}")
    return value  # type: ignore[return-value]


def check_task_id(task_id: object) -> str:
    """The id itself, or IdError naming it and the rule."""
    return _check(task_id, "task id")


def check_run_id(run_id: object) -> str:
    """The id itself, or IdError naming it and the rule (a run id is a folder under the runs folder)."""
    return _check(run_id, "run id")


def _bounded(stem: str, suffix: str) -> str:
    """stem + suffix, the stem cut so the whole fits MAX_ID_LEN (the suffix keeps the id unique)."""
    return stem[: MAX_ID_LEN - len(suffix)] + suffix


def new_run_id(name: str) -> str:
    """`<yyyymmdd>_<hhmmss>_<name>_<4 hex>`; characters of `name` outside the rule become `_`."""
    clean = _NOT_ID.sub("_", name).strip("_") or "run"
    return check_run_id(_bounded(f"{time.strftime('%Y%m%d_%H%M%S')}_{clean}", f"_{os.urandom(2).hex()}"))


def variant_id(parent_id: str, digest: str) -> str:
    """A synthesized variant's id: the parent's id + `_v` + the first 8 characters of its content digest."""
    tag = _NOT_ID.sub("", digest)[:8]
    if not tag:
        raise IdError(f"variant digest {digest!r} holds no usable character")
    return check_task_id(_bounded(check_task_id(parent_id), f"_v{tag}"))


def edit_id(task_id: str, n: int) -> str:
    """The id of the n-th edit of a task: the task's id + `_e<n>`."""
    if n < 1:
        raise IdError(f"edit number must be at least 1, got {n}")
    return check_task_id(_bounded(check_task_id(task_id), f"_e{n}"))


def next_edit_id(task_id: str, taken: Container[str]) -> str:
    """The first `edit_id(task_id, n)` not in `taken` (records are immutable per id)."""
    n = 1
    while edit_id(task_id, n) in taken:
        n += 1
    return edit_id(task_id, n)

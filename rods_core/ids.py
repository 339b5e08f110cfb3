"""Run ids and task ids by one rule: ASCII letters, digits and `_`, at most 128 characters.

Why this rule: a run id becomes a folder name, so it may hold no separator, `..` or control character;
a task id becomes part of a Python name in bfcl-eval's own executor (it `eval()`s
`<model>_<task id>_<class>_instance.<method>(...)`, after mapping `-./:` to `_`), so anything outside
`[A-Za-z0-9_]` either breaks every call ("invalid decimal literal") or makes two ids share one cached
instance. BFCL's own ids (`multi_turn_base_12`) follow the rule. A synthesized variant is
`<root>_g<generation>_<8 hex of its content digest>` (`multi_turn_base_38_g7_5eed7155`: seventh generation
from seed multi_turn_base_38), so an id stays short however deep the lineage; the lineage itself is the
provenance's parent chain. A researcher's edit appends `_e<n>`. Every derived id stays within the bound.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Container

from rods_core.config.inputs import DoorError

MAX_ID_LEN = 128
ID_RULE = f"1 to {MAX_ID_LEN} characters from A-Z, a-z, 0-9 and _ (no separators, dots, dashes or spaces)"
_ID = re.compile(r"[A-Za-z0-9_]+", re.ASCII)
_NOT_ID = re.compile(r"[^A-Za-z0-9_]+", re.ASCII)
# <root>[_g<generation>_<tag>][_e<n>...]: the shortest root that leaves a variant suffix and edits
_LINEAGE = re.compile(r"(?P<root>.+?)(?:_g(?P<gen>[0-9]+)_[A-Za-z0-9]{1,8})?(?:_e[0-9]+)*", re.ASCII)


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


def lineage_of(task_id: str) -> tuple[str, int]:
    """(root id, generation) read from an id: a seed is its own root at generation 0; an edit keeps the
    generation of what it edited."""
    m = _LINEAGE.fullmatch(task_id)
    return (m["root"], int(m["gen"] or 0)) if m else (task_id, 0)


def variant_id(parent_id: str, digest: str) -> str:
    """A synthesized variant's id: its root's id + `_g<parent's generation + 1>_` + the first 8 characters of
    its content digest."""
    tag = _NOT_ID.sub("", digest)[:8]
    if not tag:
        raise IdError(f"variant digest {digest!r} holds no usable character")
    root, generation = lineage_of(check_task_id(parent_id))
    return check_task_id(_bounded(root, f"_g{generation + 1}_{tag}"))


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

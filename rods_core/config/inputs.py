"""Input-reading primitives: UTF-8 text, JSON and YAML values with a nesting bound, JSONL lines and output
paths, each refused with `file:line: field: reason` (a DoorError); a leaf that imports nothing from rods_core.

The doors built on them live with what they check: task files (rods_core.benchmarks.task_files), model folders
(rods_core.policy.model_folders) and a training run's pre-flight (rods_core.preflight). Nothing here writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# BFCL's deepest record nests 12 levels (a file system's folders); 64 leaves room and stops hostile input
# long before Python's recursion limit (json, yaml, deepcopy and pydantic all recurse).
MAX_DEPTH = 64
_BRACKETS = re.compile(r"[\[\]{}]")


class DoorError(ValueError):
    """Input refused at a door; the message names the source, line and field where they are known."""


# ----- text, JSON, YAML --------------------------------------------------------------------------------
@contextmanager
def filesystem_door(p: Path, what: str) -> Iterator[None]:
    """OS errors on a user-given path (no such file, a NUL byte, a name too long, no access) as DoorError."""
    if "\x00" in str(p):  # pathlib reports such a path as missing; open() would raise ValueError later
        raise DoorError(f"{str(p)[:120]!r}: cannot use it as a {what} (the path holds a NUL byte)")
    try:
        yield
    except DoorError:
        raise
    except FileNotFoundError:
        raise DoorError(f"{p}: no such {what}") from None
    except (OSError, ValueError) as e:
        shown = repr(str(p)[:120]) if "\x00" in str(p) or len(str(p)) > 120 else str(p)
        raise DoorError(f"{shown}: cannot use it as a {what} ({getattr(e, 'strerror', None) or e})") from None


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """A regular file's bytes, or DoorError saying why it cannot be read (missing, a folder, no access)."""
    p = Path(path)
    with filesystem_door(p, what):
        if p.is_dir():
            raise DoorError(f"{p}: is a folder, not a {what}")
        return p.read_bytes()


def _bad_byte(data: bytes, e: UnicodeDecodeError) -> tuple[int, str]:
    """(line, reason) for the first byte that is not UTF-8."""
    line = data.count(b"\n", 0, e.start) + 1
    col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    return line, f"byte 0x{data[e.start]:02x} at column {col} is not UTF-8; save the file as UTF-8"


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading BOM dropped), or DoorError naming the line and column of the first bad byte."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line, why = _bad_byte(data, e)
        raise DoorError(f"{source}:{line}: (encoding): {why}") from None


def read_text(path: str | Path, what: str = "file") -> str:
    return decode(read_bytes(path, what), str(path))


def check_value(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """The value itself if it nests at most `max_depth` containers and every string encodes as UTF-8.

    Iterative and memoised by identity, so YAML aliases (a shared node seen many times) cost one visit.
    """
    stack, seen = [(value, 1)], {}
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise DoorError(f"a string holds an unpaired surrogate ({v[:40]!r}); use real characters") from None
        elif isinstance(v, (dict, list, tuple)):
            if depth > max_depth:
                raise DoorError(f"nested deeper than {max_depth} levels")
            if seen.get(id(v), 0) >= depth:
                continue
            seen[id(v)] = depth
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
            if isinstance(v, dict):
                stack.extend((k, depth) for k in v if isinstance(k, str))
    return value


def json_value(text: str) -> Any:
    """One JSON document, checked by check_value; DoorError with the parser's reason otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise DoorError(f"not valid JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise DoorError(f"not valid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # e.g. an integer past Python's 4,300-digit conversion limit
        raise DoorError(f"not valid JSON: {e}") from None
    return check_value(value)


def _at(where: str | None, msg: str) -> str:
    return f"{where}: {msg}" if where else msg


def _flow_depth(text: str) -> int:
    """The deepest nesting of [ and { (quotes ignored: an over-count only refuses absurd input sooner)."""
    depth = peak = 0
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        peak = max(peak, depth)
    return peak


def yaml_value(text: str, source: str | None = None) -> Any:
    """One YAML document (safe loader), checked by check_value; DoorError naming `source`:line otherwise."""
    if _flow_depth(text) > MAX_DEPTH:  # PyYAML takes seconds to reach its recursion limit on deep [[[...
        raise DoorError(_at(source, f"nested deeper than {MAX_DEPTH} levels"))
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DoorError(
            _at(f"{source}:{mark.line + 1}" if source and mark else source, f"not valid YAML ({problem})")
        ) from None
    except RecursionError:
        raise DoorError(_at(source, f"nested deeper than {MAX_DEPTH} levels")) from None
    try:
        return check_value(value)
    except DoorError as e:
        raise DoorError(_at(source, str(e))) from None


@dataclass(frozen=True)
class Bad:
    """A line that could not be parsed: the field (or "(json)"/"(encoding)") and the reason."""

    field: str
    reason: str


def jsonl_lines(data: bytes, source: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value or Bad) for every non-blank line of a JSONL file's bytes."""
    for ln, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as e:
            yield ln, Bad("(encoding)", _bad_byte(raw, e)[1])
            continue
        try:
            yield ln, json_value(text)
        except DoorError as e:
            yield ln, Bad("(json)", str(e))


# ----- paths -------------------------------------------------------------------------------------------
def _writable_ancestor(p: Path, what: str) -> None:
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise DoorError(f"{p}: cannot create the {what}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DoorError(f"{p}: cannot create the {what}: no write access to {parent}")


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """A path a file may be written to: not a folder, and its folder can be created."""
    p = Path(path)
    with filesystem_door(p, what):
        if p.is_dir():
            raise DoorError(f"{p}: is a folder; give a file name, e.g. {p / 'out.jsonl'}")
        if p.exists() and not p.is_file():
            raise DoorError(f"{p}: exists and is not a regular file")
        _writable_ancestor(p, what)
    return p


def check_output_dir(path: str | Path, what: str = "output folder") -> Path:
    """A path a folder may be written to: not a file, and creatable."""
    p = Path(path)
    with filesystem_door(p, what):
        if p.exists() and not p.is_dir():
            raise DoorError(f"{p}: is a file; give a folder")
        if not p.exists():
            _writable_ancestor(p, what)
    return p

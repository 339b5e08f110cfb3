"""Where the argument values of a task come from, and how to find, follow and replace them.

Pure helpers shared by the synthesis stages. An argument value is *said* (the user states it: it is in
the user text so far, the rule `signature.py` uses for dependency edges), *dep* (not said, and found in
an earlier call's result: the agent must read it there), or *fixed* (booleans, defaults, values the
agent infers from paraphrase, e.g. "Los Angeles" -> 'LAX'). Plan resamples said values, re-derives dep
values from the new results by following the same path in the result, and keeps fixed ones.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from rods_core.benchmarks.bfcl.signature import _values

Kind = Literal["said", "dep", "fixed"]
INFORMATIVE_SKILLS = frozenset({"read", "compute", "navigate"})  # calls whose point is the data they return


# ----- mentions in user text -------------------------------------------------------------------------
def _number_forms(v: int | float) -> list[str]:
    forms: list[str] = []
    if isinstance(v, float) and not v.is_integer():
        forms += [repr(v), f"{v:,}"]
    else:
        n = int(v)
        forms += [f"{n:,}", str(n)]
        if isinstance(v, float):
            forms += [repr(v), f"{v:.2f}", f"{v:,.2f}"]
    return sorted(set(forms), key=len, reverse=True)


def mention_pattern(value: Any, exact: bool = False) -> re.Pattern | None:
    """A regex matching where the user text states `value` as a whole word or number, or None.

    `exact` matches the value's own case only: substitution must not turn "Zeta Corp" into "NEPT Corp".
    """
    if isinstance(value, (str, int, float)):
        return _cached_pattern(type(value), value, exact)
    return _pattern(value, exact)


@lru_cache(maxsize=65536)
def _cached_pattern(_type: type, value: Any, exact: bool) -> re.Pattern | None:
    return _pattern(value, exact)  # keyed by type too: 1, 1.0 and True hash alike


def _pattern(value: Any, exact: bool) -> re.Pattern | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        alts = "|".join(re.escape(f) for f in _number_forms(value))
        return re.compile(rf"(?<![\w.,])(?:{alts})(?![\w]|[.,]\d)")
    s = str(value).strip()
    if len(s) < 2:
        return None
    return re.compile(rf"(?<![\w]){re.escape(s)}(?![\w])", 0 if exact else re.IGNORECASE)


def is_mentioned(text: str, value: Any, exact: bool = False) -> bool:
    pat = mention_pattern(value, exact)
    return bool(pat and pat.search(text))


def render_like(matched: str, new: Any) -> str:
    """Write `new` in the style the text used for the old value (thousands separators, decimals)."""
    if isinstance(new, bool) or not isinstance(new, (int, float)):
        return str(new)
    if isinstance(new, float) and not new.is_integer():
        return f"{new:,}" if "," in matched else repr(new)
    n = int(new)
    if "." in matched:
        decimals = len(matched.rsplit(".", 1)[1])
        return f"{new:,.{decimals}f}" if "," in matched else f"{new:.{decimals}f}"
    return f"{n:,}" if "," in matched else str(n)


def substitute(text: str, mapping: list[tuple[Any, Any]]) -> tuple[str, int]:
    """Replace every stated occurrence of each old value by its new value, all at once.

    Longer matches win over shorter overlapping ones, so 'report_2024.txt' is not rewritten through
    an inner 'report'. Returns the new text and the number of replacements.
    """
    spans: list[tuple[int, int, str]] = []
    for old, new in mapping:
        if old == new:
            continue
        pat = mention_pattern(old, exact=True)
        if pat is None:
            continue
        for m in pat.finditer(text):
            spans.append((m.start(), m.end(), render_like(m.group(0), new)))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out, pos, n = [], 0, 0
    for start, end, rep in spans:
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(rep)
        pos, n = end, n + 1
    out.append(text[pos:])
    return "".join(out), n


# ----- structured results ----------------------------------------------------------------------------
def parse_result(result: str) -> Any:
    """A result string back as data: JSON, else a Python literal (lists are str()-ed), else the text."""
    try:
        return json.loads(result)
    except (json.JSONDecodeError, ValueError):
        pass
    try:
        return ast.literal_eval(result)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return result


def looks_failed(result: str) -> str | None:
    """Why a successful-looking call actually failed ({"error": ...}, status False), or None."""
    data = parse_result(result)
    if isinstance(data, dict):
        for key, val in data.items():
            k = str(key).lower()
            if "error" in k and val:
                return f"result reports {key}: {str(val)[:80]}"
            if k.endswith("status") and val is False:
                return f"result reports {key}=False"
    if isinstance(data, str) and data.lower().startswith(("error", "failed")):
        return f"result says {data[:80]}"
    return None


def returns_nothing(result: str) -> bool:
    """Whether a call's result holds no data: empty, None, or a dict of empty fields ({"matching_lines": []})."""
    data = parse_result(result)
    if isinstance(data, dict) and data:
        return all(v in ("", None) or v == [] or v == {} for v in data.values())
    return data in ("", "None", None) or data == [] or data == {}


Path = tuple  # keys / list indices into a parsed result; a trailing ("/", i) picks a path component


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return isinstance(a, str) and isinstance(b, str) and a == b


def _rounded_to(leaf: Any, value: Any) -> int | None:
    """The number of decimals d (0-2) with round(leaf, d) == value, for a value the agent rounded."""
    if isinstance(leaf, bool) or isinstance(value, bool):
        return None
    if not (isinstance(leaf, float) and isinstance(value, (int, float))):
        return None
    for d in (0, 1, 2):
        if round(leaf, d) == value and leaf != value:
            return d
    return None


def locate(data: Any, value: Any, prefix: Path = ()) -> Path | None:
    """The first path at which `value` sits in a parsed result (a leaf, one part of a '/' path, or a
    number rounded from a leaf)."""
    if _same(data, value):
        return prefix
    d = _rounded_to(data, value)
    if d is not None:
        return (*prefix, ("round", d, type(value).__name__))
    if isinstance(data, str) and isinstance(value, str) and "/" in data:
        parts = data.split("/")
        if value in parts:
            return (*prefix, ("/", parts.index(value)))
    if isinstance(data, dict):
        for k, v in data.items():
            p = locate(v, value, (*prefix, k))
            if p is not None:
                return p
    if isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            p = locate(v, value, (*prefix, i))
            if p is not None:
                return p
    return None


def follow(old: Any, new: Any, path: Path) -> tuple[bool, Any]:
    """Read `path` in `new`; lists crossed on the way must have the length they had in `old`.

    The length rule keeps "copy all the files you found" meaning the same number of files.
    """
    for step in path:
        if isinstance(step, tuple) and step[:1] == ("round",):
            if isinstance(new, bool) or not isinstance(new, (int, float)):
                return False, None
            r = round(float(new), step[1])
            return True, (int(r) if step[2] == "int" else r)
        if isinstance(step, tuple) and step[:1] == ("/",):
            if not isinstance(new, str):
                return False, None
            parts = new.split("/")
            if not isinstance(old, str) or len(parts) != len(old.split("/")):
                return False, None
            return True, parts[step[1]]
        if isinstance(new, dict) and isinstance(old, dict):
            if step not in new:
                return False, None
            old, new = old.get(step), new[step]
        elif isinstance(new, (list, tuple)) and isinstance(old, (list, tuple)):
            if len(new) != len(old) or not isinstance(step, int) or step >= len(new):
                return False, None
            old, new = old[step], new[step]
        else:
            return False, None
    return True, new


def resolve_dep(old_result: str, new_result: str, value: Any, path: Path | None) -> tuple[bool, Any]:
    """The counterpart in `new_result` of `value`, which sat at `path` in `old_result`.

    Unchanged result: the value stands. No path (the value was a line of text or a key, not a leaf):
    it stands if the new result still contains it. Otherwise follow the path (see `follow`).
    """
    if old_result == new_result:
        return True, value
    if path is None:
        return (True, value) if str(value) in new_result else (False, None)
    return follow(parse_result(old_result), parse_result(new_result), path)


def leaf_changes(old: Any, new: Any) -> list[tuple[Any, Any]]:
    """(old, new) for each leaf that changed between two results of the same shape (values of 2+ chars)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [c for k in old if k in new for c in leaf_changes(old[k], new[k])]
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and len(old) == len(new):
        return [c for a, b in zip(old, new, strict=True) for c in leaf_changes(a, b)]
    if isinstance(old, (str, int, float)) and not isinstance(old, bool) and type(old) is type(new):
        if old != new and len(str(old)) >= 2:
            return [(old, new)]
    return []


# ----- argument provenance ---------------------------------------------------------------------------
@dataclass
class Piece:
    """One traced value inside a call's argument: the whole value, or one element of a list."""

    param: str
    index: int | None
    value: Any
    kind: Kind
    producer: int | None = None
    path: Path | None = None


@dataclass
class CallInfo:
    """A replayed ground-truth call with the provenance of its argument values."""

    index: int
    turn: int
    name: str
    kwargs: dict[str, Any]
    result: str
    pieces: list[Piece] = field(default_factory=list)
    changed_state: bool = False  # the call changed its class's public state (Execute holds variants to it)


def pieces_of(param: str, value: Any) -> list[tuple[int | None, Any]]:
    """Values worth tracing in one argument: the value itself, or the elements of a flat list."""
    if isinstance(value, list) and all(not isinstance(e, (list, dict)) for e in value):
        return [(i, e) for i, e in enumerate(value) if _values(e)]
    return [(None, value)] if _values(value) and not isinstance(value, (list, dict)) else []


def classify(value: Any, said: str, results: list[str]) -> tuple[Kind, int | None, Path | None]:
    """Said / dep / fixed for one value, by signature.py's rule (lower-case text containment)."""
    traced = _values(value)
    if not traced:
        return "fixed", None, None
    if any(t.lower() in said for t in traced):
        return "said", None, None
    for k in range(len(results) - 1, -1, -1):
        if any(t in results[k] for t in traced):
            return "dep", k, locate(parse_result(results[k]), value)
    return "fixed", None, None

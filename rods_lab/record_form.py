"""A task record as the fields of an edit form, and the form's texts back as a record: Review's Fix & Accept for
a benchmark whose tasks have no editor of their own (BFCL v4 memory: its question, accepted answers and each
prerequisite conversation's user turns), read from the record's shape, not from the benchmark's name.

A text field is one text area; a list of one-line texts is one area, an item a line (kept as typed; blank lines dropped); a
list of such lists is one area per item (memory's conversations: their count is kept, each turn a line);
anything else (numbers, mappings, multi-line items) is its JSON. The id and provenance are the task's own and
are kept. The record returned is then parsed and verified as any edit is (rods_core.benchmarks.edits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from rods_core.benchmarks.edits import parse_edit
from rods_core.benchmarks.protocols import Benchmark
from rods_core.config.inputs import DoorError, json_value

Kind = Literal["text", "lines", "blocks", "json"]
KEPT = ("id", "provenance")  # the edit is of this task, by this lineage


@dataclass(frozen=True)
class FormField:
    """One field of the form: its record key, how it is edited, and its text (blocks: one text per item)."""

    name: str
    kind: Kind
    value: str | list[str]


def _one_line_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and "\n" not in v for v in value)


def field_kind(value: Any) -> Kind:
    """How a record value is edited (see the module docstring)."""
    if isinstance(value, str):
        return "text"
    if _one_line_texts(value):
        return "lines"
    if isinstance(value, list) and value and all(_one_line_texts(v) for v in value):
        return "blocks"
    return "json"


def form_fields(record: dict) -> list[FormField]:
    """The record's editable fields in the record's order, each with its text."""
    out = []
    for name, value in record.items():
        if name in KEPT:
            continue
        kind = field_kind(value)
        if kind == "text":
            text: str | list[str] = value
        elif kind == "lines":
            text = "\n".join(value)
        elif kind == "blocks":
            text = ["\n".join(v) for v in value]
        else:
            text = json_text(value)
        out.append(FormField(name, kind, text))
    return out


def json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _lines(text: str) -> list[str]:
    """A text's lines as they are (BFCL's turns keep trailing spaces), blank ones dropped."""
    return [ln for ln in text.splitlines() if ln.strip()]


def record_from_form(record: dict, texts: dict[str, str | list[str]]) -> dict:
    """The record with each edited field's text read back by its kind; the kept fields and any field the form
    did not send stay as they were. ValueError naming the field when a JSON field is not JSON or a field's
    conversations are not as many as the form showed."""
    out = dict(record)
    for f in form_fields(record):
        if f.name not in texts:
            continue
        text = texts[f.name]
        if f.kind == "text":
            out[f.name] = str(text)
        elif f.kind == "lines":
            out[f.name] = _lines(str(text))
        elif f.kind == "blocks":
            if not isinstance(text, list) or len(text) != len(f.value):
                raise ValueError(f"{f.name}: the edit must keep its {len(f.value)} item(s), one text area each")
            out[f.name] = [_lines(t) for t in text]
        else:
            try:
                out[f.name] = json_value(str(text))
            except DoorError as e:
                raise ValueError(f"{f.name}: {e}") from None
    return out


def edited_from_form(bench: Benchmark, original: Any, texts: dict[str, str | list[str]]) -> Any:
    """The form's texts as a task of the benchmark (`original` edited); ValueError naming the field that is
    not JSON, lost a conversation, or fails the task's schema. Verify it as any edit (views.verify_edit)."""
    return parse_edit(bench, record_from_form(original.to_record(), texts))

"""CSV that is safe to open in a spreadsheet: a cell beginning with `=`, `+`, `-`, `@`, a tab or a carriage
return is a formula to Excel, LibreOffice and Google Sheets (OWASP's "CSV injection"), so such text cells are
written with a leading single quote, which the spreadsheet shows as text. Spreadsheets also fold full-width
forms (`＝`) into their ASCII twins and skip leading blanks and invisible characters before reading a formula,
so the check is made on the text as NFKC folds it, after those. Every CSV the project writes goes through
`csv_text`; JSONL exports keep the values exact.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list of a formula's first characters


def _hidden(ch: str) -> bool:
    """A character a spreadsheet may skip before a formula: whitespace (space, LF, NBSP, ...) or an invisible
    format character (zero-width space, joiners, the byte order mark, bidirectional marks)."""
    return ch.isspace() or unicodedata.category(ch) in ("Cf", "Zs", "Zl", "Zp", "Cc")


def safe_cell(value: Any) -> Any:
    """`value` itself, unless it is text a spreadsheet could read as a formula: then `'` + value. Text starting
    with a blank or an invisible character is quoted too (what follows it is not always shown). Numbers stay
    numbers (a negative number is not text and is written as it is)."""
    if not isinstance(value, str) or not value:
        return value
    folded = unicodedata.normalize("NFKC", value)
    if _hidden(value[0]) or _hidden(folded[0]) or folded.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A header row, then one line per row (missing or None cells empty), every text cell through `safe_cell`;
    the header's names are the project's own column names."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if row.get(k) is None else safe_cell(row.get(k)) for k in columns} for row in rows)
    return out.getvalue()

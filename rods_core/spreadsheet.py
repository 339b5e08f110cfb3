"""CSV that is safe to open in a spreadsheet: a cell beginning with `=`, `+`, `-`, `@`, a tab or a carriage
return is a formula to Excel, LibreOffice and Google Sheets (OWASP's "CSV injection"), so such text cells are
written with a leading single quote, which the spreadsheet shows as text. Every CSV the project writes goes
through `csv_text`; JSONL exports keep the values exact.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list of a formula's first characters


def safe_cell(value: Any) -> Any:
    """`value` itself, unless it is text a spreadsheet would read as a formula: then `'` + value.
    Numbers stay numbers (a negative number is not text and is written as it is)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
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

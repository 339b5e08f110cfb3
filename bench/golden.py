"""Golden figures: whether two runs of the same config, made before and after a change that must not change
behaviour (a move of modules, a refactor), logged the same events, field by field.

Reads two run folders with storage.reader.RunReader and compares each listed event table, rows ordered by
every compared column, all columns but the wall-clock ones (`time`, `wall_s`, `time/*`: they measure the
machine, not the run). Floats must be bit-identical: the check is meant for two runs on one machine with one
torch build, where the same code gives the same bits. Prints, per table, identical or different with the first
differences, and exits 1 when any table differs.

Run: `python -m bench.golden RUN_A RUN_B [--tables step,eval,...] [--ignore per_task]`, e.g. two 6-step demo runs
(`rods train --config configs/demo-cpu.yaml --set grpo.max_steps=6 --set eval.every=3 --set eval.limit=4
--processes 1 --run-id ...`) made at the two commits. Imported by nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from storage.reader import RunReader

TABLES = ("step", "eval", "task_stats", "region_change", "buffer", "variant", "boundary_sample", "state_digest")
MAX_SHOWN = 5  # differences printed per table


def is_wall_clock(column: str) -> bool:
    """Columns that time the machine rather than record the run."""
    return column in ("time", "wall_s") or column.startswith("time/")


def table(run: Path, kind: str, ignore: tuple[str, ...] = ()) -> pd.DataFrame:
    """One event table of a run, wall-clock columns and `ignore` dropped, rows in a canonical order."""
    df = RunReader(run).query(f'SELECT * FROM "{kind}"')
    df = df[[c for c in df.columns if not is_wall_clock(c) and c not in ignore]]
    return df.sort_values(list(df.columns), kind="stable", na_position="first").reset_index(drop=True)


def differences(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Where two tables differ: their columns, their row counts, or (row, column, a, b) for each unequal cell
    (`cell`: floats by their bits, so 0.1 + 0.2 and 0.3 differ)."""
    if list(a.columns) != list(b.columns):
        return [f"columns: {sorted(set(a.columns) ^ set(b.columns))} in one run only"]
    if len(a) != len(b):
        return [f"rows: {len(a)} vs {len(b)}"]
    out = []
    for col in a.columns:
        for i, (x, y) in enumerate(zip(a[col].tolist(), b[col].tolist(), strict=True)):
            if cell(x) != cell(y):
                out.append(f"row {i} {col}: {x!r} vs {y!r}")
    return out


def cell(value: object) -> tuple[str, str]:
    """A value as something compared exactly: a float by its bits (float.hex), every missing value (None,
    NaN, pandas' NA) as one null, anything else by its type and repr."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ("null", "")
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, repr(value))


def compare(
    run_a: Path, run_b: Path, tables: tuple[str, ...] = TABLES, ignore: tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """Each table's differences between the two runs (an empty list: identical); `ignore`: columns left out
    (a field the change adds, which the run before it cannot have)."""
    return {kind: differences(table(run_a, kind, ignore), table(run_b, kind, ignore)) for kind in tables}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--tables", default=",".join(TABLES), help="comma-separated event kinds to compare")
    ap.add_argument("--ignore", default="", help="comma-separated columns a change adds, left out of every table")
    args = ap.parse_args(argv)
    tables = tuple(t for t in args.tables.split(",") if t)
    ignore = tuple(c for c in args.ignore.split(",") if c)
    if ignore:
        print(f"left out: {', '.join(ignore)}")
    result = compare(args.run_a, args.run_b, tables, ignore)
    for kind, diffs in result.items():
        rows = len(table(args.run_a, kind))
        print(f"{kind:16} {'identical' if not diffs else 'DIFFERENT'} ({rows} rows)")
        for d in diffs[:MAX_SHOWN]:
            print(f"    {d}")
        if len(diffs) > MAX_SHOWN:
            print(f"    ... {len(diffs) - MAX_SHOWN} more")
    return 1 if any(result.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

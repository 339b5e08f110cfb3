"""Read the control database of earlier versions (one DuckDB file: runs, decisions, seeds) as plain rows,
so storage.control can carry it over once into the current store."""

from __future__ import annotations

from pathlib import Path

TABLES = ("runs", "decisions", "seeds")


class LegacyStoreError(RuntimeError):
    """The old DuckDB control database exists but cannot be read; the message names the file and the fix."""


def read_legacy_store(path: str | Path) -> dict[str, list[dict]]:
    """Every row of the old file's tables, by table name (a table the file lacks reads as no rows)."""
    import duckdb  # only where an old file exists: opening the store stays light for every process

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        raise LegacyStoreError(
            f"{path}: cannot read the old control database to carry it over ({e}); stop any process of an "
            "earlier version that holds it, then open the store again"
        ) from None
    try:
        present = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        out = {}
        for table in TABLES:
            if table not in present:
                out[table] = []
                continue
            cur = con.execute(f'select * from "{table}"')
            names = [d[0] for d in cur.description]
            out[table] = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        return out
    finally:
        con.close()


def set_aside(path: str | Path) -> Path:
    """Rename the carried-over file (and its write-ahead log) to `<name>.migrated`; another process may have
    done it already."""
    path = Path(path)
    target = path.with_name(path.name + ".migrated")
    for src, dst in ((path, target), (Path(f"{path}.wal"), Path(f"{target}.wal"))):
        try:
            src.rename(dst)
        except FileNotFoundError:
            pass
    return target

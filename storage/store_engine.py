"""Where the control store is (a SQLite file by default, or a URL) and its engine: SQLite in WAL mode with
`BEGIN IMMEDIATE` for writes, or PostgreSQL with one advisory lock for writes."""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url

ENV_VAR = "RODS_CONTROL_DB"
STORE_FILE = "control.sqlite"
DEFAULT_DB = f"workspace/{STORE_FILE}"
WRITE_LOCK = 0x524F4453  # PostgreSQL advisory lock key of the store's writers ("RODS")


def store_target(workspace: str | Path) -> str | Path:
    """The store a workspace uses: $RODS_CONTROL_DB (a file path or a URL) when set, else
    `<workspace>/control.sqlite`."""
    return os.environ.get(ENV_VAR) or Path(workspace) / STORE_FILE


def resolve_store(target: str | Path | None = None) -> tuple[str, Path | None]:
    """(SQLAlchemy URL, SQLite file or None) of `target`, else $RODS_CONTROL_DB, else the default file.

    A URL (`sqlite:///path`, `postgresql+psycopg://user@host/db`) is used as it is; anything else is a
    SQLite file path. A path to an old `.duckdb` store means the `.sqlite` file beside it (the old one is
    carried over when the store opens)."""
    raw = str(target or os.environ.get(ENV_VAR) or DEFAULT_DB)
    if "://" in raw:
        url = make_url(raw)
        if url.get_backend_name() != "sqlite":
            return raw, None
        if not url.database or url.database == ":memory:":
            raise ValueError(f"control store {raw!r}: give a SQLite file (sqlite:///path/control.sqlite)")
        path = Path(url.database)
    else:
        path = Path(raw)
    if path.suffix == ".duckdb":
        path = path.with_suffix(".sqlite")
    return f"sqlite:///{path.resolve()}", path


def _set_wal(dbapi_conn, busy_timeout_s: float) -> None:
    """Put the file in WAL mode (kept in the file, so later opens only read it). Switching needs the file to
    itself, and SQLite answers "database is locked" at once, without its busy handler, while another process
    opens the same new file: retried here until the busy timeout."""
    deadline, delay = time.monotonic() + busy_timeout_s, 0.005
    while True:
        try:
            if dbapi_conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                dbapi_conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.1)


def _sqlite_engine(url: str, busy_timeout_s: float) -> Engine:
    """Pooled connections in autocommit at the driver, so the transaction's BEGIN is ours to choose."""
    engine = create_engine(url, connect_args={"timeout": busy_timeout_s, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None
        _set_wal(dbapi_conn, busy_timeout_s)

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("rods_write") else "BEGIN")

    return engine


def _postgres_engine(url: str, busy_timeout_s: float) -> Engine:
    engine = create_engine(url, pool_pre_ping=True)

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        if conn.get_execution_options().get("rods_write"):
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{int(busy_timeout_s * 1000)}ms'")
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")

    return engine


def store_engine(url: str, sqlite: bool, busy_timeout_s: float) -> Engine:
    """The engine of a store `resolve_store` named; a write transaction is one begun on
    `engine.execution_options(rods_write=True)`."""
    return _sqlite_engine(url, busy_timeout_s) if sqlite else _postgres_engine(url, busy_timeout_s)

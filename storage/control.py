"""Control database: runs, curation decisions and the seed catalog (SQLModel over one DuckDB file).

DuckDB locks its file per process, so every operation opens a connection (NullPool), does its work in
one short transaction and closes; an operation that meets another process's lock (or a concurrent
update in this process) is retried with backoff for up to `lock_timeout_s`. Decisions are delivered
exactly once: `claim_decisions` moves pending rows to `claimed` in one UPDATE ... RETURNING, and
`mark_decision` only changes a claimed/pending row, so a second marker gets False.
Departure from the brief: a `claimed` status sits between pending and applied/refused.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from sqlalchemy import Column, DateTime, Integer, Sequence, event, inspect, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from sqlmodel import Field, Session, SQLModel, create_engine, select

from rods_core.tasks import Task, parse_record

DEFAULT_DB = "workspace/control.duckdb"
RUN_STATUSES = ("queued", "running", "finished", "failed", "stopped")
ACTIONS = ("approve", "reject", "edit", "reseed")
T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


def _tz_field() -> Any:
    return Field(default=None, sa_column=Column(DateTime(timezone=True)))


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    id: str = Field(primary_key=True, description="run id; also the name of its folder under runs/")
    name: str = Field("", description="a human label")
    method: str = Field("rods", description="rods | static | ... (the config's method)")
    config: str = Field("{}", description="the run config as JSON")
    status: str = Field("queued", description="queued | running | finished | failed | stopped")
    pid: int | None = Field(None, description="process id of the training process")
    proc_start: int | None = Field(None, description="its start time in clock ticks since boot (/proc/<pid>/stat)")
    heartbeat_at: datetime | None = _tz_field()
    step: int | None = Field(None, description="last step reported with a heartbeat")
    out_dir: str = Field("", description="the run folder (events/, checkpoints/, pools.json)")
    message: str | None = Field(None, description="why it failed or stopped")
    created_at: datetime | None = _tz_field()
    updated_at: datetime | None = _tz_field()

    def config_dict(self) -> dict:
        return json.loads(self.config or "{}")


class Decision(SQLModel, table=True):
    __tablename__ = "decisions"
    id: int | None = Field(default=None, sa_column=Column(Integer, Sequence("decision_id_seq"), primary_key=True))
    run_id: str = Field(index=True)
    task_id: str
    action: str = Field(description="approve | reject | edit | reseed")
    payload: str | None = Field(None, description="JSON: for edit {'task': record}; for reseed any options")
    author: str = "researcher"
    created_at: datetime | None = _tz_field()
    status: str = Field("pending", description="pending | claimed | applied | refused")
    reason: str | None = Field(None, description="outcome reason (why refused, or what was done)")
    applied_step: int | None = None
    claimed_by: str | None = None
    comment: str | None = Field(None, description="the reviewer's note sent with the decision")
    batch_id: str | None = Field(None, description="the id shared by decisions sent in one action (add_decisions)")
    seen_step: int | None = Field(None, description="the run's last finished step when the decision was made")

    def payload_dict(self) -> dict:
        return json.loads(self.payload) if self.payload else {}


class Seed(SQLModel, table=True):
    __tablename__ = "seeds"
    task_id: str = Field(primary_key=True)
    enabled: bool = True
    tags: str = Field("[]", description="JSON list of strings")
    source: str = Field("import", description="bfcl | import | edit")
    added_at: datetime | None = _tz_field()
    record: str | None = Field(None, description="the task record as JSON (None: a built-in BFCL seed)")

    def task(self) -> Task | None:
        return parse_record(json.loads(self.record)) if self.record else None


def _is_transient(err: BaseException) -> bool:
    msg = str(err)
    return any(s in msg for s in ("Could not set lock", "Conflicting lock", "Conflict on", "TransactionContext"))


# ----- process identity -------------------------------------------------------------------------
def process_start(pid: int) -> int | None:
    """Start time of a live (non-zombie) process in clock ticks since boot, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and parens
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def process_alive(pid: int | None, start: int | None) -> bool:
    """True when `pid` runs and is the process that started at `start` (not a reused pid)."""
    if not pid:
        return False
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child, so it stops looking alive
    except ChildProcessError:
        pass
    return start is not None and process_start(pid) == start


class Pending:
    """The answer to a call that may still be on its way: `result()` waits for it and raises the call's error."""

    def __init__(self, receive: Callable[[], None]):
        self._receive = receive  # reads the next answer off the pipe (answers arrive in call order)
        self._done, self._ok, self._value = False, True, None

    def _set(self, ok: bool, value: Any) -> None:
        self._done, self._ok, self._value = True, ok, value

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        while not self._done:
            self._receive()
        if not self._ok:
            raise self._value
        return self._value

    @classmethod
    def now(cls, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Pending:
        """A call made at once, its answer (or error) kept for `result()`."""
        done = cls(lambda: None)
        try:
            done._set(True, fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - raised by result(), as a call through the pipe would be
            done._set(False, e)
        return done


class ControlDB:
    """Open, act, close: safe to use from the app and any number of trainers at once."""

    def __init__(self, path: str | Path | None = None, lock_timeout_s: float = 15.0):
        self.path = Path(path or os.environ.get("RODS_CONTROL_DB", DEFAULT_DB))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock_timeout_s = lock_timeout_s
        self.engine = create_engine(f"duckdb:///{self.path}", poolclass=NullPool)
        self._retry(lambda: SQLModel.metadata.create_all(self.engine))

    def later(self, method: str, /, *args: Any, **kwargs: Any) -> Pending:
        """`method(*args, **kwargs)` made now, its answer kept: the interface of `ControlDBProcess.later`."""
        return Pending.now(getattr(self, method), *args, **kwargs)

    def _retry(self, fn: Callable[[], T]) -> T:
        deadline, delay = time.monotonic() + self.lock_timeout_s, 0.005
        while True:
            try:
                return fn()
            except DBAPIError as e:
                if not _is_transient(e) or time.monotonic() > deadline:
                    raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.05)

    def _tx(self, fn: Callable[[Session], T]) -> T:
        """Run fn in one transaction on a fresh connection; retried whole on a lock conflict."""

        def attempt() -> T:
            with Session(self.engine, expire_on_commit=False) as s:
                out = fn(s)
                s.commit()
                return out

        return self._retry(attempt)

    # ----- runs ---------------------------------------------------------------------------------
    def create_run(
        self, run_id: str, out_dir: str | Path, config: dict | None = None, method: str = "rods", name: str = ""
    ) -> Run:
        now = _now()
        run = Run(
            id=run_id,
            name=name or run_id,
            method=method,
            config=json.dumps(config or {}, default=str),
            out_dir=str(out_dir),
            created_at=now,
            updated_at=now,
        )
        return self._tx(lambda s: (s.add(run), run)[1])

    def get_run(self, run_id: str) -> Run | None:
        return self._tx(lambda s: s.get(Run, run_id))

    def list_runs(self) -> list[Run]:
        return self._tx(lambda s: list(s.exec(select(Run).order_by(Run.created_at.desc()))))

    def update_run(self, run_id: str, **fields: Any) -> Run:
        if "status" in fields and fields["status"] not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}, got {fields['status']!r}")
        if "config" in fields and not isinstance(fields["config"], str):
            fields["config"] = json.dumps(fields["config"], default=str)

        def fn(s: Session) -> Run:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id!r}")
            for k, v in {**fields, "updated_at": _now()}.items():
                setattr(run, k, v)
            s.add(run)
            return run

        return self._tx(fn)

    def register_process(self, run_id: str, pid: int | None = None) -> Run:
        """Called by the training process itself when it starts: status running, pid, start time."""
        pid = pid or os.getpid()
        now = _now()
        return self.update_run(run_id, status="running", pid=pid, proc_start=process_start(pid), heartbeat_at=now)

    def heartbeat(self, run_id: str, step: int | None = None) -> None:
        values: dict[str, Any] = {"heartbeat_at": _now(), "updated_at": _now()}
        if step is not None:
            values["step"] = step
        self._tx(lambda s: s.exec(update(Run).where(Run.id == run_id).values(**values)))

    def run_status(self, run: Run | str, heartbeat_timeout_s: float = 120.0) -> str:
        """Stored status, checked against the process: a `running` run whose process is gone is
        `lost`; one alive whose heartbeat is older than the timeout is `stale`."""
        if isinstance(run, str):
            found = self.get_run(run)
            if found is None:
                raise KeyError(f"no run {run!r}")
            run = found
        if run.status != "running":
            return run.status
        if not process_alive(run.pid, run.proc_start):
            return "lost"
        beat = run.heartbeat_at
        if beat is None or _now() - beat > timedelta(seconds=heartbeat_timeout_s):
            return "stale"
        return "running"

    def stop_run(self, run_id: str, sig: int = signal.SIGTERM) -> bool:
        """Signal the run's process group (it was started in its own session); True if sent."""
        run = self.get_run(run_id)
        if run is None:
            raise KeyError(f"no run {run_id!r}")
        sent = False
        if process_alive(run.pid, run.proc_start):
            pgid = os.getpgid(run.pid)
            if pgid == run.pid and pgid != os.getpgrp():
                os.killpg(pgid, sig)
            else:  # not a group leader (or our own group): signal only the process
                os.kill(run.pid, sig)
            sent = True
        if run.status in ("queued", "running"):
            self.update_run(run_id, status="stopped", message="stopped by request")
        return sent

    # ----- decisions ----------------------------------------------------------------------------
    def add_decision(
        self, run_id: str, task_id: str, action: str, payload: dict | None = None, author: str = "researcher"
    ) -> Decision:
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        if action == "edit":
            if not payload or "task" not in payload:
                raise ValueError("an edit decision needs payload {'task': <the edited task record>}")
            parse_record(payload["task"])  # a bad edit fails here, in the app, not in the trainer
        d = Decision(
            run_id=run_id,
            task_id=task_id,
            action=action,
            author=author,
            created_at=_now(),
            payload=json.dumps(payload) if payload is not None else None,
        )
        return self._tx(lambda s: (s.add(d), s.flush(), s.refresh(d), d)[-1])

    def decisions(self, run_id: str, status: str | None = None) -> list[Decision]:
        def fn(s: Session) -> list[Decision]:
            q = select(Decision).where(Decision.run_id == run_id)
            if status:
                q = q.where(Decision.status == status)
            return list(s.exec(q.order_by(Decision.id)))

        return self._tx(fn)

    def pending_decisions(self, run_id: str) -> list[Decision]:
        return self.decisions(run_id, "pending")

    def claim_decisions(self, run_id: str, claimer: str | None = None) -> list[Decision]:
        """Take every pending decision of a run, atomically: each is returned to one caller only."""
        claimer = claimer or f"pid:{os.getpid()}"

        def fn(s: Session) -> list[int]:
            stmt = (
                update(Decision)
                .where(Decision.run_id == run_id, Decision.status == "pending")
                .values(status="claimed", claimed_by=claimer)
                .returning(Decision.id)
            )
            return [r[0] for r in s.exec(stmt).all()]

        ids = self._tx(fn)
        if not ids:
            return []
        return self._tx(lambda s: list(s.exec(select(Decision).where(Decision.id.in_(ids)).order_by(Decision.id))))

    def mark_decision(
        self,
        decision_id: int,
        outcome: Literal["applied", "refused"],
        reason: str | None = None,
        step: int | None = None,
    ) -> bool:
        """Record a decision's outcome; False if it was already applied or refused (idempotent)."""
        if outcome not in ("applied", "refused"):
            raise ValueError(f"outcome must be 'applied' or 'refused', got {outcome!r}")
        stmt = (
            update(Decision)
            .where(Decision.id == decision_id, Decision.status.in_(("pending", "claimed")))
            .values(status=outcome, reason=reason, applied_step=step)
        )
        return self._tx(lambda s: s.exec(stmt).rowcount) == 1

    def reopen_decisions_after(self, run_id: str, step: int) -> int:
        """On resume from a checkpoint at `step`: decisions applied later, or claimed and never
        marked, were lost with the process; make them pending again. Returns how many."""
        stmt = (
            update(Decision)
            .where(
                Decision.run_id == run_id,
                (Decision.status == "claimed")
                | (Decision.status.in_(("applied", "refused")) & (Decision.applied_step > step)),
            )
            .values(status="pending", claimed_by=None, reason=None, applied_step=None)
        )
        return self._tx(lambda s: s.exec(stmt).rowcount)

    # ----- seed catalog -------------------------------------------------------------------------
    def upsert_seeds(self, tasks: Iterable[Task], source: str = "import", tags: Iterable[str] = ()) -> tuple[int, int]:
        """Add or replace catalog entries in one transaction; returns (added, updated). A replaced entry
        keeps its tags (the new ones are added) and its enabled flag."""
        rows = [(t.id, json.dumps(t.to_record(), ensure_ascii=False)) for t in tasks]
        new_tags = {t.strip() for t in tags if t and t.strip()}
        tag_json = json.dumps(sorted(new_tags))

        def fn(s: Session) -> tuple[int, int]:
            added = updated = 0
            for task_id, record in rows:
                seed = s.get(Seed, task_id)
                if seed is None:
                    s.add(Seed(task_id=task_id, source=source, tags=tag_json, added_at=_now(), record=record))
                    added += 1
                else:
                    kept = set(json.loads(seed.tags or "[]"))
                    seed.record, seed.source, seed.tags = record, source, json.dumps(sorted(kept | new_tags))
                    s.add(seed)
                    updated += 1
            return added, updated

        return self._tx(fn)

    def list_seeds(self, enabled_only: bool = False) -> list[Seed]:
        def fn(s: Session) -> list[Seed]:
            q = select(Seed)
            if enabled_only:
                q = q.where(Seed.enabled)
            return list(s.exec(q.order_by(Seed.task_id)))

        return self._tx(fn)

    def set_seed_enabled(self, task_id: str, enabled: bool) -> bool:
        stmt = update(Seed).where(Seed.task_id == task_id).values(enabled=enabled)
        return self._tx(lambda s: s.exec(stmt).rowcount) == 1

    def set_seed_tags(self, task_id: str, tags: Iterable[str]) -> bool:
        """Replace a seed's tags (sorted, unique, blank ones dropped); False if the seed is not in the catalog."""
        clean = sorted({t.strip() for t in tags if t and t.strip()})
        stmt = update(Seed).where(Seed.task_id == task_id).values(tags=json.dumps(clean))
        return self._tx(lambda s: s.exec(stmt).rowcount) == 1

    # ----- review: batches of decisions, comments, the audit trail -----------------------------------
    def add_decisions(
        self,
        run_id: str,
        items: Iterable[tuple[str, str, dict | None]],
        reviewer: str = "researcher",
        comment: str | None = None,
        seen_step: int | None = None,
    ) -> list[Decision]:
        """Record (task_id, action, payload) decisions in ONE transaction under one new batch id: the trainer
        claims a run's pending decisions all at once, so a batch is applied whole at one step boundary."""
        batch, now = uuid.uuid4().hex[:12], _now()
        rows = []
        for task_id, action, payload in items:
            _check_decision(action, payload)
            rows.append(
                Decision(
                    run_id=run_id,
                    task_id=task_id,
                    action=action,
                    author=reviewer,
                    created_at=now,
                    payload=json.dumps(payload) if payload is not None else None,
                    comment=comment or None,
                    batch_id=batch,
                    seen_step=seen_step,
                )
            )
        if not rows:
            raise ValueError("a batch needs at least one decision")

        def fn(s: Session) -> list[Decision]:
            s.add_all(rows)
            s.flush()  # assigns the ids; every other field was set here
            return rows

        return self._tx(fn)

    def add_comment(self, run_id: str, task_id: str, reviewer: str, text: str) -> Comment:
        if not text.strip():
            raise ValueError("a comment needs some text")
        c = Comment(run_id=run_id, task_id=task_id, reviewer=reviewer, text=text.strip(), created_at=_now())
        return self._tx(lambda s: (s.add(c), s.flush(), s.refresh(c), c)[-1])

    def comments(self, run_id: str, task_id: str | None = None) -> list[Comment]:
        def fn(s: Session) -> list[Comment]:
            q = select(Comment).where(Comment.run_id == run_id)
            if task_id is not None:
                q = q.where(Comment.task_id == task_id)
            return list(s.exec(q.order_by(Comment.id)))

        return self._tx(fn)

    def audit(self, run_id: str, **equal: Any) -> list[Decision]:
        """The run's decisions, oldest first, keeping those whose columns equal the given values
        (e.g. author="ana", status="refused", batch_id=...); an unknown column raises ValueError."""
        unknown = set(equal) - set(Decision.model_fields)
        if unknown:
            raise ValueError(f"unknown decision column(s) {sorted(unknown)}; columns: {sorted(Decision.model_fields)}")

        def fn(s: Session) -> list[Decision]:
            q = select(Decision).where(Decision.run_id == run_id)
            for col, value in equal.items():
                q = q.where(getattr(Decision, col) == value)
            return list(s.exec(q.order_by(Decision.id)))

        return self._tx(fn)

    def set_seeds_enabled(self, task_ids: Iterable[str], enabled: bool) -> int:
        """Enable or disable many seeds in one transaction; returns how many catalog entries matched."""
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            return 0
        stmt = update(Seed).where(Seed.task_id.in_(ids)).values(enabled=enabled)
        return self._tx(lambda s: s.exec(stmt).rowcount)

    def retag_seeds(self, task_ids: Iterable[str], tag: str, add: bool = True) -> int:
        """Add (or remove) one tag on many seeds in one transaction; returns how many seeds changed."""
        tag, ids = tag.strip(), list(dict.fromkeys(task_ids))
        if not tag:
            raise ValueError("a tag needs some text")

        def fn(s: Session) -> int:
            changed = 0
            for seed in s.exec(select(Seed).where(Seed.task_id.in_(ids))):
                old = json.loads(seed.tags or "[]")
                if (tag in old) == add:
                    continue
                seed.tags = json.dumps(sorted({*old, tag} if add else set(old) - {tag}))
                s.add(seed)
                changed += 1
            return changed

        return self._tx(fn) if ids else 0


def _serve(conn, path: str, lock_timeout_s: float) -> None:
    """The loop of ControlDBProcess's child: (method, args, kwargs) in, (ok, result or error) out, until the
    parent closes the pipe or dies (EOF)."""
    db = ControlDB(path, lock_timeout_s)
    while True:
        try:
            name, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, getattr(db, name)(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - handed to the caller, raised there
            reply = (False, e)
        try:
            conn.send(reply)
        except Exception as e:  # noqa: BLE001 - an error that does not pickle travels as its text
            conn.send((False, RuntimeError(f"{type(e).__name__}: {e}")))


class ControlDBProcess:
    """A ControlDB served from a spawned process: the same public methods, each call sent through a pipe.

    Why a trainer uses it: DuckDB hands freed memory back to the OS (glibc `malloc_trim(0)`) whenever a
    database opens or closes, and ControlDB opens one per operation. In a trainer that memory is the last
    update's activations: rank 0, which claims decisions and beats the heart, page-faulted 110-160k times
    in each forward pass where rank 1 faulted 2-20k, and that forward took 1.5-5.7 s where rank 1's took
    1.5-1.9 s (2 processes on 2 cores, strace: `duckdb::Allocator::FlushAll` -> `malloc_trim`). With DuckDB
    in its own process, the trainer's heap is left alone. The child exits when the parent closes the pipe
    or dies (it reads EOF), so a killed trainer leaves no process behind. A daemonic process may not start
    children (multiprocessing's rule): there the database is served in-process, trims and all."""

    def __init__(self, path: str | Path | None = None, lock_timeout_s: float = 15.0):
        import multiprocessing

        self.path = Path(path or os.environ.get("RODS_CONTROL_DB", DEFAULT_DB))
        self._local = ControlDB(self.path, lock_timeout_s) if multiprocessing.current_process().daemon else None
        if self._local is not None:
            return
        ctx = multiprocessing.get_context("spawn")  # never fork a process that holds torch threads
        self._waiting: deque[Pending] = deque()
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, str(self.path), lock_timeout_s), daemon=True)
        self._proc.start()
        child.close()

    def later(self, method: str, /, *args: Any, **kwargs: Any) -> Pending:
        """Send a call and return at once; `result()` on the answer waits for it. The trainer begins its
        step's claim of decisions this way before the update and reads it at the step's end, so the ~40 ms a database open
        costs runs in the child beside the step instead of in it."""
        if self._local is not None:
            return self._local.later(method, *args, **kwargs)
        self._conn.send((method, args, kwargs))
        pending = Pending(self._receive)
        self._waiting.append(pending)
        return pending

    def _receive(self) -> None:
        """The next answer, handed to the oldest call still waiting (the child answers in call order)."""
        try:
            ok, value = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"control database process for {self.path} exited") from None
        self._waiting.popleft()._set(ok, value)

    def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        return self.later(method, *args, **kwargs).result()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or not callable(getattr(ControlDB, name, None)):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    # the methods whose defaults name the calling process
    def register_process(self, run_id: str, pid: int | None = None) -> Run:
        return self._call("register_process", run_id, pid or os.getpid())

    def claim_decisions(self, run_id: str, claimer: str | None = None) -> list[Decision]:
        return self._call("claim_decisions", run_id, claimer or f"pid:{os.getpid()}")

    def close(self) -> None:
        """End the child once every call sent has its answer (answers nobody asked for are dropped, errors
        included); safe to call twice."""
        if self._local is not None:
            return
        if not self._conn.closed:
            try:
                while self._waiting:
                    self._receive()
            except RuntimeError:  # the child is gone already
                pass
            self._conn.close()
        self._proc.join(timeout=10)


class Comment(SQLModel, table=True):
    __tablename__ = "comments"
    id: int | None = Field(default=None, sa_column=Column(Integer, Sequence("comment_id_seq"), primary_key=True))
    run_id: str = Field(index=True)
    task_id: str
    reviewer: str = Field(description="who wrote it (the Review page's reviewer field)")
    text: str
    created_at: datetime | None = _tz_field()


def _check_decision(action: str, payload: dict | None) -> None:
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
    if action == "edit":
        if not payload or "task" not in payload:
            raise ValueError("an edit decision needs payload {'task': <the edited task record>}")
        parse_record(payload["task"])  # a bad edit fails here, in the app, not in the trainer


@event.listens_for(SQLModel.metadata, "after_create")
def _add_missing_columns(metadata, connection, **_: Any) -> None:
    """A control database made before a nullable column joined its table gets the column (its old rows read
    None), so a workspace keeps working across versions; create_all only creates missing tables."""
    found = inspect(connection)
    for table in metadata.sorted_tables:
        if not found.has_table(table.name):
            continue
        # a zero-row select, not the inspector's get_columns: duckdb_engine's reflects through pg_catalog
        # tables DuckDB lacks
        have = set(connection.execute(text(f"SELECT * FROM {table.name} LIMIT 0")).keys())
        for col in table.columns:
            if col.name not in have and col.nullable and not col.primary_key:
                kind = col.type.compile(dialect=connection.dialect)
                connection.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {col.name} {kind}"))

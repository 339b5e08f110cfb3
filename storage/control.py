"""Control store: runs, curation decisions with their audit trail, and the seed catalog (SQLModel over
SQLite in WAL mode by default, or PostgreSQL given a URL).

Any number of processes share one store: SQLite's WAL lets readers run beside the one writer, and every
write transaction opens with `BEGIN IMMEDIATE`, so it waits (up to `busy_timeout_s`) for the write lock
when it starts instead of failing when a read upgrades to a write. On PostgreSQL a write transaction takes
one advisory lock, the same one-writer-at-a-time rule. Decisions are delivered exactly once:
`claim_decisions` moves pending rows to `claimed` in one UPDATE ... RETURNING, and `mark_decision` only
changes a claimed/pending row, so a second marker gets False. Every change of a decision is also written
to `decision_events` in the same transaction: who, when, what, at which step; the store only appends there,
each event chained by an HMAC to its run's previous one (storage.audit_chain) under a key kept outside the
store, whose run heads are recorded there too after each commit (storage.audit_keys), so an edit by hand
shows. Comments, a run's launch and its stop are events of the same chain.
A `claimed` status sits between pending and applied/refused, so a claim whose process dies can be reopened.

Length: one store's tables share one transaction rule (BEGIN IMMEDIATE, the advisory lock); split apart, each
part would restate it.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from sqlalchemy import Column, DateTime, TypeDecorator, inspect, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, select

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.benchmarks.registry import parse_any_record
from storage.audit_chain import (
    GENESIS,
    ChainReport,
    Trail,
    comment_digest,
    decision_digest,
    event_hash,
    run_digest,
    verify,
)
from storage.audit_keys import AuditKeyError, AuditKeys, Head, audit_folder
from storage.legacy_duckdb import LegacyStoreError, read_legacy_store, set_aside
from storage.store_engine import DEFAULT_DB, ENV_VAR, resolve_store, store_engine, store_target

LEGACY_FILE = "control.duckdb"  # the store of earlier versions, carried over on first open
RUN_STATUSES = ("queued", "running", "finished", "failed", "stopped")
ACTIONS = ("approve", "reject", "edit", "reseed")
T = TypeVar("T")


class StoreError(RuntimeError):
    """The control store cannot be opened: the message names it, the reason and the fix."""


def _now() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """A timezone-aware UTC datetime on every backend (SQLite keeps none: a naive value read back is UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.astimezone(UTC) if value is not None and value.tzinfo is not None else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _tz_field() -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime()))


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    id: str = Field(primary_key=True, description="run id; also the name of its folder under runs/")
    name: str = Field("", description="a human label")
    method: str = Field("rods", description="rods | static | ... (the config's method)")
    config: str = Field("{}", description="the run config as JSON")
    status: str = Field("queued", description="queued | running | finished | failed | stopped")
    pid: int | None = Field(None, description="process id of the training process")
    proc_start: int | None = Field(
        None, description="its start time in 1/100 s since boot (rods_core.process_identity)"
    )
    heartbeat_at: datetime | None = _tz_field()
    step: int | None = Field(None, description="last step reported with a heartbeat")
    out_dir: str = Field("", description="the run folder (events/, checkpoints/, pools.json)")
    message: str | None = Field(None, description="why it failed or stopped")
    created_at: datetime | None = _tz_field()
    updated_at: datetime | None = _tz_field()
    launched_by: str | None = Field(None, description="who launched it (the app's user); None: a command line")
    stopped_by: str | None = Field(None, description="who stopped it (the app's user)")

    def config_dict(self) -> dict:
        return json.loads(self.config or "{}")


class DecisionRecord(SQLModel, table=True):
    """A researcher's decision as the store keeps it, status and audit fields included; the trainer sees
    it as the plain `rods_core.recording.Decision`."""

    __tablename__ = "decisions"
    __table_args__ = {"sqlite_autoincrement": True}  # an id is never handed out twice, even after a delete
    id: int | None = Field(default=None, primary_key=True)
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


class DecisionEvent(SQLModel, table=True):
    """The audit trail: one row per change of a decision (and per comment, launch and stop of the run), written in
    the transaction that made it."""

    __tablename__ = "decision_events"
    __table_args__ = {"sqlite_autoincrement": True}
    id: int | None = Field(default=None, primary_key=True)
    decision_id: int = Field(index=True, description="the decision; a comment event: the comment; a run event: 0")
    run_id: str = Field(index=True)
    kind: str = Field(description="added | claimed | applied | refused | reopened | comment | launched | stopped")
    actor: str = Field(
        description="who: the decision's author (with the identity provider that vouched for them), or the "
        "claiming/marking process (pid:<n>)"
    )
    at: datetime | None = _tz_field()
    step: int | None = Field(None, description="the step of an outcome; the checkpoint step of a reopen")
    reason: str | None = Field(None, description="the outcome's reason, or where the row came from")
    digest: str | None = Field(
        None, description="sha256 of the row it seals: an 'added' event's decision, a comment, the run (launch, stop)"
    )
    prev_hash: str | None = Field(None, description="row_hash of the run's previous event ('' for its first)")
    row_hash: str | None = Field(
        None, description="HMAC of this row's fields + seq + prev_hash under key_id (None: from before the chain)"
    )
    seq: int | None = Field(None, description="the event's number in its run's chain, from 1 (None: an older chain)")
    key_id: str | None = Field(None, description="the id of the audit key that signed row_hash (storage.audit_keys)")


class Seed(SQLModel, table=True):
    __tablename__ = "seeds"
    task_id: str = Field(primary_key=True)
    enabled: bool = True
    tags: str = Field("[]", description="JSON list of strings")
    source: str = Field("import", description="bfcl | import | edit")
    added_at: datetime | None = _tz_field()
    record: str | None = Field(None, description="the task record as JSON (None: a built-in BFCL seed)")
    edited_by: str | None = Field(None, description="who last added, enabled, disabled or tagged it (the app's user)")
    edited_at: datetime | None = _tz_field()

    def task(self) -> Any:
        """The entry's task, of whichever benchmark's model its record fits; None for a built-in BFCL seed."""
        return parse_any_record(json.loads(self.record)) if self.record else None


# ----- where the store is -----------------------------------------------------------------------
def open_store(workspace: str | Path) -> ControlDB:
    """The workspace's store (`store_target`), carrying over the workspace's old `control.duckdb` once."""
    return ControlDB(store_target(workspace), legacy=Path(workspace) / LEGACY_FILE, workspace=workspace)


class ControlDB:
    """The control store: safe to use from the app and any number of trainers at once, on one machine
    (SQLite) or several (PostgreSQL). Opening it creates the tables and carries over `legacy` (an old DuckDB
    store: by default the `control.duckdb` beside a SQLite file) once."""

    def __init__(
        self,
        path: str | Path | None = None,
        busy_timeout_s: float = 15.0,
        legacy: str | Path | None = None,
        workspace: str | Path | None = None,
    ):
        """Raises StoreError (naming the store, the reason and the fix) when the store cannot be opened. The audit
        keys are looked for where storage.audit_keys.audit_folder says (`workspace`: a server store's)."""
        self.busy_timeout_s = busy_timeout_s
        try:
            self.url, self.path = resolve_store(path)
            self.keys = AuditKeys(audit_folder(self.path, workspace), self.url)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = store_engine(self.url, self.path is not None, busy_timeout_s)
            self._writer = self.engine.execution_options(rods_write=True)
            if legacy is None and self.path is not None:
                legacy = self.path.with_name(self.path.stem + ".duckdb")
            self.legacy = Path(legacy) if legacy is not None else None
            if self._tx(self._create_and_carry_over):
                set_aside(self.legacy)
        except (SQLAlchemyError, LegacyStoreError, AuditKeyError, ImportError, OSError, ValueError) as e:
            shown = re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", str(path or os.environ.get(ENV_VAR) or DEFAULT_DB))
            raise StoreError(
                f"control store {shown}: cannot open it ({type(e).__name__}: {str(e).splitlines()[0]}); give a "
                "writable SQLite file path or a reachable server's URL (postgresql+psycopg://user@host/db) "
                f"with --db or ${ENV_VAR}"
            ) from e

    def _tx(self, fn: Callable[[Session], T], write: bool = True) -> T:
        """fn in one transaction; a write transaction holds the store's write lock from its first statement."""
        with Session(self._writer if write else self.engine, expire_on_commit=False) as s:
            out = fn(s)
            s.commit()
            heads = s.info.get("audit_heads", {})
        for run_id, head in heads.items():  # after the commit: a recorded head is never ahead of the store
            self.keys.record_head(run_id, head)
        return out

    def _read(self, fn: Callable[[Session], T]) -> T:
        return self._tx(fn, write=False)

    def _create_and_carry_over(self, s: Session) -> bool:
        """Create missing tables, then copy the legacy store's rows that are not here yet (so a second
        process, or a crash before the old file was set aside, adds nothing twice). True if there was one."""
        SQLModel.metadata.create_all(s.connection())
        _add_missing_columns(s)
        if self.legacy is None or not self.legacy.exists():
            return False
        old = read_legacy_store(self.legacy)
        for model, key, table in ((Run, "id", "runs"), (Seed, "task_id", "seeds"), (DecisionRecord, "id", "decisions")):
            have = set(s.exec(select(getattr(model, key))))
            new = [model(**row) for row in old[table] if row[key] not in have]
            s.add_all(new)
            s.flush()
            if model is DecisionRecord:
                s.add_all(
                    DecisionEvent(
                        decision_id=d.id,
                        run_id=d.run_id,
                        kind="added",
                        actor=d.author,
                        at=d.created_at,
                        reason=f"carried over from {self.legacy.name}",
                    )  # unchained, like every event from before the chain
                    for d in new
                )
        if self.path is None:  # explicit ids do not move PostgreSQL's sequence: the next id must follow them
            s.exec(
                text(
                    "SELECT setval(pg_get_serial_sequence('decisions', 'id'), coalesce(max(id), 0) + 1, false) FROM decisions"
                )
            )
        return True

    def _audit(self, s: Session, subjects: Iterable[Any], kind: str, actor: str, **fields: Any) -> None:
        """Append one event per subject (a DecisionRecord; (id, run id) for an outcome; a Comment; a Run), each
        signed and chained to its run's previous event. Inside a write transaction, so no other writer appends
        between the read and the add; the heads are recorded outside the store once it commits (`_tx`)."""
        kid, heads = self.keys.signing()[0], s.info.setdefault("audit_heads", {})
        for d in subjects:
            i, run_id, digest = _subject(d, kind)
            if run_id not in heads:
                q = select(DecisionEvent.row_hash, DecisionEvent.seq).where(DecisionEvent.run_id == run_id)
                prev, seq = s.exec(q.order_by(DecisionEvent.id.desc()).limit(1)).first() or (GENESIS, 0)
                heads[run_id] = Head(seq or 0, prev or GENESIS, None)
            e = DecisionEvent(decision_id=i, run_id=run_id, kind=kind, actor=actor, at=_now(), digest=digest, **fields)
            e.seq, e.key_id, e.prev_hash = heads[run_id].seq + 1, kid, heads[run_id].head
            e.row_hash = event_hash(e, e.prev_hash, self.keys)
            heads[run_id] = Head(e.seq, e.row_hash, e.row_hash if e.seq == 1 else heads[run_id].start)
            s.add(e)

    # ----- runs ---------------------------------------------------------------------------------
    def create_run(
        self,
        run_id: str,
        out_dir: str | Path,
        config: dict | None = None,
        method: str = "rods",
        name: str = "",
        by: str | None = None,
        signed: str | None = None,
    ) -> Run:
        """A new run's row and its `launched` event (`by`: who launched it; `signed`: as the chain records them,
        e.g. with their identity provider; None: a command line)."""
        now = _now()
        run = Run(
            id=run_id,
            launched_by=by,
            name=name or run_id,
            method=method,
            config=json.dumps(config or {}, default=str),
            out_dir=str(out_dir),
            created_at=now,
            updated_at=now,
        )

        def fn(s: Session) -> Run:
            s.add(run)
            self._audit(s, [run], "launched", signed or by or "command line")
            return run

        return self._tx(fn)

    def get_run(self, run_id: str) -> Run | None:
        return self._read(lambda s: s.get(Run, run_id))

    def list_runs(self) -> list[Run]:
        return self._read(lambda s: list(s.exec(select(Run).order_by(Run.created_at.desc()))))

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

    def register_process(self, run_id: str, pid: int, proc_start: int | None) -> Run:
        """Record the training process of a run: status running, its pid and start time
        (rods_core.process_identity.process_start), a first heartbeat."""
        return self.update_run(run_id, status="running", pid=pid, proc_start=proc_start, heartbeat_at=_now())

    def heartbeat(self, run_id: str, step: int | None = None) -> None:
        values: dict[str, Any] = {"heartbeat_at": _now(), "updated_at": _now()}
        if step is not None:
            values["step"] = step
        self._tx(lambda s: s.exec(update(Run).where(Run.id == run_id).values(**values)))

    def mark_stopped(self, run_id: str, by: str | None = None, signed: str | None = None) -> None:
        """Record a queued or running run as stopped (`by`: who asked; `signed`: as the chain records them), with
        a `stopped` event; a run that ended keeps its status. Signalling its process is the app's
        (rods_lab/processes.stop_run)."""

        def fn(s: Session) -> None:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id!r}")
            if run.status in ("queued", "running"):
                run.status, run.message, run.stopped_by = "stopped", f"stopped by {by or 'request'}", by
                run.updated_at = _now()
                s.add(run)
                self._audit(s, [run], "stopped", signed or by or "request")

        self._tx(fn)

    # ----- decisions ----------------------------------------------------------------------------
    def add_decision(
        self, run_id: str, task_id: str, action: str, payload: dict | None = None, author: str = "researcher"
    ) -> DecisionRecord:
        _check_decision(action, payload)
        d = DecisionRecord(
            run_id=run_id,
            task_id=task_id,
            action=action,
            author=author,
            created_at=_now(),
            payload=json.dumps(payload) if payload is not None else None,
        )

        def fn(s: Session) -> DecisionRecord:
            s.add(d)
            s.flush()
            self._audit(s, [d], "added", author)
            return d

        return self._tx(fn)

    def decisions(self, run_id: str, status: str | None = None) -> list[DecisionRecord]:
        def fn(s: Session) -> list[DecisionRecord]:
            q = select(DecisionRecord).where(DecisionRecord.run_id == run_id)
            if status:
                q = q.where(DecisionRecord.status == status)
            return list(s.exec(q.order_by(DecisionRecord.id)))

        return self._read(fn)

    def pending_decisions(self, run_id: str) -> list[DecisionRecord]:
        return self.decisions(run_id, "pending")

    def verify_audit(self, run_id: str, expect_head: str | None = None) -> ChainReport:
        """Check the run's audit trail against its chain, its keys and the head recorded outside the store
        (storage.audit_chain.verify), in one read; `expect_head`: a head hash kept elsewhere, which the trail
        must still hold."""

        def fn(s: Session) -> Trail:
            def rows(model: Any, order: Any) -> list:
                return list(s.exec(select(model).where(model.run_id == run_id).order_by(order)))

            events = rows(DecisionEvent, DecisionEvent.id)
            return Trail(
                run_id, events, rows(DecisionRecord, DecisionRecord.id), rows(Comment, Comment.id), s.get(Run, run_id)
            )

        return verify(self._read(fn), self.keys, self.keys.head(run_id), expect_head)

    def decision_events(self, run_id: str, decision_id: int | None = None) -> list[DecisionEvent]:
        """The audit trail of a run's decisions (or of one), oldest first."""

        def fn(s: Session) -> list[DecisionEvent]:
            q = select(DecisionEvent).where(DecisionEvent.run_id == run_id)
            if decision_id is not None:
                q = q.where(DecisionEvent.decision_id == decision_id)
            return list(s.exec(q.order_by(DecisionEvent.id)))

        return self._read(fn)

    def claim_decisions(self, run_id: str, claimer: str | None = None) -> list[DecisionRecord]:
        """Take every pending decision of a run, atomically: each is returned to one caller only."""
        claimer = claimer or f"pid:{os.getpid()}"

        def fn(s: Session) -> list[DecisionRecord]:
            stmt = (
                update(DecisionRecord)
                .where(DecisionRecord.run_id == run_id, DecisionRecord.status == "pending")
                .values(status="claimed", claimed_by=claimer)
                .returning(DecisionRecord.id)
            )
            ids = [r[0] for r in s.exec(stmt).all()]
            if not ids:
                return []
            self._audit(s, [(i, run_id) for i in ids], "claimed", claimer)
            return list(s.exec(select(DecisionRecord).where(DecisionRecord.id.in_(ids)).order_by(DecisionRecord.id)))

        return self._tx(fn)

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
            update(DecisionRecord)
            .where(DecisionRecord.id == decision_id, DecisionRecord.status.in_(("pending", "claimed")))
            .values(status=outcome, reason=reason, applied_step=step)
            .returning(DecisionRecord.run_id)
        )

        def fn(s: Session) -> bool:
            found = [(decision_id, r[0]) for r in s.exec(stmt).all()]
            self._audit(s, found, outcome, f"pid:{os.getpid()}", step=step, reason=reason)
            return bool(found)

        return self._tx(fn)

    def reopen_decisions_after(self, run_id: str, step: int) -> int:
        """On resume from a checkpoint at `step`: decisions applied later, or claimed and never
        marked, were lost with the process; make them pending again. Returns how many."""
        stmt = (
            update(DecisionRecord)
            .where(
                DecisionRecord.run_id == run_id,
                (DecisionRecord.status == "claimed")
                | (DecisionRecord.status.in_(("applied", "refused")) & (DecisionRecord.applied_step > step)),
            )
            .values(status="pending", claimed_by=None, reason=None, applied_step=None)
            .returning(DecisionRecord.id)
        )

        def fn(s: Session) -> int:
            ids = [r[0] for r in s.exec(stmt).all()]
            self._audit(s, [(i, run_id) for i in ids], "reopened", f"pid:{os.getpid()}", step=step)
            return len(ids)

        return self._tx(fn)

    # ----- seed catalog -------------------------------------------------------------------------
    def upsert_seeds(
        self, tasks: Iterable[TaskRecord], source: str = "import", tags: Iterable[str] = (), by: str | None = None
    ) -> tuple[int, int]:
        """Add or replace catalog entries in one transaction; returns (added, updated). A replaced entry
        keeps its tags (the new ones are added) and its enabled flag. `by`: who (the app's user)."""
        rows = [(t.id, json.dumps(t.to_record(), ensure_ascii=False)) for t in tasks]
        new_tags = {t.strip() for t in tags if t and t.strip()}
        tag_json = json.dumps(sorted(new_tags))

        def fn(s: Session) -> tuple[int, int]:
            added = updated = 0
            for task_id, record in rows:
                seed = s.get(Seed, task_id)
                if seed is None:
                    s.add(
                        Seed(
                            task_id=task_id,
                            source=source,
                            tags=tag_json,
                            added_at=_now(),
                            record=record,
                            edited_by=by,
                            edited_at=_now(),
                        )
                    )
                    added += 1
                else:
                    kept = set(json.loads(seed.tags or "[]"))
                    seed.record, seed.source, seed.tags = record, source, json.dumps(sorted(kept | new_tags))
                    seed.edited_by, seed.edited_at = by, _now()
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

        return self._read(fn)

    # ----- review: batches of decisions, comments, the audit trail -----------------------------------
    def add_decisions(
        self,
        run_id: str,
        items: Iterable[tuple[str, str, dict | None]],
        reviewer: str = "researcher",
        comment: str | None = None,
        seen_step: int | None = None,
        signed: str | None = None,
    ) -> list[DecisionRecord]:
        """Record (task_id, action, payload) decisions in ONE transaction under one new batch id: the trainer
        claims a run's pending decisions all at once, so a batch is applied whole at one step boundary.
        `signed`: the reviewer as the chain records them (e.g. with their identity provider)."""
        batch, now = uuid.uuid4().hex[:12], _now()
        rows = []
        for task_id, action, payload in items:
            _check_decision(action, payload)
            rows.append(
                DecisionRecord(
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

        def fn(s: Session) -> list[DecisionRecord]:
            s.add_all(rows)
            s.flush()  # assigns the ids; every other field was set here
            self._audit(s, rows, "added", signed or reviewer)
            return rows

        return self._tx(fn)

    def add_comment(self, run_id: str, task_id: str, reviewer: str, text: str, signed: str | None = None) -> Comment:
        """A reviewer's note on a task, with its `comment` event (`signed`: the reviewer as the chain records them)."""
        if not text.strip():
            raise ValueError("a comment needs some text")
        c = Comment(run_id=run_id, task_id=task_id, reviewer=reviewer, text=text.strip(), created_at=_now())

        def fn(s: Session) -> Comment:
            s.add(c)
            s.flush()
            s.refresh(c)
            self._audit(s, [c], "comment", signed or reviewer)
            return c

        return self._tx(fn)

    def comments(self, run_id: str, task_id: str | None = None) -> list[Comment]:
        def fn(s: Session) -> list[Comment]:
            q = select(Comment).where(Comment.run_id == run_id)
            if task_id is not None:
                q = q.where(Comment.task_id == task_id)
            return list(s.exec(q.order_by(Comment.id)))

        return self._read(fn)

    def audit(self, run_id: str, **equal: Any) -> list[DecisionRecord]:
        """The run's decisions, oldest first, keeping those whose columns equal the given values
        (e.g. author="ana", status="refused", batch_id=...); an unknown column raises ValueError."""
        unknown = set(equal) - set(DecisionRecord.model_fields)
        if unknown:
            raise ValueError(
                f"unknown decision column(s) {sorted(unknown)}; columns: {sorted(DecisionRecord.model_fields)}"
            )

        def fn(s: Session) -> list[DecisionRecord]:
            q = select(DecisionRecord).where(DecisionRecord.run_id == run_id)
            for col, value in equal.items():
                q = q.where(getattr(DecisionRecord, col) == value)
            return list(s.exec(q.order_by(DecisionRecord.id)))

        return self._read(fn)

    def set_seeds_enabled(self, task_ids: Iterable[str], enabled: bool, by: str | None = None) -> int:
        """Enable or disable many seeds in one transaction; returns how many catalog entries matched."""
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            return 0
        stmt = update(Seed).where(Seed.task_id.in_(ids)).values(enabled=enabled, edited_by=by, edited_at=_now())
        return self._tx(lambda s: s.exec(stmt).rowcount)

    def retag_seeds(self, task_ids: Iterable[str], tag: str, add: bool = True, by: str | None = None) -> int:
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
                seed.edited_by, seed.edited_at = by, _now()
                s.add(seed)
                changed += 1
            return changed

        return self._tx(fn) if ids else 0


class Comment(SQLModel, table=True):
    __tablename__ = "comments"
    __table_args__ = {"sqlite_autoincrement": True}
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    task_id: str
    reviewer: str = Field(description="who wrote it (the Review page's reviewer field)")
    text: str
    created_at: datetime | None = _tz_field()


def _subject(d: Any, kind: str) -> tuple[int, str, str | None]:
    """(the event's decision_id, its run, the digest it seals) for what `_audit` records an event of."""
    if isinstance(d, DecisionRecord):
        return d.id, d.run_id, decision_digest(d)
    if isinstance(d, Comment):
        return d.id, d.run_id, comment_digest(d)
    if isinstance(d, Run):
        return 0, d.id, run_digest(d, kind)
    return d[0], d[1], None


def _add_missing_columns(s: Session) -> None:
    """The store's migration: a table made by an earlier version gains the columns added since (all nullable,
    so its rows read None: an event from before the hash chain is unchained). Run under the write lock."""
    conn = s.connection()
    found = inspect(conn)
    for table in SQLModel.metadata.sorted_tables:
        have = {c["name"] for c in found.get_columns(table.name)}
        for col in table.columns:
            if col.name not in have:
                kind = col.type.compile(dialect=conn.dialect)
                conn.exec_driver_sql(f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" {kind}')


def _check_decision(action: str, payload: dict | None) -> None:
    """An edit's task must fit some benchmark's task model (the trainer holds it to its run's own)."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
    if action == "edit":
        if not payload or "task" not in payload:
            raise ValueError("an edit decision needs payload {'task': <the edited task record>}")
        parse_any_record(payload["task"])  # a bad edit fails here, in the app, not in the trainer

"""The audit trail's chain: every event of a run (a decision added, claimed, applied, refused or reopened; a
comment; the run's launch and stop) carries an HMAC of its fields, its sequence number in the run and the hash
of the run's previous event, under a key kept outside the store (storage.audit_keys). An `added` event also
seals its decision's fields (`digest`), a `comment` event its comment's, `launched` and `stopped` who launched
and stopped the run. So a row changed, added or removed by hand with SQL breaks the chain where it happened,
and nobody without the key can recompute it.

The end is anchored outside the store too: each write records the run's first and latest hash with its
sequence number (audit_keys.Head), and `verify` fails when the trail ends before that head (its last events,
or the whole trail, removed) or starts elsewhere; `--expect-head` checks a head kept anywhere else. Events
written before the chain carry no hash and events of the former unkeyed chain no sequence number: both are
accepted only before a run's first keyed event, and only while no recorded head says the run had more.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from storage.audit_keys import AuditKeys, Head

GENESIS = ""  # the "previous hash" of a run's first chained event
DECISION_FIELDS = ("id", "run_id", "task_id", "action", "payload", "author", "comment", "batch_id", "seen_step")
EVENT_FIELDS = ("run_id", "decision_id", "kind", "actor", "step", "reason", "digest")
KEYED_FIELDS = (*EVENT_FIELDS, "seq", "key_id")
RUN_FIELDS = ("id", "name", "method", "out_dir", "launched_by", "created_at")  # sealed by its `launched` event
COMMENT_FIELDS = ("id", "run_id", "task_id", "reviewer", "text", "created_at")  # sealed by its `comment` event
RUN_EVENTS = ("launched", "stopped")  # events of the run itself (decision_id 0)
STATUS_AFTER = {
    "added": "pending",
    "claimed": "claimed",
    "applied": "applied",
    "refused": "refused",
    "reopened": "pending",
}


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)).isoformat(timespec="microseconds")
    raise TypeError(f"not JSON: {type(value).__name__}")


def canonical(values: dict[str, Any]) -> bytes:
    """One byte string per set of values: sorted keys, no spaces, UTF-8, times as UTC ISO with microseconds."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_iso).encode()


def _digest(values: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(values)).hexdigest()


def decision_digest(d: Any) -> str:
    """sha256 of what a decision said when it was made (not its outcome, which its later events record)."""
    return _digest({f: getattr(d, f) for f in DECISION_FIELDS} | {"created_at": d.created_at})


def run_digest(run: Any, kind: str) -> str:
    """What a run's `launched` event seals (who launched it, where, when) or its `stopped` event (who stopped it)."""
    return _digest({f: getattr(run, f) for f in RUN_FIELDS} if kind == "launched" else {"stopped_by": run.stopped_by})


def comment_digest(c: Any) -> str:
    return _digest({f: getattr(c, f) for f in COMMENT_FIELDS})


def event_hash(e: Any, prev_hash: str, keys: AuditKeys | None = None) -> str | None:
    """The event's hash: HMAC under its key of its fields, sequence number, time and the previous event's
    hash (None when `keys` lacks that key); an event of the former unkeyed chain (no `seq`): plain sha256."""
    if e.seq is None:
        values = {f: getattr(e, f) for f in EVENT_FIELDS} | {"at": e.at, "prev_hash": prev_hash}
        return hashlib.sha256(canonical(values)).hexdigest()
    values = {f: getattr(e, f) for f in KEYED_FIELDS} | {"at": e.at, "prev_hash": prev_hash}
    return keys.sign(e.key_id, canonical(values)) if keys is not None else None


@dataclass(frozen=True)
class ChainReport:
    """The verdict of `verify`: `problem` names the first row changed, added or removed by hand (None: intact)."""

    checked: int  # chained events whose hash and link hold
    unchained: int  # events from before the store had the chain
    head: str  # the hash of the run's last chained event (GENESIS when none)
    problem: str | None = None
    seq: int = 0  # the sequence number of the run's last keyed event (0: none)

    @property
    def ok(self) -> bool:
        return self.problem is None


def _link_problem(e: Any, own: str, prev: str, prev_id: int | None, seen: dict[str, int]) -> str | None:
    """Why event `e` (whose fields hash to `own`) does not follow the event before it, or None."""
    where = f"decision_events row {e.id} (decision {e.decision_id}, {e.kind} by {e.actor})"
    if own != e.row_hash:
        if (e.prev_hash or GENESIS) == prev:
            return f"{where}: changed by hand — its fields no longer match its hash"
        return f"{where}: added or changed by hand — neither its fields nor its link match the chain"
    if (e.prev_hash or GENESIS) == prev:
        return None
    if e.prev_hash in seen:
        return (
            f"{where}: links to row {seen[e.prev_hash]}, not to row {prev_id} before it — row {prev_id} was added "
            "by hand, or rows between them were removed"
        )
    after = f"after row {prev_id}" if prev_id is not None else "at the start of the run's trail"
    return f"{where}: a row before it ({after}) was removed by hand — it links to a hash no remaining row has"


def _status_problem(d: Any, last: Any, claimer: str | None) -> str | None:
    """Why decision `d`'s outcome columns disagree with its last chained event, or None."""
    want = STATUS_AFTER.get(last.kind)
    where = f"decisions row {d.id} (task {d.task_id})"
    if d.status != want:
        return f"{where}: changed by hand — status {d.status!r}, but its trail ends in {last.kind!r} (row {last.id})"
    if last.kind in ("applied", "refused") and (d.applied_step, d.reason) != (last.step, last.reason):
        return f"{where}: changed by hand — its step or reason differ from its {last.kind!r} event (row {last.id})"
    if last.seq is not None and d.claimed_by != claimer:
        return f"{where}: changed by hand — claimed_by {d.claimed_by!r}, but its trail says {claimer!r}"
    return None


@dataclass
class Trail:
    """One run's rows as the store holds them, in id order: what `verify` checks."""

    run_id: str
    events: Sequence[Any]
    decisions: Sequence[Any]
    comments: Sequence[Any] = ()
    run: Any = None


@dataclass
class _Walk:
    """The state of a walk along one run's events."""

    trail: Trail
    keys: AuditKeys | None
    prev: str = GENESIS
    prev_id: int | None = None
    seq: int = 0
    checked: int = 0
    unchained: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    by_seq: dict[int, str] = field(default_factory=dict)
    last: dict[int, Any] = field(default_factory=dict)  # decision id -> its last event
    claimer: dict[int, str | None] = field(default_factory=dict)
    sealed: dict[str, Any] = field(default_factory=dict)  # "comment 3", "launched", "stopped" -> its event

    def report(self, problem: str | None = None) -> ChainReport:
        return ChainReport(self.checked, self.unchained, self.prev, problem, self.seq)

    def own_hash(self, e: Any) -> tuple[str | None, str | None]:
        """(the hash `e`'s fields give, or None with why it cannot be checked)."""
        where = f"decision_events row {e.id} (decision {e.decision_id}, {e.kind} by {e.actor})"
        if e.seq is None:
            if self.seq:
                return None, f"{where}: its sequence number was removed by hand (the chain downgraded)"
            return event_hash(e, e.prev_hash or GENESIS), None
        if e.row_hash is None:
            return None, f"{where}: changed by hand — its hash was removed"
        if e.seq != self.seq + 1:
            gone = f"events {self.seq + 1}..{e.seq - 1} before it were removed" if e.seq > self.seq + 1 else ""
            return None, f"{where}: sequence {e.seq} after {self.seq} — {gone or 'it was added by hand'}"
        own = event_hash(e, e.prev_hash or GENESIS, self.keys)
        if own is None:
            return None, (
                f"{where}: signed with key {e.key_id}, which {self.keys.path if self.keys else 'no keys file'} does "
                "not hold — forged, or this host lacks the lab's keys file ($RODS_AUDIT_DIR)"
            )
        return own, None

    def step(self, e: Any, decisions: dict[int, Any]) -> str | None:
        """Check one event and take it into the walk; the problem when it does not hold."""
        if e.row_hash is None and e.seq is None:
            if self.prev_id is None:
                self.unchained += 1
                return None
            return f"decision_events row {e.id} (decision {e.decision_id}): added by hand — it has no hash"
        own, why = self.own_hash(e)
        if why or (why := _link_problem(e, own, self.prev, self.prev_id, self.seen)):
            return why
        if problem := self.subject_problem(e, decisions):
            return problem
        self.seen[e.row_hash], self.prev, self.prev_id, self.checked = e.id, e.row_hash, e.id, self.checked + 1
        if e.seq is not None:
            self.seq, self.by_seq[e.seq] = e.seq, e.row_hash
        return None

    def subject_problem(self, e: Any, decisions: dict[int, Any]) -> str | None:
        """Whether the row `e` seals (a decision, a comment, the run) still says what it sealed."""
        if e.kind in RUN_EVENTS:
            run = self.trail.run
            if run is None:
                return f"runs row {self.trail.run_id}: removed by hand — its {e.kind!r} event (row {e.id}) remains"
            if run_digest(run, e.kind) != e.digest:
                return f"runs row {run.id}: changed by hand — its fields differ from those its {e.kind!r} event sealed"
            self.sealed[e.kind] = e
            return None
        if e.kind == "comment":
            c = {c.id: c for c in self.trail.comments}.get(e.decision_id)
            if c is None or comment_digest(c) != e.digest:
                what = "removed" if c is None else "changed"
                return f"comments row {e.decision_id}: {what} by hand — its 'comment' event (row {e.id}) sealed it"
            self.sealed[f"comment {c.id}"] = e
            return None
        self.last[e.decision_id] = e
        self.claimer[e.decision_id] = (
            e.actor if e.kind == "claimed" else None if e.kind == "reopened" else (self.claimer.get(e.decision_id))
        )
        if e.kind != "added":
            return None
        d = decisions.get(e.decision_id)
        if d is None:
            return f"decisions row {e.decision_id}: removed by hand — its 'added' event (row {e.id}) remains"
        if decision_digest(d) != e.digest:
            return (
                f"decisions row {d.id} (task {d.task_id}): changed by hand — its fields differ from those its "
                f"'added' event (row {e.id}) sealed"
            )
        return None

    def rows_problem(self) -> str | None:
        """A decision, comment or stop the walk never saw sealed, though the chain was running when it was made."""
        events_of = {e.decision_id for e in self.trail.events if e.kind not in ("comment", *RUN_EVENTS)}
        for d in self.trail.decisions:
            if d.id in self.last:
                if problem := _status_problem(d, self.last[d.id], self.claimer.get(d.id)):
                    return problem
            elif d.id not in events_of and self.prev_id is not None:
                return f"decisions row {d.id} (task {d.task_id}): added by hand — no event records it"
        if self.seq:
            sealed_ids = [int(k.split()[1]) for k in self.sealed if k.startswith("comment ")]
            for c in self.trail.comments:
                if f"comment {c.id}" not in self.sealed and sealed_ids and c.id > min(sealed_ids):
                    return f"comments row {c.id} (task {c.task_id}): added by hand — no event records it"
            run = self.trail.run
            if run is not None and run.stopped_by and "stopped" not in self.sealed and "launched" in self.sealed:
                return (
                    f"runs row {run.id}: changed by hand — stopped_by {run.stopped_by!r}, but no event records a stop"
                )
        return None

    def anchor_problem(self, anchor: Head | str | None, expect_head: str | None) -> str | None:
        """Whether the trail reaches the head recorded outside the store (and `expect_head`), from its start."""
        if isinstance(anchor, str):
            return anchor
        if anchor is not None:
            if anchor.seq > self.seq:
                gone = "the whole trail was" if not self.seq else f"its events after {self.seq} were"
                return (
                    f"run {self.trail.run_id}: {gone} removed by hand (or its hashes stripped) — the head recorded "
                    f"outside the store is event {anchor.seq}, the store's trail ends at {self.seq}"
                )
            if self.by_seq.get(anchor.seq) != anchor.head:
                return f"run {self.trail.run_id}: event {anchor.seq} differs from the head recorded outside the store"
            if anchor.start is not None and self.by_seq.get(1) != anchor.start:
                return f"run {self.trail.run_id}: its first event differs from the start recorded outside the store"
        if expect_head and expect_head not in self.seen:
            return (
                f"run {self.trail.run_id}: the expected head {expect_head} is not in the trail — events up to it "
                "were removed or rewritten by hand"
            )
        return None


def verify(
    trail: Trail, keys: AuditKeys | None = None, anchor: Head | str | None = None, expect_head: str | None = None
) -> ChainReport:
    """Check one run's trail against its chain, its key (`keys`), the head recorded outside the store
    (`anchor`: a Head, a string saying why it cannot be trusted, or None) and a head the caller kept."""
    walk = _Walk(trail, keys)
    decisions = {d.id: d for d in trail.decisions}
    for e in trail.events:
        if problem := walk.step(e, decisions):
            return walk.report(problem)
    return walk.report(walk.rows_problem() or walk.anchor_problem(anchor, expect_head))

"""The audit trail's hash chain: every decision event carries sha256(canonical fields + the hash of its run's
previous event), and an `added` event also seals its decision's own fields (`digest`), so a row of
`decision_events` or `decisions` changed, added or removed by hand with SQL breaks the chain where it happened.

What a chain cannot show: rows removed from the *end* of a run's trail together with everything after them,
and a chain recomputed by someone who knows this scheme (there is no secret key). Keep the head hash that
`rods runs audit RUN --verify` prints (e.g. with each export) to anchor the end. Events written before the
store had the chain carry no hash: they are counted as unchained, not as tampered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GENESIS = ""  # the "previous hash" of a run's first chained event
DECISION_FIELDS = ("id", "run_id", "task_id", "action", "payload", "author", "comment", "batch_id", "seen_step")
EVENT_FIELDS = ("run_id", "decision_id", "kind", "actor", "step", "reason", "digest")
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


def decision_digest(d: Any) -> str:
    """sha256 of what a decision said when it was made (not its outcome, which its later events record)."""
    values = {f: getattr(d, f) for f in DECISION_FIELDS} | {"created_at": d.created_at}
    return hashlib.sha256(canonical(values)).hexdigest()


def event_hash(e: Any, prev_hash: str) -> str:
    """sha256 of an event's fields, its time and the hash of its run's previous event."""
    values = {f: getattr(e, f) for f in EVENT_FIELDS} | {"at": e.at, "prev_hash": prev_hash}
    return hashlib.sha256(canonical(values)).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    """The verdict of `verify`: `problem` names the first row changed, added or removed by hand (None: intact)."""

    checked: int  # chained events whose hash and link hold
    unchained: int  # events from before the store had the chain
    head: str  # the hash of the run's last chained event (GENESIS when none)
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _link_problem(e: Any, prev: str, prev_id: int | None, seen: dict[str, int]) -> str | None:
    """Why event `e` does not follow the event before it, or None."""
    own = event_hash(e, e.prev_hash or GENESIS)
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


def _status_problem(d: Any, last: Any) -> str | None:
    """Why decision `d`'s outcome columns disagree with its last chained event, or None."""
    want = STATUS_AFTER.get(last.kind)
    where = f"decisions row {d.id} (task {d.task_id})"
    if d.status != want:
        return f"{where}: changed by hand — status {d.status!r}, but its trail ends in {last.kind!r} (row {last.id})"
    if last.kind in ("applied", "refused") and (d.applied_step, d.reason) != (last.step, last.reason):
        return f"{where}: changed by hand — its step or reason differ from its {last.kind!r} event (row {last.id})"
    return None


def verify(events: Sequence[Any], decisions: Sequence[Any]) -> ChainReport:
    """Check one run's trail: `events` and `decisions` in id order, as the store holds them."""
    by_id = {d.id: d for d in decisions}
    prev, prev_id, seen, checked, unchained = GENESIS, None, {}, 0, 0
    last: dict[int, Any] = {}

    def report(problem: str | None = None) -> ChainReport:
        return ChainReport(checked, unchained, prev, problem)

    for e in events:
        if e.row_hash is None:
            if prev_id is None:
                unchained += 1
                continue
            return report(f"decision_events row {e.id} (decision {e.decision_id}): added by hand — it has no hash")
        if problem := _link_problem(e, prev, prev_id, seen):
            return report(problem)
        if e.kind == "added":
            d = by_id.get(e.decision_id)
            if d is None:
                return report(
                    f"decisions row {e.decision_id}: removed by hand — its 'added' event (row {e.id}) remains"
                )
            if decision_digest(d) != e.digest:
                return report(
                    f"decisions row {d.id} (task {d.task_id}): changed by hand — its fields differ from those its "
                    f"'added' event (row {e.id}) sealed"
                )
        seen[e.row_hash], prev, prev_id, checked = e.id, e.row_hash, e.id, checked + 1
        last[e.decision_id] = e
    chained_any = prev_id is not None
    events_of = {e.decision_id for e in events}
    for d in decisions:
        if d.id in last:
            if problem := _status_problem(d, last[d.id]):
                return report(problem)
        elif d.id not in events_of and chained_any:
            return report(f"decisions row {d.id} (task {d.task_id}): added by hand — no event records it")
    return report()

"""The trainer's side of curation decisions and of resuming: what it calls at a step boundary.

`deliver_decisions` claims the run's pending decisions (each reaches one caller only) on the process that
holds the control database, shares them with every training process, applies each with the caller's
function — any exception refuses the decision with its reason, so no decision can stop a run — and
records the outcome. `prepare_resume` puts the store back to a checkpoint's step: events after it are
dropped and decisions recorded after it (or claimed by a process that died) become pending again, so a
decision is applied exactly once in the run that survives.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from storage.control import ControlDB, Decision
from storage.events import EventLog


@dataclass(frozen=True)
class Claimed:
    """A decision as the trainer sees it: plain data (it crosses processes); the payload is hostile input."""

    id: int
    task_id: str
    action: str
    payload: str | None

    def payload_dict(self) -> dict:
        """The payload as a mapping; raises ValueError when it is not a JSON object."""
        data = json.loads(self.payload) if self.payload else {}
        if not isinstance(data, dict):
            raise ValueError(f"payload must be a JSON object, got {type(data).__name__}")
        return data


@dataclass(frozen=True)
class Outcome:
    decision_id: int
    task_id: str
    action: str
    outcome: str
    reason: str


# apply(decision) -> (applied?, reason). Raising counts as a refusal with the error as the reason.
ApplyFn = Callable[[Claimed], tuple[bool, str]]
MAX_REASON = 2_000  # a reason is shown in the app and stored in the database: bounded


def deliver_decisions(
    db: ControlDB | None,
    run_id: str,
    step: int,
    apply: ApplyFn,
    share: Callable[[Any], Any] = lambda x: x,
    claim: list[Decision] | None = None,
) -> list[Outcome]:
    """Apply every pending decision of the run once per process; returns the outcomes in decision order.

    `db` is given on the process that claims and records (rank 0; None elsewhere); `share` hands rank 0's
    claimed list to every process (identity with one process). `step` must be the step whose checkpoint
    will contain the decisions' effect (a checkpoint at step S holds every decision recorded with step <= S;
    `prepare_resume` reopens the later ones). `claim` is what an earlier `db.claim_decisions` returned (made
    before the step's update); without one the decisions are claimed now. A claim whose process dies
    before the outcomes are marked leaves them claimed, and the resume reopens them."""
    if db is None:
        found = []
    else:
        found = claim if claim is not None else db.claim_decisions(run_id, f"pid:{os.getpid()}")
    claimed = [Claimed(d.id, d.task_id, d.action, d.payload) for d in found]
    outcomes = []
    for d in share(claimed):
        try:
            ok, reason = apply(d)
        except Exception as e:  # noqa: BLE001 - a bad decision must not stop training; the researcher sees why
            ok, reason = False, f"{type(e).__name__}: {e}"
        outcome = "applied" if ok else "refused"
        reason = str(reason)[:MAX_REASON]
        if db is not None:
            db.mark_decision(d.id, outcome, reason, step=step)
        outcomes.append(Outcome(d.id, d.task_id, d.action, outcome, reason))
    return outcomes


def prepare_resume(log: EventLog | None, db: ControlDB | None, run_id: str, checkpoint_step: int) -> dict[str, int]:
    """Drop events after the checkpoint and reopen decisions recorded after it; returns the counts.

    With no checkpoint (a run killed before its first save) pass checkpoint_step = -1: every event goes,
    the step-0 evaluation included, and every decision is pending again."""
    dropped = log.truncate_after(checkpoint_step) if log is not None else 0
    reopened = db.reopen_decisions_after(run_id, checkpoint_step) if db is not None else 0
    return {"events_dropped": dropped, "decisions_reopened": reopened}

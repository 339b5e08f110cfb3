"""The trainer's side of curation decisions and of resuming: what it calls at a step boundary.

`deliver_decisions` claims the run's pending decisions (each reaches one caller only), applies each
with the caller's function, records the outcome in the control database and in the event log
(`decision_applied`). `prepare_resume` puts the store back to a checkpoint's step: events after it are
dropped and decisions whose outcome was recorded after it become pending again, so a decision is
applied exactly once in the run that survives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from storage.control import ControlDB, Decision
from storage.events import EventLog

# apply(decision) -> (applied?, reason). Raising counts as a refusal with the error as the reason.
ApplyFn = Callable[[Decision], tuple[bool, str]]


@dataclass(frozen=True)
class Outcome:
    decision_id: int
    task_id: str
    action: str
    outcome: str
    reason: str


def deliver_decisions(
    db: ControlDB, run_id: str, step: int, apply: ApplyFn, log: EventLog | None = None
) -> list[Outcome]:
    """Apply every pending decision of the run once; returns the outcomes in decision order.

    `step` must be the step whose checkpoint will contain the decisions' effect (a checkpoint at step
    S holds every decision recorded with step <= S; `prepare_resume` reopens the later ones)."""
    outcomes = []
    for d in db.claim_decisions(run_id):
        try:
            ok, reason = apply(d)
        except Exception as e:  # a bad decision must not stop training; the researcher sees why
            ok, reason = False, f"{type(e).__name__}: {e}"
        outcome = "applied" if ok else "refused"
        db.mark_decision(d.id, outcome, reason, step=step)
        outcomes.append(Outcome(d.id, d.task_id, d.action, outcome, reason))
    if log is not None and outcomes:
        log.append(
            "decision_applied",
            [{"step": step, "decision_id": o.decision_id, "outcome": o.outcome, "reason": o.reason} for o in outcomes],
        )
    return outcomes


def prepare_resume(log: EventLog, db: ControlDB | None, run_id: str, checkpoint_step: int) -> dict[str, int]:
    """Drop events after the checkpoint and reopen decisions recorded after it; returns the counts."""
    dropped = log.truncate_after(checkpoint_step)
    reopened = db.reopen_decisions_after(run_id, checkpoint_step) if db is not None else 0
    return {"events_dropped": dropped, "decisions_reopened": reopened}

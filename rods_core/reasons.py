"""The replay buffer's reason codes, in one place: why a task entered a pool, moved between pools or was
turned away. Each member's value is the code the event log stores (`events.reason`); the values never
change, so runs logged before read the same."""

from __future__ import annotations

from enum import StrEnum


class OfferReason(StrEnum):
    """Why an offered variant entered a pool, or did not (a duplicate, over budget, a static source)."""

    STAGED = "offer/staged"
    AWAITING_REVIEW = "offer/awaiting_review"
    DUPLICATE = "offer/duplicate"
    BUDGET = "offer/budget"
    DIRECT = "offer/direct"
    STATIC = "offer/static"


class PromoteReason(StrEnum):
    """Why a staged variant joined the active pool."""

    BOUNDARY = "promote/boundary"


class RetireReason(StrEnum):
    """Why a task leaves its pool: a probe that failed, a retirement layer, or a mastered seed's rest."""

    PROBE_MASTERED = "probe/mastered"
    PROBE_HARD = "probe/hard"
    PROBE_STALE = "probe/stale"
    RETIRE_MASTERED = "retire/mastered"
    RETIRE_HARD = "retire/hard"
    RETIRE_STALE = "retire/stale"
    RETIRE_CAPACITY = "retire/capacity"
    DORMANT_MASTERED = "dormant/mastered"


class ReprobeReason(StrEnum):
    """A dormant seed's re-probe: it rests again (mastered) or wakes into the active pool."""

    MASTERED = "reprobe/mastered"
    WAKE_BOUNDARY = "wake/boundary"
    WAKE_HARD = "wake/hard"


class DecisionReason(StrEnum):
    """A researcher's decision (BufferDecision.action) that moved a task."""

    APPROVE = "decision/approve"
    REJECT = "decision/reject"
    EDIT = "decision/edit"
    RESEED = "decision/reseed"


REASON_KINDS: tuple[type[StrEnum], ...] = (OfferReason, PromoteReason, RetireReason, ReprobeReason, DecisionReason)
REASONS: tuple[str, ...] = tuple(r.value for kind in REASON_KINDS for r in kind)  # every code a BufferEvent carries

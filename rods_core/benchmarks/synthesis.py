"""What every benchmark's synthesis shares: the paper's five stages, the verdict a stage records on one
candidate (`StageOutcome`) and the error that rejects it (`StageError`), one candidate's run through the stages
(`Attempt`) and one parent's attempts (`SynthResult`, what `Synthesizer.variants` returns and the run logs as
`synth/*` counts and `variant` rows); and `listed_result`, the attempts of a synthesizer that makes a plain list
of verified variants.

A stage either returns its product or raises `StageError(stage, reason)`; a pipeline turns that into a rejected
`StageOutcome` and counts it. Reasons are short, human-readable and grouped by their first words in the
per-stage counts ("plan: no value could be changed").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

STAGES: tuple[str, ...] = ("plan", "execute", "rewrite", "critique", "augment")


class StageError(Exception):
    """A candidate is rejected at `stage` for `reason`."""

    def __init__(self, stage: str, reason: str):
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {STAGES}")
        self.stage, self.reason = stage, reason
        super().__init__(f"{stage}: {reason}")


@dataclass(frozen=True)
class StageOutcome:
    """One stage's verdict on one candidate."""

    stage: str
    accepted: bool
    reason: str = ""

    def to_dict(self) -> dict:
        return {"stage": self.stage, "accepted": self.accepted, "reason": self.reason}


def reason_group(reason: str, words: int = 6) -> str:
    """A reason without its specifics, for counting: values, calls and numbers dropped, first few words kept."""
    text = re.sub(r"\w+\(.*?\)(?=\s|$)|'[^']*'|\"[^\"]*\"|\[.*?\]|\d+(\.\d+)?", "_", reason)
    text = re.sub(r"(?<!\w)_(\s*_)*(?!\w)", "_", text)
    return " ".join(text.split()[:words]).rstrip(":;,")


@dataclass
class Attempt:
    """One candidate: the verdict of each stage it reached, in order; the variant it became, or the
    rejecting stage and reason; its distance from the parent (None when Plan rejected it)."""

    outcomes: list[StageOutcome] = field(default_factory=list)
    variant: Any = None  # the benchmark's task
    distance: int | None = None

    @property
    def stage(self) -> str | None:
        """The stage that rejected the candidate, or None when it was accepted."""
        last = self.outcomes[-1] if self.outcomes else None
        return last.stage if last is not None and not last.accepted else None

    @property
    def reason(self) -> str:
        return "accepted" if self.variant is not None else (self.outcomes[-1].reason if self.outcomes else "")


@dataclass
class SynthResult:
    """Accepted variants of one parent, every attempt that made them or was rejected, and counts per stage."""

    parent_id: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def accepted(self) -> list:
        return [a.variant for a in self.attempts if a.variant is not None]

    @property
    def outcomes(self) -> list[StageOutcome]:
        """Every stage verdict, attempt after attempt (each attempt's run ends in a rejection or an accepted augment)."""
        return [o for a in self.attempts for o in a.outcomes]

    def counts(self) -> dict[str, dict]:
        out: dict[str, dict] = {s: {"accepted": 0, "rejected": 0, "reasons": Counter()} for s in STAGES}
        for o in self.outcomes:
            out[o.stage]["accepted" if o.accepted else "rejected"] += 1
            if not o.accepted:
                out[o.stage]["reasons"][reason_group(o.reason)] += 1
        return {s: {**c, "reasons": dict(c["reasons"].most_common())} for s, c in out.items()}


def merge_counts(results: list[SynthResult]) -> dict[str, dict]:
    """Per-stage counts over several parents' results, as one result holding all their attempts counts them."""
    return SynthResult("*", [a for r in results for a in r.attempts]).counts()


def listed_result(parent_id: str, variants: list[Any], n: int, pool_keys: Collection[str]) -> SynthResult:
    """Verified variants made as a plain list, as attempts: each variant one accepted attempt at `augment`;
    one whose content is already in the pool (or earlier in the list), or a shortfall below `n`, one rejected
    attempt each."""
    result = SynthResult(parent_id)
    seen = set(pool_keys)
    for v in variants:
        if v.content_key() in seen:
            result.attempts.append(Attempt([StageOutcome("augment", False, "duplicates a task in the pool")]))
            continue
        seen.add(v.content_key())
        result.attempts.append(Attempt([StageOutcome("augment", True)], variant=v))
    short = n - len(result.attempts)
    result.attempts += [
        Attempt([StageOutcome("augment", False, "the synthesizer found no further verified variant")])
        for _ in range(short)
    ]
    return result

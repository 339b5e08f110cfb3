"""What every synthesis stage shares: the outcome it records and the error that rejects a candidate.

A stage either returns its product or raises `StageError(stage, reason)`; the pipeline turns that into
a rejected `StageOutcome` and counts it. Reasons are short, human-readable and grouped by their first
words in the per-stage counts ("plan: no value could be changed").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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

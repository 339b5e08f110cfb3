"""What a run records, as the training loop sees it: a small protocol (`RunRecorder`) the storage layer
implements, the researcher's `Decision` as plain data, and the no-op recorder of every rank but 0.

The loop only calls this protocol, so the library never names a database or a file format; the
composition roots (`rods_lab.run`, the benchmarks) hand it a storage-backed recorder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rods_core.benchmarks.protocols import TaskRecord


@dataclass(frozen=True)
class Decision:
    """A researcher's decision as the trainer sees it: plain data (it crosses processes); the payload is
    hostile input."""

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
class DecisionOutcome:
    """What became of one decision at a step boundary: applied or refused, and why (bounded)."""

    decision_id: int
    task_id: str
    action: str
    outcome: str
    reason: str


class RunRecorder(Protocol):
    """Where a run's record goes: events, pools snapshot, liveness, build progress, decisions, status."""

    def write(self, events: dict[str, list[dict]]) -> None: ...
    def flush(self) -> None: ...
    def write_pools(self, step: int, pools: dict[str, list[TaskRecord]]) -> None: ...
    def heartbeat(self, step: int) -> None: ...
    def working(self) -> AbstractContextManager[None]: ...
    def build_progress(self, phase: str, **fields: Any) -> None: ...
    def claim_decisions(self) -> list[Decision]: ...
    def record_outcomes(self, step: int, outcomes: list[DecisionOutcome]) -> None: ...
    def resume_to(self, checkpoint_step: int) -> dict[str, int]: ...
    def close(self, status: str) -> None: ...


# open_recorder(cfg, run_dir, run_id, resume) -> the run's recorder, called on rank 0 once its id and
# folder are settled (after the inputs were checked: nothing is recorded for a run that cannot start)
OpenRecorder = Callable[[Any, Path, str, bool], RunRecorder]


class NullRecorder:
    """Records nothing: the recorder of every rank but 0 (rank 0 alone writes the run's record)."""

    def write(self, events: dict[str, list[dict]]) -> None:
        pass

    def flush(self) -> None:
        pass

    def write_pools(self, step: int, pools: dict[str, list[TaskRecord]]) -> None:
        pass

    def heartbeat(self, step: int) -> None:
        pass

    def working(self) -> AbstractContextManager[None]:
        return nullcontext()

    def build_progress(self, phase: str, **fields: Any) -> None:
        pass

    def claim_decisions(self) -> list[Decision]:
        return []

    def record_outcomes(self, step: int, outcomes: list[DecisionOutcome]) -> None:
        pass

    def resume_to(self, checkpoint_step: int) -> dict[str, int]:
        return {"events_dropped": 0, "decisions_reopened": 0}

    def close(self, status: str) -> None:
        pass

"""The baseline task sources and the method -> source mapping (methods are configs over the same code).

`static` and `env_augment` draw the fixed seeds in shuffled epochs without replacement. `dapo_filter`
is the same source skipping tasks whose last group was not informative (boundary.is_informative). Departure from DAPO: DAPO
generates, drops zero-variance groups and generates more until the batch is full; a source can only
predict from a task's previous group, so a flat task loses its next turn (one skip, then it is drawn
and measured again) instead of costing a wasted generation. `uniform_synth` and `rods` are the replay
buffer (rods_core.buffer) with `synth_parents` uniform or boundary.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.boundary import BoundaryDetector, group_stats, is_informative
from rods_core.buffer import BufferDecision, BufferEvent, ReplayBuffer, TaskSource
from rods_core.config import METHODS, BoundaryConfig, BufferConfig
from rods_core.reasons import OfferReason
from rods_core.rng import rng_state, set_rng_state


class StaticSource:
    """Fixed seeds in shuffled epochs without replacement; optionally DAPO-style skipping of flat tasks.

    A detector, when given, is fed every matrix by the step (rods_core/step.py) so the static baselines
    report the same regions and variances as RODS; it never changes what is sampled.
    """

    def __init__(
        self,
        tasks: Sequence[TaskRecord],
        seed: int = 0,
        detector: BoundaryDetector | None = None,
        skip_flat: bool = False,
    ):
        if not tasks:
            raise ValueError("a static source needs at least one task")
        self._tasks = {t.id: t for t in tasks}
        if len(self._tasks) != len(tasks):
            raise ValueError("task ids must be unique")
        self.detector = detector
        self.skip_flat = skip_flat
        self.rng = random.Random(seed)
        self.epoch = 0
        self.skipped = 0  # flat tasks skipped so far (dapo_filter)
        self._order: list[str] = []  # the rest of the current epoch, drawn from the end
        self._flat: dict[str, None] = {}  # tasks whose last group had zero variance

    def sample(self, n: int) -> list[str]:
        """The next n ids of the epoch order (a new shuffled epoch starts when one runs out)."""
        if n < 1:
            raise ValueError(f"sample size must be >= 1, got {n}")
        out: list[str] = []
        while len(out) < n:
            if not self._order:
                self._order = list(self._tasks)
                self.rng.shuffle(self._order)
                self.epoch += 1
            tid = self._order.pop()
            if self.skip_flat and tid in self._flat:
                del self._flat[tid]  # one skip per flat observation: terminates even if all are flat
                self.skipped += 1
                continue
            out.append(tid)
        return out

    def reprobes(self, matrix: Mapping[str, Sequence[float]]) -> list[str]:
        return []  # no dormant pool

    def observe(self, step: int, matrix: Mapping[str, Sequence[float]]) -> list[BufferEvent]:
        if self.skip_flat:
            cfg = self.detector.config if self.detector is not None else BoundaryConfig()
            for tid, rewards in matrix.items():
                if not is_informative(group_stats(rewards)[1], cfg):
                    self._flat[tid] = None
                else:
                    self._flat.pop(tid, None)
        return []

    def task(self, task_id: str) -> TaskRecord:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise KeyError(f"the source holds no task {task_id!r}") from None

    def offer(self, variants: list[TaskRecord], step: int) -> list[BufferEvent]:
        return [
            BufferEvent(step, t.id, None, None, OfferReason.STATIC, "a static source admits no variants")
            for t in variants
        ]

    def apply_decision(self, decision: BufferDecision) -> tuple[bool, str]:
        return False, "a static source takes no decisions"

    def decision_moves(self) -> list[BufferEvent]:
        return []

    def pools(self) -> dict[str, list[str]]:
        return {"active": list(self._tasks), "staged": [], "dormant": [], "retired": []}

    def boundary_tasks(self, k: int) -> list[str]:
        return []  # no synthesis

    def room(self) -> int:
        return 0  # admits no variants

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "kind": "static",
            "task_ids": list(self._tasks),
            "rng": rng_state(self.rng),
            "epoch": self.epoch,
            "skipped": self.skipped,
            "order": list(self._order),
            "flat": list(self._flat),
            "detector": self.detector.state_dict() if self.detector is not None else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != 1 or state.get("kind") != "static":
            raise ValueError(f"source state: expected a version-1 static state, got {state.get('kind')!r}")
        if list(state["task_ids"]) != list(self._tasks):
            raise ValueError("source state: saved over a different task list")
        set_rng_state(self.rng, state["rng"])
        self.epoch, self.skipped = int(state["epoch"]), int(state["skipped"])
        self._order, self._flat = list(state["order"]), dict.fromkeys(state["flat"])
        if self.detector is not None and state["detector"] is not None:
            self.detector.load_state_dict(state["detector"])


def build_source(
    method: str, seeds: Sequence[TaskRecord], boundary: BoundaryConfig, buffer: BufferConfig
) -> TaskSource:
    """The task source of a method; every source carries a detector so all methods report regions."""
    detector = BoundaryDetector(boundary)
    if method in ("static", "env_augment", "dapo_filter"):
        return StaticSource(seeds, buffer.seed, detector, skip_flat=method == "dapo_filter")
    if method == "uniform_synth":
        return ReplayBuffer(seeds, detector, buffer.model_copy(update={"synth_parents": "uniform"}))
    if method == "rods":
        return ReplayBuffer(seeds, detector, buffer)
    raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS)}")

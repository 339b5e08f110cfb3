"""Zero-cost boundary detector: per-task reward statistics and regions from the GRPO reward matrix.

It reads only the task × G reward matrix the trainer already computed for its advantages: no
generation, no environment call. Regions follow the paper (mastered / boundary / hard from the mean
progress reward of a task's rollouts). Departures from the paper, both documented on BoundaryConfig:
a task is classified on exponentially smoothed statistics (alpha=1 gives the paper's last-group
reading), and a task whose rewards are all equal in the middle band is "hard", not "boundary" —
its group has no variance, so it gives GRPO no gradient however moderate its mean.

Variance is the population variance of a group (ddof=0), so for rewards in [0, 1] it is at most 0.25
(Popoviciu's bound) and `share = var / 0.25` lies in [0, 1].
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rods_core.config import BoundaryConfig

Region = Literal["mastered", "boundary", "hard"]
REGIONS: tuple[Region, ...] = ("mastered", "boundary", "hard")
POPOVICIU_BOUND = 0.25  # max variance of a variable in [0, 1]
_EPS = 1e-9  # float slack when checking rewards lie in [0, 1]


# ----- pure math (fits on a screen) -----------------------------------------------------------------
def group_stats(rewards: Sequence[float]) -> tuple[float, float]:
    """Mean and population variance of one task's group of rewards."""
    n = len(rewards)
    mean = sum(rewards) / n
    return mean, sum((r - mean) ** 2 for r in rewards) / n


def variance_share(var: float) -> float:
    """Variance as a share of the Popoviciu bound for [0, 1] rewards (0 = flat, 1 = half 0 / half 1)."""
    return var / POPOVICIU_BOUND


def ema(old: float, new: float, alpha: float) -> float:
    return alpha * new + (1.0 - alpha) * old


def is_informative(var: float, cfg: BoundaryConfig) -> bool:
    """A group gives GRPO a usable gradient when its variance is not flat."""
    return var > 0.0 and variance_share(var) >= cfg.min_variance_share


def classify(mean: float, var: float, cfg: BoundaryConfig) -> Region:
    """mastered if mean >= hi; hard if mean <= lo or flat in between; boundary otherwise."""
    if mean >= cfg.mastered_mean:
        return "mastered"
    if mean <= cfg.hard_mean or not is_informative(var, cfg):
        return "hard"
    return "boundary"


def check_matrix(matrix: Mapping[str, Sequence[float]]) -> None:
    """Raise ValueError naming the task and rollout of the first reward that is not a number in [0, 1]."""
    for tid, rewards in matrix.items():
        if not isinstance(tid, str) or not tid:
            raise ValueError(f"reward matrix: task id must be a non-empty string, got {tid!r}")
        if len(rewards) == 0:
            raise ValueError(f"reward matrix: task {tid!r} has no rewards")
        for i, r in enumerate(rewards):
            if isinstance(r, bool) or not isinstance(r, numbers.Real) or not math.isfinite(r):
                raise ValueError(f"reward matrix: task {tid!r} rollout {i}: reward {r!r} is not a finite number")
            if not -_EPS <= r <= 1.0 + _EPS:
                raise ValueError(f"reward matrix: task {tid!r} rollout {i}: reward {r} outside [0, 1]")


# ----- per-task state ---------------------------------------------------------------------------------
@dataclass
class TaskStats:
    """What the detector knows about one task (JSON-serialisable through asdict)."""

    observations: int  # groups observed (= steps at which the task was in the matrix)
    rollouts: int  # rewards observed over all groups
    first_step: int
    last_step: int
    last_mean: float
    last_var: float
    mean: float  # smoothed (EMA) mean
    var: float  # smoothed (EMA) within-group variance
    region: Region
    streak: int  # consecutive observations in the current region
    last_informative_step: int | None  # last step whose group was not flat

    @property
    def var_share(self) -> float:
        return variance_share(self.var)

    @property
    def last_var_share(self) -> float:
        return variance_share(self.last_var)


@dataclass(frozen=True)
class RegionChange:
    """A task entered a region (old is None at its first observation)."""

    step: int
    task_id: str
    old: Region | None
    new: Region
    mean: float
    var: float


class BoundaryDetector:
    """Keeps TaskStats per task from successive reward matrices and reports region changes."""

    def __init__(self, config: BoundaryConfig | None = None):
        self.config = config or BoundaryConfig()
        self._stats: dict[str, TaskStats] = {}
        self._last_changes: tuple[int | None, list[RegionChange]] = (None, [])

    def update(
        self, step: int, matrix: Mapping[str, Sequence[float]], fresh: Collection[str] = ()
    ) -> list[RegionChange]:
        """Fold one generation step's reward matrix in; return the tasks whose region changed.

        Tasks in `fresh` restart their smoothing from this group (counts are kept): the buffer passes
        dormant seeds it re-probes after many steps, whose old average no longer describes the policy.
        """
        check_matrix(matrix)
        cfg, changes = self.config, []
        for tid, rewards in matrix.items():
            rewards = [min(1.0, max(0.0, float(r))) for r in rewards]
            m, v = group_stats(rewards)
            st = self._stats.get(tid)
            old = st.region if st else None
            if st is None:
                st = self._stats[tid] = TaskStats(0, 0, step, step, m, v, m, v, "hard", 0, None)
            elif tid in fresh:
                st.mean, st.var = m, v
            else:
                st.mean, st.var = ema(st.mean, m, cfg.ema_alpha), ema(st.var, v, cfg.ema_alpha)
            st.region = classify(st.mean, st.var, cfg)
            st.observations += 1
            st.rollouts += len(rewards)
            st.last_step, st.last_mean, st.last_var = step, m, v
            if is_informative(v, cfg):
                st.last_informative_step = step
            st.streak = st.streak + 1 if st.region == old else 1
            if st.region != old:
                changes.append(RegionChange(step, tid, old, st.region, st.mean, st.var))
        self._last_changes = (step, changes)
        return changes

    # ----- queries ----------------------------------------------------------------------------
    def changes(self, step: int) -> list[RegionChange]:
        """The region changes of the update at `step` (only the latest update is kept)."""
        last_step, changes = self._last_changes
        return list(changes) if last_step == step else []

    def stats(self, task_id: str) -> TaskStats | None:
        """The task's statistics, or None if it was never observed."""
        return self._stats.get(task_id)

    def region(self, task_id: str) -> Region | None:
        st = self._stats.get(task_id)
        return st.region if st else None

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._stats

    def __len__(self) -> int:
        return len(self._stats)

    # ----- checkpoint -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state; the config is recorded for reference, not restored."""
        return {
            "version": 1,
            "config": self.config.model_dump(),
            "tasks": {tid: asdict(st) for tid, st in self._stats.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != 1:
            raise ValueError(f"detector state: unsupported version {state.get('version')!r} (expected 1)")
        stats = {}
        for tid, rec in state["tasks"].items():
            try:
                st = TaskStats(**rec)
            except TypeError as e:
                raise ValueError(f"detector state: task {tid!r}: {e}") from e
            if st.region not in REGIONS:
                raise ValueError(f"detector state: task {tid!r}: unknown region {st.region!r}")
            stats[tid] = st
        self._stats = stats

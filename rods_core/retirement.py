"""The replay buffer's retirement rules as pure functions: each reads a task's detector statistics and
returns a PoolMove (a typed reason plus a detail) or None; the buffer applies the moves to its pools.

Layers, in the order the buffer applies them after an observation: a staged variant is judged at each
probe (promoted at its first boundary reading, retired after `probe_obs` that are not); a probing variant
never probed to a verdict goes stale; an active variant retires as mastered (k), hard (n) or stale (S),
except a seed, which only rests (dormant) when mastered; then the least informative variants are evicted
while the active pool is over its target."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from rods_core.boundary import TaskStats
from rods_core.reasons import PromoteReason, RetireReason


@dataclass(frozen=True)
class PoolMove:
    """A rule's verdict on one task: why it moves (the reason's value is the code the event log stores) and
    the figures behind it."""

    reason: RetireReason | PromoteReason
    detail: str

    @property
    def to_pool(self) -> Literal["active", "dormant", "retired"]:
        """The pool the task moves to."""
        if isinstance(self.reason, PromoteReason):
            return "active"
        return "dormant" if self.reason is RetireReason.DORMANT_MASTERED else "retired"


class Thresholds(Protocol):
    """The BufferConfig fields the rules read."""

    probe_obs: int
    mastered_streak: int
    hard_streak: int
    stale_steps: int
    retirement: Literal["layered", "single"]


def last_useful(st: TaskStats | None, since: int) -> int:
    """The last step that gave a gradient, counted from when the task entered its pool."""
    informative = st.last_informative_step if st is not None else None
    return since if informative is None else max(since, informative)


def active_retirement(st: TaskStats | None, since: int, step: int, cfg: Thresholds) -> PoolMove | None:
    """An active variant's retirement layers in order: mastered for k, hard for n, stale for S steps; with
    `retirement: single`, one layer instead (single_layer)."""
    if cfg.retirement == "single":
        return single_layer(st)
    if st is not None and st.region == "mastered" and st.streak >= cfg.mastered_streak:
        return PoolMove(RetireReason.RETIRE_MASTERED, _streak_detail(st))
    if st is not None and st.region == "hard" and st.streak >= cfg.hard_streak:
        return PoolMove(RetireReason.RETIRE_HARD, _streak_detail(st))
    if step - last_useful(st, since) >= cfg.stale_steps:
        return PoolMove(RetireReason.RETIRE_STALE, f"no informative group for {cfg.stale_steps} steps")
    return None


def single_layer(st: TaskStats | None) -> PoolMove | None:
    """The one-layer rule (an ablation of the layers above): retire at the first reading outside the boundary."""
    if st is None or st.region == "boundary":
        return None
    reason = RetireReason.RETIRE_MASTERED if st.region == "mastered" else RetireReason.RETIRE_HARD
    return PoolMove(reason, "single layer: " + _streak_detail(st))


def seed_exemption(move: PoolMove | None) -> PoolMove | None:
    """Seeds are never retired: a mastered seed rests (dormant), any other retirement is dropped."""
    if move is None or move.reason is not RetireReason.RETIRE_MASTERED:
        return None
    return PoolMove(RetireReason.DORMANT_MASTERED, move.detail)


def probe_verdict(st: TaskStats, probes: int, cfg: Thresholds) -> PoolMove | None:
    """A probing variant is promoted at a boundary reading and retired after `probe_obs` probes that are not."""
    detail = f"mean {st.mean:.2f}, var share {st.var_share:.2f} after {probes} probe(s)"
    if st.region == "boundary":
        return PoolMove(PromoteReason.BOUNDARY, detail)
    if probes >= cfg.probe_obs:
        return PoolMove(RetireReason(f"probe/{st.region}"), detail)
    return None


def stale_probe(st: TaskStats | None, since: int, step: int, cfg: Thresholds) -> PoolMove | None:
    """A probing variant never drawn to a verdict (too few probe slots, lost draws) leaves after S steps."""
    if step - last_useful(st, since) >= cfg.stale_steps:
        return PoolMove(RetireReason.PROBE_STALE, f"not probed to a verdict in {cfg.stale_steps} steps")
    return None


def capacity_evictions(
    variants: Sequence[tuple[str, TaskStats | None]], n_active: int, target: int
) -> list[tuple[str, PoolMove]]:
    """While the active pool is over target, the variants with the lowest smoothed variance leave (never
    observed: infinite); `variants` in pool order, so ties evict the oldest first (stable sort)."""
    over = n_active - target
    if over <= 0:
        return []
    info = [(tid, st.var if st is not None else math.inf) for tid, st in variants]
    lowest = sorted(info, key=lambda x: x[1])[:over]
    return [
        (tid, PoolMove(RetireReason.RETIRE_CAPACITY, f"smoothed var {var:.4f}; active over {target}"))
        for tid, var in lowest
    ]


def _streak_detail(st: TaskStats) -> str:
    return f"{st.region} for {st.streak} observation(s), mean {st.mean:.2f}"

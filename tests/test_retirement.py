"""The retirement rules one by one on constructed detector statistics: each threshold's edge on both
sides, the order of the layers, the reason codes and the details the event log stores."""

from __future__ import annotations

import math

import pytest

from rods_core.boundary import TaskStats
from rods_core.config import BufferConfig
from rods_core.reasons import REASONS, PromoteReason, RetireReason
from rods_core.retirement import (
    PoolMove,
    active_retirement,
    capacity_evictions,
    last_useful,
    probe_verdict,
    seed_exemption,
    stale_probe,
)

CFG = BufferConfig(probe_obs=2, mastered_streak=3, hard_streak=2, stale_steps=10)
R = RetireReason


def stats(region: str, streak: int = 1, mean: float = 0.5, var: float = 0.1, informative: int | None = None):
    return TaskStats(
        observations=streak,
        rollouts=16 * streak,
        first_step=1,
        last_step=1,
        last_mean=mean,
        last_var=var,
        mean=mean,
        var=var,
        region=region,
        streak=streak,
        last_informative_step=informative,
    )


def test_every_reason_is_a_buffer_reason_code():
    assert {r.value for r in (*R, *PromoteReason)} <= set(REASONS)
    assert R.RETIRE_MASTERED == "retire/mastered" and str(R.PROBE_STALE) == "probe/stale"
    assert str(PromoteReason.BOUNDARY) == "promote/boundary"  # the code old runs logged: a promotion, not a retirement
    moves = (PromoteReason.BOUNDARY, R.DORMANT_MASTERED, R.RETIRE_HARD, R.PROBE_STALE)
    assert [PoolMove(r, "").to_pool for r in moves] == [
        "active",
        "dormant",
        "retired",
        "retired",
    ]


@pytest.mark.parametrize(
    ("st", "since", "step", "expected"),
    [
        (stats("mastered", 2, informative=5), 0, 6, None),  # streak k-1
        (stats("mastered", 3, mean=0.97), 0, 1, R.RETIRE_MASTERED),  # streak k
        (stats("hard", 1, informative=5), 0, 6, None),  # streak n-1
        (stats("hard", 2), 0, 1, R.RETIRE_HARD),  # streak n
        (stats("boundary", 9, informative=5), 0, 14, None),  # 9 steps since the last gradient
        (stats("boundary", 9, informative=5), 0, 15, R.RETIRE_STALE),  # S steps since the last gradient
        (stats("boundary", 1, informative=5), 8, 17, None),  # counted from entry when later
        (stats("boundary", 1, informative=5), 8, 18, R.RETIRE_STALE),
        (None, 3, 12, None),  # never observed: counted from entry
        (None, 3, 13, R.RETIRE_STALE),
        (stats("mastered", 3), 0, 50, R.RETIRE_MASTERED),  # mastered before stale
        (stats("hard", 2), 0, 50, R.RETIRE_HARD),  # hard before stale
    ],
)
def test_active_retirement_layers(st, since, step, expected):
    v = active_retirement(st, since, step, CFG)
    assert (v and v.reason) == expected


def test_active_retirement_details():
    assert active_retirement(stats("mastered", 3, mean=0.968), 0, 1, CFG) == PoolMove(
        R.RETIRE_MASTERED, "mastered for 3 observation(s), mean 0.97"
    )
    assert active_retirement(None, 0, 10, CFG) == PoolMove(R.RETIRE_STALE, "no informative group for 10 steps")


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (None, None),
        (PoolMove(R.RETIRE_MASTERED, "d"), PoolMove(R.DORMANT_MASTERED, "d")),
        (PoolMove(R.RETIRE_HARD, "d"), None),
        (PoolMove(R.RETIRE_STALE, "d"), None),
    ],
)
def test_seed_exemption(verdict, expected):
    assert seed_exemption(verdict) == expected


@pytest.mark.parametrize(
    ("region", "probes", "expected"),
    [
        ("boundary", 1, PromoteReason.BOUNDARY),  # promoted at the first boundary reading
        ("mastered", 1, None),
        ("hard", 1, None),
        ("mastered", 2, R.PROBE_MASTERED),  # probe_obs probes that are not boundary
        ("hard", 2, R.PROBE_HARD),
        ("hard", 3, R.PROBE_HARD),
    ],
)
def test_probe_verdict(region, probes, expected):
    v = probe_verdict(stats(region, mean=0.5, var=0.25), probes, CFG)
    assert (v and v.reason) == expected
    if v is not None:
        assert v.detail == f"mean 0.50, var share 1.00 after {probes} probe(s)"


@pytest.mark.parametrize(
    ("st", "since", "step", "expected"),
    [
        (None, 2, 11, None),
        (None, 2, 12, PoolMove(R.PROBE_STALE, "not probed to a verdict in 10 steps")),
        (stats("hard", informative=6), 2, 15, None),
        (stats("hard", informative=6), 2, 16, PoolMove(R.PROBE_STALE, "not probed to a verdict in 10 steps")),
    ],
)
def test_stale_probe(st, since, step, expected):
    assert stale_probe(st, since, step, CFG) == expected


def test_last_useful_is_the_later_of_entry_and_last_gradient():
    assert [
        last_useful(None, 4),
        last_useful(stats("hard", informative=2), 4),
        last_useful(stats("hard", informative=7), 4),
    ] == [4, 4, 7]


@pytest.mark.parametrize(
    ("vars_", "n_active", "target", "evicted"),
    [
        ([0.1, 0.2], 4, 4, []),  # at target: nobody leaves
        ([0.1, 0.2], 3, 4, []),
        ([0.3, 0.1, 0.2], 5, 4, ["v1"]),  # one over: the lowest variance
        ([0.3, 0.1, 0.2], 6, 4, ["v1", "v2"]),
        ([None, 0.1, 0.1], 5, 3, ["v1", "v2"]),  # ties evict the oldest first; never observed last
        ([None, 0.5], 5, 3, ["v1", "v0"]),
    ],
)
def test_capacity_evictions(vars_, n_active, target, evicted):
    variants = [(f"v{i}", None if v is None else stats("boundary", var=v)) for i, v in enumerate(vars_)]
    out = capacity_evictions(variants, n_active, target)
    assert [t for t, _ in out] == evicted
    assert all(v.reason is R.RETIRE_CAPACITY for _, v in out)


def test_capacity_eviction_detail():
    (_, v), *_ = capacity_evictions([("v0", None), ("v1", stats("boundary", var=0.1875))], 5, 4)
    assert v.detail == "smoothed var 0.1875; active over 4"
    assert capacity_evictions([("v0", None)], 5, 4)[0][1].detail == f"smoothed var {math.inf:.4f}; active over 4"

"""The ablations of rods, each a buffer flag whose default is rods as shipped (direct injection, single-layer
retirement, no expansion budget), and the seed pool drawn at random (`seeds.random`): each flag's effect on
the rule it changes, and the configs that are refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rods_core.boundary import BoundaryDetector
from rods_core.buffer import ReplayBuffer
from rods_core.config import BoundaryConfig, BufferConfig, RunConfig, load_config
from rods_core.retirement import RetireReason, active_retirement, single_layer
from rods_core.tasksets import run_benchmark, select_seeds
from tests.test_buffer import BOUNDARY, HARD, MASTERED, observe, reasons, seeds, variants
from tests.test_retirement import stats


def buffer(**cfg) -> ReplayBuffer:
    """A buffer over 4 seeds whose regions come from the last group (the demo's `boundary.ema_alpha: 1`)."""
    return ReplayBuffer(seeds(4), BoundaryDetector(BoundaryConfig(ema_alpha=1.0)), BufferConfig(**cfg))


def test_the_defaults_are_rods_as_shipped():
    cfg = BufferConfig()
    assert (cfg.injection, cfg.retirement, cfg.expansion_budget) == ("staged", "layered", True)


def test_direct_injection_puts_a_variant_in_the_active_pool_unprobed():
    buf = buffer(injection="direct")
    ev = buf.offer(variants(2), step=1)
    assert reasons(ev) == [("v0", None, "active", "offer/direct"), ("v1", None, "active", "offer/direct")]
    assert buf.pools()["staged"] == [] and {"v0", "v1"} <= set(buf.pools()["active"])
    # an active variant is judged by the retirement layers, not by a probe: one hard group does not retire it
    assert observe(buf, 2, {"v0": HARD}) == []


def test_direct_injection_refuses_gated_review_naming_both_fields_and_the_fix():
    with pytest.raises(
        ValidationError, match="buffer.injection is 'direct' but buffer.review is 'gated'.*set review: auto"
    ):
        BufferConfig(injection="direct", review="gated")


def test_single_layer_retires_at_the_first_group_outside_the_boundary_without_streaks_or_staleness():
    single = BufferConfig(retirement="single", mastered_streak=3, hard_streak=3, stale_steps=2)
    assert single_layer(stats("boundary")) is None and single_layer(None) is None
    assert active_retirement(stats("mastered", 1), 0, 5, single).reason is RetireReason.RETIRE_MASTERED
    assert active_retirement(stats("hard", 1), 0, 5, single).reason is RetireReason.RETIRE_HARD
    assert active_retirement(None, 0, 50, single) is None  # no staleness timer
    layered = BufferConfig(mastered_streak=3, hard_streak=3, stale_steps=2)
    assert active_retirement(stats("hard", 1), 0, 1, layered) is None  # the layered rules wait for the streak


def test_single_layer_in_the_buffer_retires_a_promoted_variant_at_its_first_flat_group():
    buf = buffer(retirement="single", mastered_streak=5, hard_streak=5)
    buf.offer(variants(1), step=0)
    assert reasons(observe(buf, 1, {"v0": BOUNDARY})) == [("v0", "staged", "active", "promote/boundary")]
    assert reasons(observe(buf, 2, {"v0": MASTERED})) == [("v0", "active", "retired", "retire/mastered")]


def test_without_the_expansion_budget_room_is_bounded_by_the_probe_backlog_only():
    assert buffer(p_max=2).room() == 2
    buf = buffer(p_max=2, expansion_budget=False, probe_slots=4, max_probe_wait=4)
    assert buf.room() == 16
    ev = buf.offer(variants(20), step=1)
    assert sum(e.reason == "offer/staged" for e in ev) == 16
    refused = [e for e in ev if e.reason == "offer/budget"]
    assert len(refused) == 4 and "p_max" not in refused[0].detail


def test_a_random_pool_is_drawn_from_the_selection_and_refused_beside_hand_picked_ids():
    cfg = load_config("configs/demo-cpu.yaml", {"seeds.ids": None, "seeds.random": {"n": 12, "seed": 7}})
    drawn = [t.id for t in select_seeds(cfg, run_benchmark(cfg))]
    assert len(drawn) == 12 and drawn == sorted(drawn)
    again = load_config("configs/demo-cpu.yaml", {"seeds.ids": None, "seeds.random.n": 12, "seeds.random.seed": 7})
    assert [t.id for t in select_seeds(again, run_benchmark(again))] == drawn
    with pytest.raises(ValidationError, match="seeds.random and seeds.ids are both set.*set seeds.ids: null"):
        RunConfig.model_validate({"seeds": {"ids": ["multi_turn_base_3"], "random": {"n": 2}}})
    with pytest.raises(ValidationError, match="n\n.*greater than or equal to 1"):
        RunConfig.model_validate({"seeds": {"random": {"n": 0}}})

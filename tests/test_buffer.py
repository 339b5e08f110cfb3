"""The replay buffer and the baseline sources on constructed reward matrices: every transition, the
budget, capacity, dormant seeds, review decisions, and save/restore."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pydantic import ValidationError

from rods_core.benchmarks.bfcl.tasks import Message, Provenance, Task
from rods_core.boundary import BoundaryDetector
from rods_core.buffer import BufferDecision, ReplayBuffer, TaskSource
from rods_core.config import METHODS, BoundaryConfig, BufferConfig
from rods_core.reasons import REASONS
from rods_core.sources import StaticSource, build_source

MASTERED, BOUNDARY, HARD = [1.0] * 16, [1.0] * 8 + [0.0] * 8, [0.0] * 16


def mk(name: str, parent: str | None = None) -> Task:
    source = "seed" if parent is None else "synth"
    return Task(
        id=name,
        category="base",
        question=[[Message(content=f"please compute {name}")]],
        involved_classes=["MathAPI"],
        ground_truth=[[f"add(a={len(name)}, b=1)"]],
        provenance=Provenance(source=source, parent_id=parent),
    )


def seeds(n: int = 4) -> list[Task]:
    return [mk(f"s{i}") for i in range(n)]


def variants(n: int, parent: str = "s0", prefix: str = "v") -> list[Task]:
    return [mk(f"{prefix}{i}", parent) for i in range(n)]


def buffer(n_seeds: int = 4, **cfg) -> ReplayBuffer:
    return ReplayBuffer(seeds(n_seeds), BoundaryDetector(), BufferConfig(**cfg))


def observe(source: TaskSource, step: int, matrix: dict) -> list:
    """One step's observation as the RODS step makes it: the detector first (re-probes start fresh), then
    the source judges the matrix."""
    if source.detector is not None:
        source.detector.update(step, matrix, fresh=source.reprobes(matrix))
    return source.observe(step, matrix)


def entries(buf: ReplayBuffer) -> dict[str, dict]:
    """The buffer's per-task bookkeeping, as its checkpoint records it."""
    return buf.state_dict()["entries"]


def reasons(events) -> list[tuple[str, str | None, str | None, str]]:
    return [(e.task_id, e.from_pool, e.to_pool, e.reason) for e in events]


# ----- construction and the configured boundary -------------------------------------------------------
def test_starts_with_every_seed_active_and_target_twice_the_seeds():
    buf = buffer(5)
    assert buf.pools() == {"active": [f"s{i}" for i in range(5)], "staged": [], "dormant": [], "retired": []}
    # room: P_max 50, but no more staged than 4 probe slots x 4 steps of waiting can probe
    assert buf.target_active == 10 and buf.room() == 16
    assert isinstance(buf, TaskSource)
    with pytest.raises(ValueError, match="at least one seed"):
        ReplayBuffer([])
    with pytest.raises(ValueError, match="appears twice"):
        ReplayBuffer([mk("a"), mk("a")])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_source_classifies_with_the_configured_boundary(method):
    """A fresh detector is empty, hence falsy: `detector or BoundaryDetector()` once dropped the run's
    `boundary:` settings for rods and uniform_synth, silently, for every run."""
    cfg = BoundaryConfig(ema_alpha=1.0, mastered_mean=0.9)
    source = build_source(method, [mk("a"), mk("b")], cfg, BufferConfig())
    assert source.detector.config == cfg
    observe(source, 1, {"a": [0.0, 1.0]})
    observe(source, 2, {"a": [0.85, 0.85]})
    st = source.detector.stats("a")
    assert (st.mean, st.var) == (0.85, 0.0)  # last group only, as ema_alpha = 1 says
    assert st.region == "hard"  # 0.85 < the configured 0.9: flat between the thresholds


# ----- staged injection -----------------------------------------------------------------------------
def test_offer_stages_variants_and_probes_them_in_limited_slots():
    buf = buffer(probe_slots=2)
    ev = buf.offer(variants(3), step=1)
    assert reasons(ev) == [(f"v{i}", None, "staged", "offer/staged") for i in range(3)]
    batch = buf.sample(4)
    assert batch[:2] == ["v0", "v1"] and not set(batch[2:]) & {"v0", "v1", "v2"}
    # Drawn but not yet observed (the trainer reads one batch ahead): not drawn again as a probe.
    assert buf.sample(4)[:1] == ["v2"]
    assert (entries(buf)["v0"]["pending"], entries(buf)["v0"]["draws"]) == (1, 1)


def test_staged_to_active_when_a_probe_reads_boundary():
    buf = buffer()
    buf.offer(variants(1), step=0)
    buf.sample(4)
    ev = observe(buf, 1, {"v0": BOUNDARY})
    assert reasons(ev) == [("v0", "staged", "active", "promote/boundary")]
    assert "v0" in buf.pools()["active"]


@pytest.mark.parametrize(("rewards", "reason"), [(MASTERED, "probe/mastered"), (HARD, "probe/hard")])
def test_staged_to_retired_after_probe_obs_probes_outside_the_boundary(rewards, reason):
    buf = buffer(probe_obs=2)
    buf.offer(variants(1), step=0)
    assert observe(buf, 1, {"v0": rewards}) == []  # one probe is not a verdict yet
    assert "v0" in buf.pools()["staged"]
    ev = observe(buf, 2, {"v0": rewards})
    assert reasons(ev) == [("v0", "staged", "retired", reason)]


def test_staged_probe_never_drawn_goes_stale():
    buf = buffer(stale_steps=5)
    buf.offer(variants(1), step=0)
    assert observe(buf, 4, {"s0": BOUNDARY}) == []
    ev = observe(buf, 5, {"s0": BOUNDARY})
    assert reasons(ev) == [("v0", "staged", "retired", "probe/stale")]


# ----- multi-layer retirement -------------------------------------------------------------------------
def promoted(buf: ReplayBuffer, n: int = 1, step: int = 1) -> list[str]:
    ids = [v.id for v in variants(n)]
    buf.offer(variants(n), step=step - 1)
    observe(buf, step, dict.fromkeys(ids, BOUNDARY))
    assert all(t in buf.pools()["active"] for t in ids)
    return ids


def test_active_variant_retired_as_mastered_after_k_consecutive_observations():
    buf = buffer(mastered_streak=3)
    promoted(buf)
    # EMA from boundary: 0.75 after one all-success group (still boundary), mastered from the second.
    assert observe(buf, 2, {"v0": MASTERED}) == []
    assert observe(buf, 3, {"v0": MASTERED}) == []  # mastered, streak 1
    assert observe(buf, 4, {"v0": MASTERED}) == []  # streak 2
    ev = observe(buf, 5, {"v0": MASTERED})  # streak 3 = k
    assert reasons(ev) == [("v0", "active", "retired", "retire/mastered")]
    assert buf.task("v0").id == "v0"  # the record stays for export


def test_active_variant_retired_as_hard_after_n_observations():
    buf = buffer(hard_streak=2)
    promoted(buf)
    observe(buf, 2, {"v0": HARD})  # EMA mean 0.25, var 0.125: still boundary
    assert observe(buf, 3, {"v0": HARD}) == []  # hard, streak 1
    ev = observe(buf, 4, {"v0": HARD})
    assert reasons(ev) == [("v0", "active", "retired", "retire/hard")]


def test_active_variant_retired_as_stale_but_seeds_never():
    buf = buffer(stale_steps=10)
    promoted(buf, step=1)
    assert observe(buf, 10, {"s1": HARD}) == []
    ev = observe(buf, 11, {"s1": HARD})
    assert reasons(ev) == [("v0", "active", "retired", "retire/stale")]
    observe(buf, 100, {"s1": HARD, "s2": HARD, "s3": HARD})
    assert set(buf.pools()["active"]) == {"s0", "s1", "s2", "s3"}  # hard, stale seeds stay


def test_capacity_eviction_removes_lowest_information_variants_never_seeds():
    buf = buffer(2, target_active=4)
    buf.offer(variants(3), step=0)
    ev = observe(buf, 1, {"v0": BOUNDARY, "v1": [1.0] * 4 + [0.0] * 12, "v2": [1.0] * 6 + [0.0] * 10})
    # 2 seeds + 3 variants = 5 > 4: v1 (var 0.1875) is the least informative and leaves.
    assert reasons(ev)[-1] == ("v1", "active", "retired", "retire/capacity")
    assert [e.reason for e in ev[:-1]] == ["promote/boundary"] * 3
    assert buf.pools()["active"] == ["s0", "s1", "v0", "v2"]
    seeds_only = buffer(3, target_active=2)
    assert observe(seeds_only, 1, {"s0": HARD}) == [] and len(seeds_only.pools()["active"]) == 3


# ----- P_max and duplicates ---------------------------------------------------------------------------
def test_expansion_budget_caps_variants_alive_and_frees_on_retirement():
    buf = buffer(p_max=2, probe_obs=1)
    ev = buf.offer(variants(3), step=0)
    assert [e.reason for e in ev] == ["offer/staged", "offer/staged", "offer/budget"]
    assert buf.room() == 0 and "v2" not in buf.pools()["staged"]
    observe(buf, 1, {"v0": HARD})  # probe_obs=1: retired at once
    assert buf.room() == 1
    assert [e.reason for e in buf.offer([mk("w0", "s1"), mk("w1", "s1")], step=1)] == ["offer/staged", "offer/budget"]


def test_duplicate_ids_and_contents_are_not_admitted():
    buf = buffer()
    buf.offer(variants(1), step=0)
    twin = mk("v0", "s2").model_copy(update={"id": "other"})
    ev = buf.offer([mk("v0", "s1"), twin, mk("s1", "s0")], step=0)
    assert [(e.reason, e.detail) for e in ev] == [
        ("offer/duplicate", "same as v0"),
        ("offer/duplicate", "same as v0"),
        ("offer/duplicate", "same as s1"),
    ]


# ----- dormant seeds ---------------------------------------------------------------------------------
def test_seed_goes_dormant_is_reprobed_every_R_steps_and_wakes_on_forgetting():
    buf = buffer(2, mastered_streak=2, reprobe_every=10)
    observe(buf, 0, {"s0": MASTERED})
    ev = observe(buf, 1, {"s0": MASTERED})
    assert reasons(ev) == [("s0", "active", "dormant", "dormant/mastered")]
    assert all("s0" not in buf.sample(1) for _ in range(5))  # resting: not drawn
    observe(buf, 10, {"s1": BOUNDARY})
    assert "s0" not in buf.sample(1)  # 9 steps of rest
    observe(buf, 11, {"s1": BOUNDARY})
    assert buf.sample(1) == ["s0"]  # due: re-probed first
    ev = observe(buf, 12, {"s0": MASTERED, "s1": BOUNDARY})
    assert reasons(ev) == [("s0", "dormant", "dormant", "reprobe/mastered")]
    assert observe(buf, 21, {"s1": BOUNDARY}) == [] and "s0" not in buf.sample(1)
    observe(buf, 22, {"s1": BOUNDARY})
    assert buf.sample(2)[0] == "s0"
    # 10/16 successes: a smoothed mean would still read mastered (0.81); a re-probe is a fresh reading.
    ev = observe(buf, 23, {"s0": [1.0] * 10 + [0.0] * 6})
    assert reasons(ev) == [("s0", "dormant", "active", "wake/boundary")]
    assert "forgetting caught" in ev[0].detail
    assert entries(buf)["s0"]["seed"]


def test_all_seeds_resting_still_fills_a_batch():
    buf = buffer(2, mastered_streak=1, reprobe_every=50)
    observe(buf, 0, {"s0": MASTERED, "s1": MASTERED})
    assert buf.pools()["active"] == []
    assert sorted(buf.sample(4)) == ["s0", "s0", "s1", "s1"]


# ----- review-gated decisions --------------------------------------------------------------------------
def test_gated_variants_wait_for_approval_and_are_not_sampled_before():
    buf = buffer(review="gated", probe_slots=2)
    ev = buf.offer(variants(2), step=0)
    assert [e.reason for e in ev] == ["offer/awaiting_review"] * 2
    assert [t for t, e in entries(buf).items() if e["status"] == "awaiting_review"] == ["v0", "v1"]
    assert not {"v0", "v1"} & set(buf.sample(4))
    assert observe(buf, 60, {"s0": BOUNDARY}) == []  # awaiting review never goes stale
    assert buf.apply_decision(BufferDecision(action="approve", task_id="v1")) == (True, "approved: it will be probed")
    assert buf.apply_decision(BufferDecision(action="approve", task_id="v1"))[0] is False
    assert buf.apply_decision(BufferDecision(action="approve", task_id="s0"))[0] is False
    assert reasons(buf.decision_moves()) == [("v1", "staged", "staged", "decision/approve")]  # at its step
    assert buf.decision_moves() == []  # each move once
    assert buf.sample(4)[0] == "v1"
    ev = observe(buf, 61, {"v1": BOUNDARY})
    assert reasons(ev) == [("v1", "staged", "active", "promote/boundary")]


def test_reject_retires_variants_but_never_seeds():
    buf = buffer(review="gated")
    buf.offer(variants(1), step=0)
    assert buf.apply_decision(BufferDecision(action="reject", task_id="v0"))[0] is True
    assert buf.apply_decision(BufferDecision(action="reject", task_id="v0"))[0] is False
    assert buf.apply_decision(BufferDecision(action="reject", task_id="s0"))[0] is False
    assert buf.apply_decision(BufferDecision(action="reject", task_id="nope")) == (False, "unknown task 'nope'")
    assert reasons(buf.decision_moves()) == [("v0", "staged", "retired", "decision/reject")]


def test_edit_replaces_the_variant_with_a_fresh_id_probed_at_once():
    buf = buffer(review="gated")
    buf.offer(variants(1), step=3)
    edited = buf.task("v0").model_copy(update={"question": [[Message(content="fixed wording")]]})
    ok, why = buf.apply_decision(BufferDecision(action="edit", task_id="v0", task=edited))
    assert ok and why == "edited as v0_e1: probed next"
    new = buf.task("v0_e1")
    assert new.provenance.source == "edit" and new.provenance.parent_id == "v0" and new.user_texts == ["fixed wording"]
    assert entries(buf)["v0_e1"]["status"] == "probing" and buf.pools()["staged"] == ["v0_e1"]
    assert reasons(buf.decision_moves()) == [
        ("v0", "staged", "retired", "decision/edit"),
        ("v0_e1", None, "staged", "decision/edit"),
    ]
    again = buf.task("v0_e1").model_copy(update={"id": "v0", "question": [[Message(content="fixed again")]]})
    assert buf.apply_decision(BufferDecision(action="edit", task_id="v0", task=again)) == (
        True,
        "edited as v0_e2: probed next",
    )
    with pytest.raises(ValidationError, match="required for action 'edit'"):
        BufferDecision(action="edit", task_id="v0")
    with pytest.raises(ValidationError, match="applies to action 'reseed' only"):
        BufferDecision(action="approve", task_id="v0", mode="promote")


def test_edit_of_a_seed_adds_a_variant_within_the_budget():
    buf = buffer(p_max=1)
    edited = buf.task("s0").model_copy(update={"question": [[Message(content="another way")]]})
    assert buf.apply_decision(BufferDecision(action="edit", task_id="s0", task=edited))[0] is True
    assert "s0" in buf.pools()["active"]
    ok, why = buf.apply_decision(BufferDecision(action="edit", task_id="s1", task=edited))
    assert not ok and "p_max 1 reached" in why


def test_reseed_promote_makes_a_variant_a_seed_that_rests_instead_of_retiring():
    buf = buffer(mastered_streak=1)
    buf.offer(variants(1), step=0)
    assert buf.apply_decision(BufferDecision(action="reseed", task_id="v0")) == (
        True,
        "promoted to seed: never retired from now on",
    )
    assert entries(buf)["v0"]["seed"] and buf.room() == 16  # a seed counts against neither limit
    assert buf.apply_decision(BufferDecision(action="reseed", task_id="v0"))[0] is False
    assert reasons(buf.decision_moves()) == [("v0", "staged", "active", "decision/reseed")]
    assert reasons(observe(buf, 1, {"v0": MASTERED})) == [("v0", "active", "dormant", "dormant/mastered")]


def test_reseed_synthesize_raises_the_flag_and_puts_the_task_first_for_synthesis():
    buf = buffer()
    observe(buf, 0, {"s0": BOUNDARY, "s1": BOUNDARY, "s2": HARD})
    ok, _ = buf.apply_decision(BufferDecision(action="reseed", task_id="s2", mode="synthesize"))
    assert ok and buf.synthesis_requests == ["s2"]
    assert buf.boundary_tasks(1) == ["s2", "s0"]  # every request, then up to k boundary tasks
    assert buf.synthesis_requests == [] and buf.boundary_tasks(0) == []


# ----- synthesis parents and sampling ------------------------------------------------------------------
def test_boundary_tasks_prefer_parents_with_fewest_variants_and_uniform_returns_seeds():
    buf = buffer(6, probe_obs=1)
    observe(buf, 0, {"s0": BOUNDARY, "s1": [1.0] * 5 + [0.0] * 11, "s2": BOUNDARY, "s3": HARD, "s4": MASTERED})
    assert buf.boundary_tasks(5) == ["s0", "s2", "s1"]  # most informative first
    buf.offer([mk("a", "s0"), mk("b", "s0"), mk("c", "s2")], step=0)
    assert buf.boundary_tasks(3) == ["s1", "s2", "s0"]  # fewest variants first
    uni = buffer(6, synth_parents="uniform")
    observe(uni, 0, {"s0": BOUNDARY, "s1": HARD})
    picks = uni.boundary_tasks(4)
    assert len(set(picks)) == 4 and set(picks) <= {f"s{i}" for i in range(6)}
    seen = set().union(*(uni.boundary_tasks(2) for _ in range(10)))
    assert len(seen) >= 5  # random seeds, not only the boundary one (s0)
    state = uni.state_dict()
    before = [uni.sample(3) for _ in range(3)]
    uni.load_state_dict(state)
    uni.boundary_tasks(4)  # asking for parents does not move the sampling stream
    assert [uni.sample(3) for _ in range(3)] == before


def test_sampling_prefers_boundary_tasks_and_is_distinct_within_a_batch():
    buf = buffer(20)
    observe(buf, 0, {f"s{i}": BOUNDARY if i < 5 else HARD for i in range(20)})
    counts = Counter()
    for _ in range(400):
        batch = buf.sample(4)
        assert len(set(batch)) == 4
        counts.update(batch)
    boundary = sum(counts[f"s{i}"] for i in range(5)) / 5
    hard = sum(counts[f"s{i}"] for i in range(5, 20)) / 15
    assert boundary > 2.5 * hard
    assert len(buffer(2).sample(5)) == 5  # a pool smaller than the batch repeats


def test_unknown_tasks_in_the_matrix_are_refused():
    with pytest.raises(ValueError, match="never held"):
        buffer().observe(0, {"ghost": BOUNDARY})


# ----- save / restore --------------------------------------------------------------------------------
def run_steps(buf: ReplayBuffer, start: int, stop: int) -> list:
    """A deterministic little training: rewards depend on the task and the step; variants each 3 steps."""
    log = []
    for step in range(start, stop):
        batch = buf.sample(6)
        successes = {t: (hash_ish(t) + step) % 17 for t in dict.fromkeys(batch)}
        matrix = {t: [1.0] * k + [0.0] * (16 - k) for t, k in successes.items()}
        log.append((batch, reasons(observe(buf, step, matrix))))
        if step % 3 == 0:
            parents = buf.boundary_tasks(2)
            log.append(reasons(buf.offer([mk(f"x{step}_{p}", p) for p in parents], step)))
    return log


def hash_ish(tid: str) -> int:
    return sum(map(ord, tid))  # stable across processes, unlike hash()


def test_state_dict_through_json_restores_identical_future_samples_and_events():
    cfg = dict(seed=7, p_max=6, probe_slots=2, target_active=8, reprobe_every=4, stale_steps=6)
    a = buffer(6, **cfg)
    run_steps(a, 0, 15)
    state = json.loads(json.dumps(a.state_dict()))
    assert set(state["tasks"]) == set(a.pools()["staged"] + a.pools()["retired"] + a.pools()["active"]) - {
        f"s{i}" for i in range(6)
    }
    b = buffer(6, **cfg)
    b.load_state_dict(state)
    assert b.pools() == a.pools() and b.state_dict() == a.state_dict()
    assert run_steps(a, 15, 40) == run_steps(b, 15, 40)
    assert a.state_dict() == b.state_dict()
    assert sum(len(p) for p in a.pools().values()) > 6  # the scenario really moved tasks around
    with pytest.raises(ValueError, match="different seeds"):
        buffer(5, **cfg).load_state_dict(state)


def test_every_reason_emitted_is_registered():
    a = buffer(6, seed=3, p_max=6, probe_slots=2, target_active=8, reprobe_every=4, stale_steps=6)
    log = run_steps(a, 0, 60)
    emitted = {r[-1] for entry in log for r in (entry[1] if isinstance(entry, tuple) else entry)}
    assert emitted <= set(REASONS)
    assert {"promote/boundary", "offer/staged"} <= emitted
    assert all(type(r) is str for r in emitted)  # the plain code, never the enum: the log stores it byte for byte


# ----- the baselines -----------------------------------------------------------------------------------
def test_static_source_draws_epochs_without_replacement_deterministically():
    tasks = seeds(5)
    src = StaticSource(tasks, seed=1)
    draws = src.sample(5) + src.sample(5)
    assert sorted(draws[:5]) == sorted(draws[5:]) == [t.id for t in tasks]
    assert draws[:5] != draws[5:] or src.sample(5) != draws[:5]
    assert StaticSource(tasks, seed=1).sample(10) == draws
    assert src.offer(variants(1), 0)[0].reason == "offer/static" and src.boundary_tasks(3) == []
    assert src.apply_decision(BufferDecision(action="approve", task_id="s0"))[0] is False
    assert isinstance(src, TaskSource)


def test_dapo_filter_skips_a_task_whose_last_group_was_flat_once():
    tasks = seeds(3)
    src = StaticSource(tasks, seed=0, skip_flat=True)
    observe(src, 0, {"s0": MASTERED, "s1": HARD, "s2": BOUNDARY})
    assert src.sample(1) == ["s2"]  # the only informative task of the first epoch
    assert sorted(src.sample(3)) == ["s0", "s1", "s2"]  # the second epoch: skipped once, then measured again
    assert src.skipped == 2 and src.epoch == 2
    plain = StaticSource(tasks, seed=0)
    observe(plain, 0, {"s0": MASTERED, "s1": HARD})
    assert plain.skipped == 0 and len(plain.sample(3)) == 3


def test_static_state_round_trips_and_build_source_maps_every_method():
    a = StaticSource(seeds(7), seed=4, detector=BoundaryDetector(), skip_flat=True)
    a.sample(3)
    observe(a, 0, {"s1": HARD, "s2": BOUNDARY})
    b = StaticSource(seeds(7), seed=4, detector=BoundaryDetector(), skip_flat=True)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert [a.sample(4) for _ in range(5)] == [b.sample(4) for _ in range(5)]
    for method in METHODS:
        src = build_source(method, seeds(3), BoundaryConfig(), BufferConfig())
        assert isinstance(src, TaskSource) and src.detector is not None
    assert build_source("uniform_synth", seeds(3), BoundaryConfig(), BufferConfig()).config.synth_parents == "uniform"
    assert isinstance(build_source("dapo_filter", seeds(3), BoundaryConfig(), BufferConfig()), StaticSource)
    with pytest.raises(ValueError, match="unknown method"):
        build_source("rodz", seeds(3), BoundaryConfig(), BufferConfig())


# ----- admission control and a pool that never runs short ----------------------------------------------
def test_staged_backlog_is_bounded_so_every_variant_is_probed_within_the_wait_bound():
    cfg = dict(p_max=50, probe_slots=2, max_probe_wait=3, probe_obs=1)
    buf = buffer(4, **cfg)
    assert buf.room() == 6  # 2 slots x 3 steps
    ev = buf.offer(variants(8), step=0)
    assert [e.reason for e in ev].count("offer/staged") == 6 and buf.room() == 0
    first_probe = {}
    for step in range(1, 10):
        batch = buf.sample(4)
        for tid in batch:
            first_probe.setdefault(tid, step)
        observe(buf, step, {t: HARD for t in batch})
    staged = [f"v{i}" for i in range(6)]
    assert all(first_probe[v] <= cfg["max_probe_wait"] for v in staged)  # FIFO, two a step
    assert buf.room() == 6  # probed out (hard at the first probe): room again


def test_resting_seeds_fill_a_batch_before_any_task_repeats():
    buf = buffer(3, mastered_streak=1, reprobe_every=100)
    observe(buf, 1, {"s0": MASTERED, "s1": MASTERED})  # two seeds rest, one active
    assert buf.pools()["active"] == ["s2"]
    batch = buf.sample(3)
    assert sorted(batch) == ["s0", "s1", "s2"]  # distinct: resting seeds re-probed early
    ev = observe(buf, 2, {"s0": HARD, "s1": MASTERED, "s2": BOUNDARY})
    assert ("s0", "dormant", "active", "wake/hard") in reasons(ev)

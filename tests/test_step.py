"""The RODS step hooks in-process, with a real buffer, detector and synthesis worker: admission control,
the leak guard at the decision door, decisions applied under a guard, the step's metrics against the one
metric list, and the library's run path free of storage imports."""

from __future__ import annotations

import json
import threading

import pytest

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.leaks import TestSplitRefused
from rods_core.config import RunConfig
from rods_core.ranks import Ranks
from rods_core.recording import Decision
from rods_core.step import MAX_REASON, RodsStep, apply_decisions
from rods_core.tasksets import run_benchmark
from rods_core.trainer import RolloutReport
from tests.polling import wait_until

BOUNDARY = [1.0, 0.0, 1.0, 0.0]  # mean 0.5, variance 0.25: a boundary group


def report(groups: list[tuple[str, list[float]]]) -> RolloutReport:
    n = sum(len(r) for _, r in groups)
    return RolloutReport(groups=groups, accuracy=[0.0] * n, n_calls=[1] * n, model_tokens=10 * n)


def rods_step(synthesis: dict | None = None, **buffer) -> RodsStep:
    cfg = RunConfig.model_validate(
        {
            "method": "rods",
            "buffer": {"p_max": 4, "probe_slots": 1, "max_probe_wait": 2, **buffer},
            "synthesis": {"parents_per_step": 2, "n_per_parent": 1, **(synthesis or {})},
        }
    )
    return RodsStep(cfg, demo_seeds()[:4], Ranks(), run_benchmark(cfg))


def test_synthesis_is_asked_only_for_what_the_buffer_can_admit():
    cur = rods_step()
    seeds = [t.id for t in demo_seeds()[:4]]
    # the jobs finish only once step 1 is over: a job done before step 1's drain would be taken back a
    # step early, which a loaded machine can make happen, and every step below counts on when it arrives
    step_1_over, job = threading.Event(), cur.worker._job
    cur.worker._job = lambda *args: step_1_over.wait(60) and job(*args)
    try:
        out = cur.after_step(1, report([(t, BOUNDARY) for t in seeds]), [])  # every seed at the boundary
        assert cur.worker.submitted == 2 and out.metrics["synth/refused"] == 0  # room 2 (1 slot x 2 steps)
        assert out.metrics["synth/accepted"] == 0
        step_1_over.set()
        wait_until(lambda: cur.worker.in_flight == 0, "two synthesis jobs")
        out = cur.after_step(2, report([(t, BOUNDARY) for t in seeds]), [])
        staged = cur.source.pools()["staged"]
        assert out.metrics["synth/accepted"] == 2 and len(staged) == 2  # both admitted to staged
        # the staged backlog fills what one probe slot can probe in two steps: no more synthesis is asked
        assert cur.source.room() == 0 and cur.worker.submitted == 2
        out = cur.after_step(3, report([(t, BOUNDARY) for t in seeds]), [])
        assert cur.worker.submitted == 2 and out.events["boundary_sample"] == []
        # a probe resolves (hard twice: retired), the room comes back, synthesis resumes
        cur.after_step(4, report([(staged[0], [0.0] * 4)]), [])
        out = cur.after_step(5, report([(staged[0], [0.0] * 4)]), [])
        (row,) = [r for r in out.events["buffer"] if r["task_id"] == staged[0]]
        assert (row["to_pool"], row["reason"]) == ("retired", "probe/hard")  # the code, apart from its detail
        assert row["detail"].endswith("after 2 probe(s)")
        assert cur.source.room() == 1
        cur.after_step(6, report([(t, BOUNDARY) for t in seeds]), [])
        assert cur.worker.submitted == 3
    finally:
        cur.close()


def _fixed_schedule_run(late: bool) -> list[tuple[dict, dict]]:
    """Four steps of a deterministic-synthesis run whose worker is either done at once or late by ~0.4 s."""
    import time

    cur = rods_step({"deterministic": True, "apply_after": 2})
    seeds = [t.id for t in demo_seeds()[:4]]
    job = cur.worker._job
    cur.worker._job = lambda *args: (time.sleep(0.4) if late else None, job(*args))[1]
    out = []
    try:
        for step in range(1, 5):
            if not late:  # an idle machine: every job finished before the next step looks
                wait_until(lambda: cur.worker.in_flight == 0, "synthesis jobs")
            o = cur.after_step(step, report([(t, BOUNDARY) for t in seeds]), [])
            metrics = {k: v for k, v in o.metrics.items() if k.startswith(("synth/", "buffer/"))}
            out.append((metrics, cur.source.pools()))
    finally:
        cur.close()
    return out


def test_deterministic_synthesis_applies_each_steps_variants_at_a_fixed_later_step_however_late_the_worker():
    fast, late = _fixed_schedule_run(late=False), _fixed_schedule_run(late=True)
    assert fast == late  # every synth/ and buffer/ figure and every pool, step by step
    accepted = [m["synth/accepted"] for m, _ in fast]
    assert accepted[:2] == [0.0, 0.0] and accepted[2] == 2.0  # step 1's jobs land at step 3, not before
    assert [m["synth/queued"] for m, _ in fast][:2] == [2.0, 2.0]  # asked, not yet taken back


def test_an_edit_decision_carrying_a_test_split_task_is_refused_at_the_door():
    cur = rods_step()
    test_task = load_seeds("test", ("base",))[0]
    seed = demo_seeds()[0]
    edited = test_task.model_copy(update={"id": seed.id + "_e1"}).to_record()
    try:
        with pytest.raises(TestSplitRefused) as refused:  # apply_decisions turns the raise into a refusal
            cur._apply(Decision(1, seed.id, "edit", json.dumps({"task": edited})))
        assert "edit decision 1" in str(refused.value) and test_task.id not in cur.all_ids()
    finally:
        cur.close()


def test_a_step_reports_exactly_the_listed_metrics(tmp_path, tiny_model_dir):
    from rods_core.loop import StepWatcher
    from rods_lab.run import train
    from storage.schema import STEP_METRICS
    from tests.conftest import smoke_config

    rows = []

    class Keep(StepWatcher):
        def after_step(self, row: dict, drawn: list) -> None:
            rows.append(row)

    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 1}))
    train(cfg, run_id="metrics", log=lambda *_: None, watcher=Keep())
    assert len(rows) == 1
    logged = set(rows[0]) - {"step", "wall_s"}
    assert logged == set(STEP_METRICS), logged ^ set(STEP_METRICS)


def test_expected_tokens_come_from_a_tasks_last_group_or_its_parents_and_survive_a_checkpoint():
    cur = rods_step()
    a, b = (t.id for t in demo_seeds()[:2])
    try:
        rep = report([(a, BOUNDARY), (b, [1.0] * 4)])
        rep.group_tokens, rep.rank_tokens = [400, 120], [400, 120]
        out = cur.after_step(1, rep, [])
        assert cur.expected_tokens(a) == 100.0 and cur.expected_tokens(b) == 30.0
        assert out.metrics["train/rank_token_spread"] == pytest.approx(280 / 260)
        variant = cur.task(a).model_copy(update={"id": "v1"})
        variant.provenance = variant.provenance.model_copy(update={"parent_id": a})
        cur.source._tasks["v1"] = variant  # a variant never played yet: its parent's length
        assert cur.expected_tokens("v1") == 100.0 and cur.expected_tokens("nowhere") is None
        again = rods_step()
        again.load_state_dict(json.loads(json.dumps(cur.state_dict())))
        assert again.expected_tokens(b) == 30.0
        again.close()
    finally:
        cur.close()


def test_decisions_are_applied_in_order_each_failure_refused_with_a_bounded_reason():
    def apply(d: Decision) -> tuple[bool, str]:
        if d.action == "reject":
            raise KeyError(f"{d.task_id} is not in the staged pool")
        return d.task_id == "t1", "x" * (MAX_REASON + 50)

    got = apply_decisions([Decision(3, "t1", "approve", None), Decision(1, "t2", "reject", None)], apply)
    assert [(o.decision_id, o.outcome) for o in got] == [(3, "applied"), (1, "refused")]
    assert len(got[0].reason) == MAX_REASON and got[1].reason.startswith("KeyError: ")


def test_a_steps_decisions_come_back_as_outcomes_and_events_and_pools_only_when_they_change():
    cur = rods_step()
    seed = demo_seeds()[0]
    decisions = [
        Decision(7, seed.id, "approve", None),  # a seed is never awaiting review
        Decision(8, seed.id, "edit", "[1, 2]"),  # a payload that is not a JSON object
        Decision(9, seed.id, "edit", "x" * 1_000_001),  # over the payload bound
    ]
    # the boundary seed's synthesis job is held until the end: a variant it returned before step 2 (a warm
    # pipeline is fast enough) would move the pools this test expects to stay put
    test_over, job = threading.Event(), cur.worker._job
    cur.worker._job = lambda *args: test_over.wait(60) and job(*args)
    try:
        out = cur.after_step(1, report([(seed.id, BOUNDARY)]), decisions)
        assert [(o.decision_id, o.outcome) for o in out.decisions] == [(7, "refused"), (8, "refused"), (9, "refused")]
        assert "not awaiting review" in out.decisions[0].reason and "JSON object" in out.decisions[1].reason
        assert "limit" in out.decisions[2].reason
        rows = out.events["decision_applied"]
        assert [(r["step"], r["decision_id"], r["outcome"]) for r in rows] == [
            (1, 7, "refused"),
            (1, 8, "refused"),
            (1, 9, "refused"),
        ]
        assert out.pools is not None and {t.id for t in out.pools["seeds"]} == {t.id for t in demo_seeds()[:4]}
        assert cur.after_step(2, report([(seed.id, BOUNDARY)]), []).pools is None  # nothing moved
    finally:
        test_over.set()
        cur.close()


def test_a_decisions_pool_moves_are_logged_at_its_step_in_the_order_of_its_decision_applied_rows():
    cur = rods_step(review="gated", synthesis={"parents_per_step": 0})
    seed, *others = demo_seeds()
    kids = [  # content the pool does not hold (demo seeds it was not given), as variants of its first seed
        t.model_copy(update={"id": f"v{i}", "provenance": t.provenance.model_copy(update={"parent_id": seed.id})})
        for i, t in enumerate(others[3:5])
    ]
    assert [e.reason for e in cur.source.offer(kids, 0)] == ["offer/awaiting_review"] * 2
    try:
        decisions = [Decision(5, "v1", "reject", None), Decision(6, "v0", "approve", None)]
        out = cur.after_step(3, report([(seed.id, BOUNDARY)]), decisions)
        assert [(r["step"], r["decision_id"], r["outcome"]) for r in out.events["decision_applied"]] == [
            (3, 5, "applied"),
            (3, 6, "applied"),
        ]
        moved = [(r["step"], r["task_id"], r["to_pool"], r["reason"]) for r in out.events["buffer"]]
        assert [m for m in moved if m[3].startswith("decision/")] == [
            (3, "v1", "retired", "decision/reject"),
            (3, "v0", "staged", "decision/approve"),
        ]
        later = cur.after_step(4, report([(seed.id, BOUNDARY)]), [])
        assert not [r for r in later.events["buffer"] if r["reason"].startswith("decision/")]  # logged once
    finally:
        cur.close()

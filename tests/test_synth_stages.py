"""Each synthesis stage does its own work and can reject: Execute runs the plan (and judges it), Augment
perturbs the state of every category and re-verifies; attempts are structured records; the distance
knob moves how much a variant changes; synthesize_many is the one "variants of these parents" call."""

from __future__ import annotations

import json
import random
import time
from statistics import mean

import pytest
import typer
from typer.testing import CliRunner

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.bfcl.synth import merge_counts, synthesize, synthesize_many, variant_distance
from rods_core.benchmarks.bfcl.synth.critique import replays_clean
from rods_core.benchmarks.bfcl.synth.execute import execute
from rods_core.benchmarks.bfcl.synth.plan import Planner
from rods_core.benchmarks.bfcl.tasks import Message, Task
from rods_core.benchmarks.synth_worker import SynthWorker
from rods_core.benchmarks.synthesis import STAGES, StageError
from rods_core.benchmarks.task_files import write_tasks
from rods_core.benchmarks.toolcalls.parsing import Call, parse_calls
from rods_core.config import SynthesisConfig

SEEDS = {t.id: t for t in load_seeds("train")}
DEMO = demo_seeds()


def _plan(parent: Task, ok=lambda plan: True):
    """A plan of `parent` that Execute accepts and `ok` likes (bounded search over seeds)."""
    planner = Planner(parent)
    for s in range(100):
        try:
            plan = planner.plan(random.Random(s), compose=s % 2 == 1, draw_prob=0.5)
            execute(plan)
        except StageError:
            continue
        if ok(plan):
            return plan
    pytest.fail(f"no executable plan of {parent.id} in 100 seeds")


def _listing_parent() -> Task:
    """A file-system task that reads a file name from a listing by position ('the second one listed')."""
    files = {
        "b_notes.txt": {"type": "file", "content": "beta one\nbeta two"},
        "a_report.txt": {"type": "file", "content": "alpha one\nalpha two\nalpha three"},
    }
    return Task(
        id="listing_1",
        category="base",
        question=[[Message(content="Show me the files here, then the last 5 lines of the second one listed.")]],
        initial_config={"GorillaFileSystem": {"root": {"alex": {"type": "directory", "contents": files}}}},
        involved_classes=["GorillaFileSystem"],
        ground_truth=[["ls()", "tail(file_name='a_report.txt',lines=5)"]],
    )


# ----- attempts ---------------------------------------------------------------------------------------
def test_attempts_are_structured_records():
    for parent in DEMO[:12]:
        res = synthesize(parent, 2, set(), SynthesisConfig(max_attempts=8, seed=1))
        assert res.accepted == [a.variant for a in res.attempts if a.variant is not None]
        for a in res.attempts:
            stages = [o.stage for o in a.outcomes]
            assert stages == list(STAGES[: len(stages)]), stages  # in stage order, none skipped
            assert all(o.accepted for o in a.outcomes[:-1])
            if a.variant is not None:
                assert stages == list(STAGES) and a.outcomes[-1].accepted and a.stage is None
                assert a.reason == "accepted" and a.distance == variant_distance(a.variant) >= 1
            else:
                assert a.stage == stages[-1] and not a.outcomes[-1].accepted and a.reason == a.outcomes[-1].reason
        c = res.counts()
        assert c["plan"]["accepted"] + c["plan"]["rejected"] == len(res.attempts)


def test_worker_dedupe_turns_a_repeated_variant_into_an_augment_rejection_and_takes_a_seed():
    worker = SynthWorker(SynthesisConfig(queue_size=4, n_per_parent=2, max_attempts=16), job=synthesize)
    try:
        parent = DEMO[0]
        assert worker.submit(parent) and worker.submit(parent) and worker.submit(parent, seed=99)
        deadline = time.monotonic() + 60
        while worker.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        first, second, other_seed = worker.drain()
        assert first.accepted and not second.accepted
        dropped = [a for a in second.attempts if a.stage == "augment"]
        assert len(dropped) == len(first.accepted)
        assert all(a.variant is None and a.reason == "duplicates a variant handed out earlier" for a in dropped)
        assert other_seed.accepted  # another seed: other candidates, not the duplicates
    finally:
        worker.close()


# ----- Execute ----------------------------------------------------------------------------------------
def test_execute_reads_result_fed_values_itself():
    """The plan says which result a value comes from; Execute reads it there, whatever the dry run had."""
    plan = _plan(_listing_parent())
    tail = plan.calls[1]
    assert (("file_name", None) in tail.deps) and tail.call.name == "tail"
    tail.call = Call("tail", (), {**tail.call.kwargs, "file_name": "b_notes.txt"})  # a wrong planned value
    out = execute(plan)
    assert parse_calls(out.ground_truth[0][1])[0].kwargs["file_name"] == "a_report.txt"


def test_execute_rejects_a_read_that_returns_nothing():
    parent = SEEDS["multi_turn_base_1"]  # ... grep(file_name='log.txt', pattern='Error') ...
    plan = _plan(parent)
    grep = next(pc for pc in plan.calls if pc.call.name == "grep")
    grep.call = Call("grep", (), {**grep.call.kwargs, "pattern": "Zebraquux"})
    with pytest.raises(StageError, match=r"grep\(\) returns nothing where the parent's returned data") as e:
        execute(plan)
    assert e.value.stage == "execute"


def test_execute_rejects_a_write_that_changes_nothing():
    parent = SEEDS["multi_turn_base_73"]  # activateParkingBrake(mode='engage') on a released brake
    plan = _plan(parent)
    brake = next(pc for pc in plan.calls if pc.call.name == "activateParkingBrake")
    brake.call = Call("activateParkingBrake", (), {"mode": "release"})  # it is released already
    with pytest.raises(StageError, match=r"activateParkingBrake\(\) changes nothing where the parent's changed"):
        execute(plan)


# ----- Augment ----------------------------------------------------------------------------------------
def test_augment_perturbs_base_variants_and_keeps_them_verified():
    parents = [t for t in DEMO if t.involved_classes[0] in ("GorillaFileSystem", "TradingBot", "TravelAPI")][:10]
    on, _ = synthesize_many(parents, 2, None, SynthesisConfig(max_attempts=12))
    off, _ = synthesize_many(parents, 2, None, SynthesisConfig(max_attempts=12, perturb_config=False))
    by_id = {p.id: p for p in parents}
    assert all(v.initial_config == by_id[v.provenance.parent_id].initial_config for v in off)
    changed = [v for v in on if v.initial_config != by_id[v.provenance.parent_id].initial_config]
    assert len(changed) >= len(on) // 2, (len(changed), len(on))
    for v in on:
        assert v.category == "base"
        replays_clean(v)
        assert score_calls(v, v.ground_truth).accuracy == 1.0


def test_augment_rejects_a_state_that_moves_a_value_read_from_a_listing(tmp_path):
    """Renaming an unused file reorders the listing the task reads 'the second one' from: Augment's
    re-execution sees the ground truth change and rejects; what it accepts reads the right file.
    Shown through `rods synth --json`, whose counts then have every stage accepting and rejecting."""
    from rods_lab.cli.synth_cmd import synth

    app = typer.Typer()
    app.command()(synth)
    tasks = tmp_path / "pool.jsonl"
    write_tasks(tasks, [_listing_parent()])
    out = tmp_path / "v.jsonl"
    args = ["--from", "listing_1", "--tasks", str(tasks), "--n", "3", "--out", str(out), "--json", "--seed", "0"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    aug = json.loads(r.output)["stages"]["augment"]
    assert aug["accepted"] >= 1 and aug["reasons"].get("the new state changes a value") >= 1, aug


def test_every_stage_accepts_and_rejects_over_the_demo_seeds():
    _, results = synthesize_many(DEMO, 2, None, SynthesisConfig(max_attempts=16, seed=0))
    counts = merge_counts(results)
    for stage in ("plan", "execute", "rewrite", "critique"):
        assert counts[stage]["accepted"] > 0 and counts[stage]["rejected"] > 0, (stage, counts[stage])
    assert counts["augment"]["accepted"] > 0
    assert any(r.startswith("call _") and "changes nothing" in r for r in counts["execute"]["reasons"])


# ----- the distance knob ------------------------------------------------------------------------------
def test_distance_knob_moves_the_number_of_changes_monotonically():
    means, planned = [], []
    for d in (0.0, 0.5, 1.0):
        variants, results = synthesize_many(DEMO, 2, None, SynthesisConfig(distance=d, max_attempts=12), seed=0)
        assert len(variants) >= 40
        means.append(mean(variant_distance(v) for v in variants))
        planned.append(mean(a.distance for r in results for a in r.attempts if a.distance is not None))
        if d == 0.0:  # near: the parent's words with exactly one value changed
            near = [v for v in variants if "rewrite=substitute" in v.provenance.note]
            assert near and all(variant_distance(v) == 1 for v in near)
    assert means[0] < means[1] < means[2], means
    assert planned[0] < planned[1] < planned[2], planned


# ----- synthesize_many --------------------------------------------------------------------------------
def test_synthesize_many_seed_is_per_parent_and_overridable():
    a, b = DEMO[0], DEMO[10]
    both, _ = synthesize_many([a, b], 2, None, SynthesisConfig(), seed=7)
    alone, _ = synthesize_many([b], 2, None, SynthesisConfig(seed=7))
    assert [v.content_key() for v in both if v.provenance.parent_id == b.id] == [v.content_key() for v in alone]
    other, _ = synthesize_many([b], 2, None, SynthesisConfig(), seed=8)
    assert {v.content_key() for v in other} != {v.content_key() for v in alone}
    pool = {v.content_key() for v in alone}
    again, _ = synthesize_many([b], 2, pool, SynthesisConfig(seed=7))
    assert not {v.content_key() for v in again} & pool

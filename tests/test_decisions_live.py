"""Researcher decisions are hostile input: a live run receives schema-valid decisions that are wrong in
every way we know of, refuses each with a reason, and finishes."""

from __future__ import annotations

import copy

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.config import RunConfig
from rods_lab.run import train
from storage.control import ControlDB
from storage.reader import RunReader
from tests.conftest import smoke_config


def test_hostile_decisions_are_refused_with_reasons_and_the_run_finishes(tmp_path, tiny_model_dir):
    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2}))
    db = ControlDB(tmp_path / "ws" / "control.sqlite")
    run_dir = tmp_path / "runs" / "hostile"
    db.create_run("hostile", run_dir, cfg.model_dump(mode="json"), "rods", name="hostile")
    seed = demo_seeds()[0]
    record = seed.to_record()

    bad_state = copy.deepcopy(record)  # schema-valid, but the API class cannot load it (crashed runs before)
    bad_state["initial_config"] = {"GorillaFileSystem": {"root": "notadict"}}
    failing = copy.deepcopy(record)  # the ground truth's first call fails when replayed
    failing["ground_truth"][0] = ["cd(folder='no_such_folder_anywhere')"]
    huge = copy.deepcopy(record)  # a multi-megabyte payload
    huge["question"][0][0]["content"] = "x" * 2_000_000
    ids = [
        db.add_decision("hostile", seed.id, "edit", {"task": bad_state}).id,
        db.add_decision("hostile", seed.id, "edit", {"task": failing}).id,
        db.add_decision("hostile", seed.id, "edit", {"task": huge}).id,
        db.add_decision("hostile", "multi_turn_base_999_gone", "approve").id,  # retired meanwhile / never known
        db.add_decision("hostile", seed.id, "approve").id,  # a seed is never awaiting review
    ]

    train(cfg, run_id="hostile", log=lambda *_: None)

    assert db.get_run("hostile").status == "finished"
    decided = {d.id: d for d in db.decisions("hostile")}
    assert [decided[i].status for i in ids] == ["refused"] * 5
    reasons = [decided[i].reason for i in ids]
    assert all(r and len(r) <= 2000 for r in reasons), reasons
    assert "verification" in reasons[0] and "verification" in reasons[1]
    assert "limit" in reasons[2] and "unknown task" in reasons[3] and "not awaiting review" in reasons[4]
    events = RunReader(run_dir).query("select decision_id, outcome from decision_applied order by decision_id")
    assert events["decision_id"].tolist() == ids and set(events["outcome"]) == {"refused"}
    assert RunReader(run_dir).query("select step from step")["step"].tolist() == [1, 2]


def test_a_batch_is_applied_whole_at_one_step_boundary_exactly_once(tmp_path, tiny_model_dir):
    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2}))
    db = ControlDB(tmp_path / "ws" / "control.sqlite")
    run_dir = tmp_path / "runs" / "batch"
    db.create_run("batch", run_dir, cfg.model_dump(mode="json"), "rods", name="batch")
    seeds = [t.id for t in demo_seeds()[:6]]
    items = [(t, "reseed", {"mode": "synthesize"}) for t in seeds] + [("multi_turn_base_999_gone", "approve", None)]
    batch = db.add_decisions("batch", items, reviewer="ana", comment="more of these", seen_step=0)
    assert len({d.batch_id for d in batch}) == 1

    train(cfg, run_id="batch", log=lambda *_: None)

    decided = {d.id: d for d in db.audit("batch", batch_id=batch[0].batch_id)}
    assert [decided[d.id].status for d in batch] == ["applied"] * 6 + ["refused"]
    assert {decided[d.id].applied_step for d in batch} == {1}  # the whole batch at the first boundary
    assert {(d.author, d.comment) for d in decided.values()} == {("ana", "more of these")}
    events = RunReader(run_dir).query("select decision_id, step from decision_applied order by decision_id")
    assert events["decision_id"].tolist() == [d.id for d in batch]  # each exactly once
    assert set(events["step"]) == {1}
    trail = db.verify_audit("batch")  # the launch, then the trainer's claims and outcomes, in one chain
    assert trail.ok and trail.checked == 3 * len(batch) + 1 and trail.unchained == 0, trail

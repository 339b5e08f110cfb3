"""Identifiers by one rule: what it refuses, the ids it derives, Task.id validation, and an exported synthesized
variant replayed by bfcl-eval's OWN executor (which eval()s names built from the id) with its id unchanged."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from rods_core.benchmarks.bfcl.environment import BfclEnvironment
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.task_files import TaskFileError, read_tasks
from rods_core.ids import (
    MAX_ID_LEN,
    IdError,
    check_run_id,
    check_task_id,
    edit_id,
    is_valid_id,
    lineage_of,
    new_run_id,
    next_edit_id,
    variant_id,
)
from rods_lab.cli import app
from storage.pools import write_pools_snapshot

HOSTILE = [
    "../../etc/passwd",
    "../../escaped-run",
    "a/b",
    "a\\b",
    "a b",
    "a\x00b",
    "a\nb",
    "<script>alert(1)</script>",
    "multi_turn_base_10~11e2bd2b",  # the old variant form: "invalid decimal literal" under bfcl-eval
    "a-b",
    "a.b",
    ".",
    "",
    "é",
    "x" * (MAX_ID_LEN + 1),
]


def test_bfcl_ids_pass_and_hostile_ones_are_refused_with_the_rule(all_seeds):
    assert all(is_valid_id(t.id) for t in all_seeds)
    assert is_valid_id("x" * MAX_ID_LEN) and not is_valid_id(3) and not is_valid_id(None)
    for bad in HOSTILE:
        for check, kind in ((check_task_id, "task id"), (check_run_id, "run id")):
            with pytest.raises(IdError, match=f"^{kind} .* is not a valid id: use 1 to {MAX_ID_LEN} characters"):
                check(bad)


def test_derived_ids_follow_the_rule_and_stay_bounded():
    rid = new_run_id("my.run-name/../x")
    assert is_valid_id(rid) and "_my_run_name_x_" in rid
    assert is_valid_id(new_run_id("...")) and new_run_id("...").count("_run_") == 1
    first = variant_id("multi_turn_base_10", "11e2bd2b99")
    assert first == "multi_turn_base_10_g1_11e2bd2b"
    # a deep lineage keeps the root and counts generations; an edit keeps the generation it edited
    assert variant_id(first, "5eed7155ff") == "multi_turn_base_10_g2_5eed7155"
    assert variant_id(edit_id(first, 3), "0a0b0c0d") == "multi_turn_base_10_g2_0a0b0c0d"
    assert lineage_of("multi_turn_base_10") == ("multi_turn_base_10", 0)
    assert lineage_of("multi_turn_base_10_g12_5eed7155_e2") == ("multi_turn_base_10", 12)
    assert edit_id("multi_turn_base_10", 2) == "multi_turn_base_10_e2"
    assert next_edit_id("t", {"t_e1", "t_e2"}) == "t_e3" and next_edit_id("t", set()) == "t_e1"
    long_parent = "p" * MAX_ID_LEN
    deep = variant_id(long_parent, "abcdef0123")
    assert len(deep) == MAX_ID_LEN and deep.endswith("_g1_abcdef01") and is_valid_id(edit_id(deep, 12))
    with pytest.raises(IdError):
        variant_id("a~b", "abc")
    with pytest.raises(IdError):
        edit_id("t", 0)


def test_task_ids_are_validated_on_every_read(tmp_path, train_seeds):
    rec = train_seeds[0].to_record()
    with pytest.raises(ValidationError, match="is not a valid id"):
        Task.model_validate({**rec, "id": "../../etc/passwd"})
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": "bad id\n"}) + "\n")
    with pytest.raises(TaskFileError, match=r"t\.jsonl:2: id: Value error, task id 'bad id\\n' is not a valid id"):
        read_tasks(path, Task)


def test_exported_variant_replays_under_bfcl_evals_own_executor(tmp_path, train_seeds):
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    from rods_core.benchmarks.bfcl.synth.pipeline import synthesize
    from rods_core.config import SynthesisConfig

    parent = next(t for t in train_seeds if len(t.involved_classes) == 2)
    variant = synthesize(parent, 1, set(), SynthesisConfig(seed=0)).accepted[0]
    assert variant.id.startswith(f"{parent.id}_g1_") and variant.provenance.parent_id == parent.id
    runs = tmp_path / "runs"
    write_pools_snapshot(runs / "r1", {"seeds": [parent], "active": [variant]}, step=1)
    out = tmp_path / "active.jsonl"
    res = CliRunner().invoke(
        app, ["export", "--run", "r1", "--pool", "active", "--out", str(out), "--runs-dir", str(runs)]
    )
    assert res.exit_code == 0, res.output
    (exported,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert exported["id"] == variant.id  # unchanged

    # BFCL's executor caches instances in module globals by model and id: a fresh model name per test
    ours = BfclEnvironment(variant)
    for turn, calls in enumerate(exported["ground_truth"]):
        results, _ = execute_multi_turn_func_call(
            calls, exported["initial_config"], exported["involved_classes"], f"rods_{tmp_path.name}", exported["id"]
        )
        ours.start_turn(turn)
        assert not [r for r in results if r.startswith("Error during execution")], (turn, results)
        assert results == [o.result for c in calls for o in ours.execute(c)]  # the same semantics as our environment

    # why the rule exists: the old id form breaks every call of BFCL's executor
    results, _ = execute_multi_turn_func_call(
        exported["ground_truth"][0],
        exported["initial_config"],
        exported["involved_classes"],
        f"rods_old_{tmp_path.name}",
        f"{parent.id}~11e2bd2b",
    )
    assert results and all("invalid decimal literal" in r for r in results)

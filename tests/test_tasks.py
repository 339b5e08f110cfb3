"""Task model and JSONL: BFCL round trip, provenance, line-numbered all-or-nothing validation."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from rods_core.benchmarks.bfcl.tasks import Provenance, Task
from rods_core.benchmarks.task_files import TaskFileError, read_tasks, write_tasks


def _bfcl_records(cat: str, n: int = 5):
    root = resources.files("bfcl_eval").joinpath("data")
    fname = f"BFCL_v4_multi_turn_{cat}.json"
    qs = [json.loads(x) for x in root.joinpath(fname).read_text().splitlines()[:n]]
    ans = [json.loads(x) for x in root.joinpath("possible_answer", fname).read_text().splitlines()[:n]]
    return qs, ans


@pytest.mark.parametrize("cat", ["base", "miss_func", "miss_param", "long_context"])
def test_bfcl_records_round_trip(cat):
    for q, a in zip(*_bfcl_records(cat), strict=True):
        task = Task.from_bfcl(q, a)
        q2, a2 = task.to_bfcl()
        assert q2 == q and a2 == a


def test_jsonl_round_trip_keeps_provenance(tmp_path, all_seeds):
    tasks = all_seeds[:3] + [
        all_seeds[5].model_copy(
            update={"id": "v1", "provenance": Provenance(source="synth", parent_id="x", created_step=7)}
        )
    ]
    path = tmp_path / "t.jsonl"
    assert write_tasks(path, tasks) == 4
    back = read_tasks(path, Task)
    assert [t.model_dump() for t in back] == [t.model_dump() for t in tasks]
    assert back[-1].provenance.parent_id == "x" and back[-1].provenance.created_step == 7


def test_invalid_records_named_by_line_and_field_and_nothing_read(tmp_path, all_seeds):
    good = json.dumps(all_seeds[0].to_record())
    bad_class = all_seeds[1].to_record() | {"involved_classes": ["NoSuchAPI"]}
    bad_turns = all_seeds[2].to_record() | {"ground_truth": [["ls()"]]}
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([good, json.dumps(bad_class), "{not json", json.dumps(bad_turns), good]) + "\n")
    with pytest.raises(TaskFileError) as e:
        read_tasks(path, Task)
    lines = {ln for ln, _, _ in e.value.problems}
    fields = {f for _, f, _ in e.value.problems}
    assert lines == {2, 3, 4, 5}  # line 5 repeats line 1's id
    assert "involved_classes" in fields and "id" in fields
    assert f"{path}:2: involved_classes" in str(e.value)


def test_missing_category_is_inferred_only_from_bfcl_ids(tmp_path, all_seeds):
    rec = all_seeds[0].to_record()
    rec.pop("category")
    rec["id"] = "custom_task"
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(TaskFileError, match="category"):
        read_tasks(path, Task)


def test_export_only_fields_are_ignored_on_read(tmp_path, all_seeds):
    path = tmp_path / "t.jsonl"
    write_tasks(path, all_seeds[:2], extra={all_seeds[0].id: {"pool": "active", "stats": {"mean": 0.5}}})
    assert [t.id for t in read_tasks(path, Task)] == [t.id for t in all_seeds[:2]]

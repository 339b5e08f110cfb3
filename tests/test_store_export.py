"""Pools snapshot, JSONL export with statistics, loading it with `datasets`, and seed import (verified whole,
tags kept on re-import, the leak guard, nothing written on refusal)."""

from __future__ import annotations

import json
import math

import pytest

from rods_core.benchmarks.bfcl.tasks import Provenance, Task
from rods_core.benchmarks.leaks import TestSplitRefused
from rods_core.benchmarks.task_files import TaskFileError, read_tasks
from storage.catalog import import_seeds
from storage.control import ControlDB
from storage.events import EventLog
from storage.export import EmptyPool, export_pool, export_to_folder
from storage.pools import PoolsFileError, read_pools_snapshot, write_pools_snapshot


@pytest.fixture
def run_dir(tmp_path, all_seeds):
    """A run with 40 seeds, 6 synthesized variants staged/active and 4 retired, and statistics."""
    seeds = all_seeds[:40]
    variants = []
    for i, parent in enumerate(all_seeds[40:46]):
        v = parent.model_copy(deep=True)
        v.id = f"synth_{i}_of_{parent.id}"
        v.provenance = Provenance(source="synth", parent_id=parent.id, created_step=3, note="plan: same topology")
        variants.append(v)
    pools = {"seeds": seeds, "staged": variants[:2], "active": variants[2:], "retired": all_seeds[46:50]}
    d = tmp_path / "run"
    write_pools_snapshot(d, pools, step=5)
    with EventLog(d) as log:
        for step in (4, 5):
            log.append(
                "task_stats",
                [
                    {"step": step, "task_id": t.id, "n": 8, "mean": 0.5 + step / 100, "var": 0.25, "region": "boundary"}
                    for t in seeds[:10] + variants
                ],
            )
    return d


def test_snapshot_round_trip_and_errors(run_dir, tmp_path):
    snap = read_pools_snapshot(run_dir)
    assert snap.step == 5 and [len(snap.tasks(p)) for p in ("seeds", "staged", "active", "retired")] == [40, 2, 4, 4]
    assert len(snap.tasks("all")) == 50
    with pytest.raises(ValueError, match="pool must be one of"):
        snap.tasks("boundary")
    with pytest.raises(ValueError, match="unknown pool"):
        write_pools_snapshot(tmp_path / "x", {"hot": []})
    with pytest.raises(PoolsFileError, match="no pools snapshot"):
        read_pools_snapshot(tmp_path / "missing")
    doc = json.loads((run_dir / "pools.json").read_text())
    del doc["pools"]["active"][1]["involved_classes"]
    (run_dir / "pools.json").write_text(json.dumps(doc))
    with pytest.raises(PoolsFileError, match=r"pools\.active\[1\].*involved_classes"):
        read_pools_snapshot(run_dir)


def test_export_then_import_is_lossless(run_dir, tmp_path):
    out = tmp_path / "active.jsonl"
    assert export_pool(run_dir, "all", out) == 50
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    by_id = {r["id"]: r for r in lines}
    snap = read_pools_snapshot(run_dir)
    v = snap.tasks("active")[0]
    assert by_id[v.id]["pool"] == "active" and by_id[v.id]["provenance"]["parent_id"] == v.provenance.parent_id
    assert by_id[v.id]["stats"] == {
        "step": 5,
        "n": 8,
        "mean": 0.55,
        "var": 0.25,
        "smoothed_mean": None,
        "smoothed_var": None,
        "region": "boundary",
    }
    assert set(by_id[snap.tasks("retired")[0].id]["stats"].values()) == {None}  # no statistics: all null
    assert read_tasks(out, Task) == snap.tasks("all")  # pool and stats are ignored on re-read

    db = ControlDB(tmp_path / "control.sqlite")
    # the pools hold test-split seeds (and copies of them): this round trip checks losslessness, not the guard
    report = import_seeds(db, out.read_bytes(), str(out), "test", tags=["round-trip"], allow_test=True)
    assert (report.added, report.updated) == (50, 0)
    catalog = {s.task_id: s for s in db.list_seeds()}
    assert [catalog[t.id].task() for t in snap.tasks("all")] == snap.tasks("all")
    assert json.loads(catalog[v.id].tags) == ["round-trip"]
    again = import_seeds(db, out.read_bytes(), str(out), "test", tags=["again"], allow_test=True)
    assert again.updated == 50 and len(db.list_seeds()) == 50  # importing again replaces, never duplicates
    assert json.loads({s.task_id: s for s in db.list_seeds()}[v.id].tags) == ["again", "round-trip"]  # tags kept


def test_export_loads_with_datasets(run_dir, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "all.jsonl"
    export_pool(run_dir, "all", out)
    ds = datasets.load_dataset("json", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf"))
    snap = {t.id: t for t in read_pools_snapshot(run_dir).tasks("all")}
    assert ds.num_rows == 50 and {"pool", "stats", "provenance", "initial_config"} <= set(ds.column_names)
    for row in ds:
        orig = snap[row["id"]]
        assert row["question"] == [[m.model_dump() for m in turn] for turn in orig.question]
        assert row["ground_truth"] == orig.ground_truth and row["pool"] in ("seeds", "staged", "active", "retired")
        # pyarrow's JSON reader may parse a float one ulp off (1.567 -> 1.5670000000000002): compare with a tolerance.
        assert _close(row["initial_config"], orig.initial_config), row["id"]


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


def test_import_validates_the_whole_file_first(train_seeds, tmp_path):
    path = tmp_path / "seeds.jsonl"
    recs = [t.to_record() for t in train_seeds[:5]]
    del recs[3]["ground_truth"]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    opened = []
    with pytest.raises(TaskFileError, match=r"seeds\.jsonl:4: ground_truth"):
        import_seeds(lambda: opened.append(1), path.read_bytes(), str(path), "test")
    assert opened == []  # the database is not even opened for a refused file


def test_import_refuses_test_split_tasks_before_writing_anything(train_seeds, all_seeds, tmp_path):
    test_task = next(t for t in all_seeds if t.id not in {s.id for s in train_seeds})
    path = tmp_path / "seeds.jsonl"
    path.write_text("\n".join(json.dumps(t.to_record()) for t in [*train_seeds[:5], test_task]) + "\n")
    db = ControlDB(tmp_path / "control.sqlite")
    with pytest.raises(TestSplitRefused, match=f"(?s)my door .*1 task.*refused.*{test_task.id}"):
        import_seeds(db, path.read_bytes(), str(path), "my door")
    assert db.list_seeds() == []


def test_empty_pool_is_refused_and_export_names_stay_in_their_folder(run_dir, tmp_path):
    write_pools_snapshot(run_dir, {"seeds": read_pools_snapshot(run_dir).tasks("seeds"), "retired": []}, step=6)
    with pytest.raises(EmptyPool, match="retired pool .* holds no task; nothing was written"):
        export_pool(run_dir, "retired", tmp_path / "empty.jsonl")
    assert not (tmp_path / "empty.jsonl").exists()
    out, n = export_to_folder(run_dir, "seeds", tmp_path / "exports", "../../escaped-run")
    assert n == 40 and out.parent == tmp_path / "exports" and out.name == "______escaped_run-seeds.jsonl"

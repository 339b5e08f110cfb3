"""The seed catalog's table: each entry says which benchmark its task belongs to."""

from __future__ import annotations

import json

from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.memory.tasks import load_memory_seeds
from storage.catalog import seed_frame
from storage.control import ControlDB, Seed


def test_the_catalog_names_each_seeds_benchmark(tmp_path):
    db = ControlDB(tmp_path / "control.sqlite")
    bfcl, memory = load_seeds("train")[:2], load_memory_seeds("train")[:1]
    db.upsert_seeds([*bfcl, *memory], source="import")
    with db.engine.begin() as c:  # an entry written before records were stored, and one no task model reads
        c.execute(Seed.__table__.insert(), [{"task_id": "builtin_0", "record": None}])
        c.execute(Seed.__table__.insert(), [{"task_id": "unreadable_0", "record": json.dumps({"id": "x"})}])
    by_id = seed_frame(db).set_index("task_id").benchmark.to_dict()
    assert {by_id[t.id] for t in bfcl} == {"bfcl_multi_turn"}
    assert by_id[memory[0].id] == "bfcl_memory_kv, bfcl_memory_rec_sum"  # the backends share one task model
    assert by_id["builtin_0"] == "bfcl_multi_turn"
    assert by_id["unreadable_0"] == ""
    assert list(seed_frame(db).columns[:2]) == ["task_id", "benchmark"]


def test_a_plugin_whose_task_model_does_not_import_leaves_the_catalog_readable(tmp_path):
    """Naming each entry's benchmark asks every registered one for its task model: a plugin whose model does not
    import is passed over, never stopping the table (the Seeds page) for the rest."""
    from rods_core.benchmarks.registry import register_benchmark, unregister_benchmark
    from storage import catalog
    from tests.test_benchmark_training import Words

    db = ControlDB(tmp_path / "control.sqlite")
    bfcl = load_seeds("train")[:2]
    db.upsert_seeds(bfcl, source="import")
    register_benchmark("broken", Words, task_type="no_such_module_anywhere:Task")
    catalog._benchmarks_of.cache_clear(), catalog._facts_of.cache_clear()
    try:
        frame = seed_frame(db).set_index("task_id")
    finally:
        unregister_benchmark("broken")
        catalog._benchmarks_of.cache_clear(), catalog._facts_of.cache_clear()
    assert set(frame.benchmark[[t.id for t in bfcl]]) == {"bfcl_multi_turn"}
    assert all(frame.turns[[t.id for t in bfcl]] > 0)  # the facts read by the benchmark's own model

"""Seeds page: import (validated, line-numbered errors, all or nothing, confined), enable/disable, tags,
a run on a chosen subset."""

from __future__ import annotations

import json

from app_helpers import kill_group, page

from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.task_files import read_tasks, write_tasks
from rods_lab.paths import AppPaths
from rods_lab.processes import process_alive


def catalog():
    return {s.task_id: s for s in AppPaths.from_env().db().list_seeds()}


def test_import_errors_refusals_and_success(app_env):
    ws, _, _, _ = app_env
    tasks = load_seeds("train")[:3]
    good = ws / "imports" / "good.jsonl"
    write_tasks(good, tasks)
    bad = ws / "imports" / "bad.jsonl"
    lines = good.read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["ground_truth"]
    bad.write_text("\n".join([lines[0], json.dumps(broken), lines[2], "{not json"]) + "\n")
    at = page("pages/5_Seeds.py").run()
    assert not at.exception
    at.text_input(key="seeds_path").input("imports/bad.jsonl").run()
    at.button(key="seeds_import").click().run()
    assert any("Nothing was imported" in e.value for e in at.error)
    shown = " ".join(c.value for c in at.code)
    assert "bad.jsonl:2: ground_truth" in shown and "bad.jsonl:4: (json)" in shown
    assert not catalog()  # all or nothing
    at.text_input(key="seeds_path").input("../../etc/passwd").run()
    at.button(key="seeds_import").click().run()
    assert any("outside the workspace" in c.value for c in at.code) and any("Nothing" in e.value for e in at.error)
    test_task = load_seeds("test")[:1]
    write_tasks(ws / "imports" / "leak.jsonl", test_task)
    at.text_input(key="seeds_path").input("imports/leak.jsonl").run()
    at.button(key="seeds_import").click().run()
    assert any("refused" in c.value for c in at.code) and not catalog()
    at.text_input(key="seeds_path").input("imports/good.jsonl").run()
    at.text_input(key="seeds_import_tags").input("mine, handmade").run()
    at.button(key="seeds_import").click().run()
    assert not at.exception and any("Imported 3 new" in s.value for s in at.success)
    assert set(catalog()) == {t.id for t in tasks}
    assert json.loads(catalog()[tasks[0].id].tags) == ["handmade", "mine"]


def test_enable_disable_tag_and_run_on_subset(app_env):
    ws, runs, model, _ = app_env
    db = AppPaths.from_env().db()
    db.upsert_seeds(load_seeds("train")[3:6], source="bfcl")
    ids = sorted(catalog())
    at = page("pages/5_Seeds.py").run()
    at.multiselect(key="seeds_pick").set_value(ids[:2]).run()
    at.button(key="seeds_disable").click().run()
    assert [catalog()[i].enabled for i in ids[:3]] == [False, False, True]
    at.button(key="seeds_enable").click().run()
    assert catalog()[ids[0]].enabled
    at.text_input(key="seeds_new_tag").input("picked").run()
    at.button(key="seeds_addtag").click().run()
    assert "picked" in json.loads(catalog()[ids[1]].tags)
    at.button(key="seeds_untag").click().run()
    assert "picked" not in json.loads(catalog()[ids[1]].tags)
    at.multiselect(key="seeds_pick").set_value(ids[:2]).run()
    at.text_area(key="seeds_more").input(f"model.path={model}\ngrpo.max_steps=1").run()
    before = {r.id for r in db.list_runs()}
    at.button(key="seeds_launch").click().run()
    assert not at.exception and not at.error
    (run,) = [r for r in db.list_runs() if r.id not in before]
    try:
        assert process_alive(run.pid, run.proc_start)
        cfg = run.config_dict()["seeds"]
        assert cfg["subset"] == "file" and cfg["file"].startswith(str(ws.resolve()))
        assert [t.id for t in read_tasks(cfg["file"], Task)] == ids[:2]
    finally:
        kill_group(run.pid)


def test_bfcl_seed_set_tab(app_env):
    at = page("pages/5_Seeds.py").run()
    assert not at.exception
    assert at.metric[0].value == "400"


def test_enable_disable_and_tag_all_shown_at_once(app_env):
    db = AppPaths.from_env().db()
    db.upsert_seeds(load_seeds("train")[6:12], source="bfcl")
    n = len(catalog())
    at = page("pages/5_Seeds.py").run()
    at.checkbox(key="seeds_every").check().run()
    at.button(key="seeds_disable").click().run()
    assert any(f"Disabled {n} seed(s)" in s.value for s in at.success)
    assert not any(s.enabled for s in catalog().values())
    at.text_input(key="seeds_new_tag").input("bulk").run()
    at.button(key="seeds_addtag").click().run()
    assert all("bulk" in json.loads(s.tags) for s in catalog().values())
    at.button(key="seeds_enable").click().run()
    assert all(s.enabled for s in catalog().values())


def test_the_catalog_shows_and_filters_by_benchmark(app_env):
    from rods_core.benchmarks.memory.tasks import load_memory_seeds

    db = AppPaths.from_env().db()
    memory = load_memory_seeds("train")[:1]
    db.upsert_seeds([*load_seeds("train")[12:14], *memory], source="import")
    at = page("pages/5_Seeds.py").run()
    assert not at.exception
    assert "benchmark" in at.dataframe[0].value.columns
    at.selectbox(key="seeds_of_benchmark").select("bfcl_memory_kv, bfcl_memory_rec_sum").run()
    assert at.dataframe[0].value.task_id.tolist() == [memory[0].id]
    at.selectbox(key="seeds_of_benchmark").select("bfcl_multi_turn").run()
    assert memory[0].id not in at.dataframe[0].value.task_id.tolist()

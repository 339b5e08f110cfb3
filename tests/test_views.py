"""The app's pure views: structure table (and its signature cache), diffs, edits, variance ratio."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.protocols import Distance
from rods_core.benchmarks.registry import make_benchmark
from rods_lab import views
from storage.events import EventLog, PartFile, events_dir
from storage.pools import PoolsSnapshot
from storage.reader import RunReader


def test_structure_table_caches_signatures(tmp_path, monkeypatch):
    seeds = load_seeds("train")[:5]
    variant = seeds[0].model_copy(
        update={
            "id": "v1",
            "provenance": seeds[0].provenance.model_copy(update={"source": "synth", "parent_id": seeds[0].id}),
        }
    )
    snap = PoolsSnapshot(step=1, written_at=None, pools={"seeds": seeds, "staged": [variant]})
    cache, bench = tmp_path / "cache" / "structure.json", make_benchmark("bfcl_multi_turn")
    first = views.structure_table(snap, cache, bench)
    assert cache.exists() and len(first) == 6
    assert (
        first.set_index("task_id").loc["v1", "complexity"] == first.set_index("task_id").loc[seeds[0].id, "complexity"]
    )
    monkeypatch.setattr(bench, "structure", lambda t: pytest.fail("signature recomputed despite the cache"))
    pd.testing.assert_frame_equal(views.structure_table(snap, cache, bench), first)


def test_edited_task():
    task = load_seeds("train")[0]
    users = [u + (" please" if i == 0 else "") for i, u in enumerate(task.user_texts)]
    calls = ["\n".join(c) for c in task.ground_truth]
    edited = views.edited_task(task, users, calls)
    assert edited.user_texts[0].endswith(" please") and edited.ground_truth == task.ground_truth
    with pytest.raises(ValueError, match="turns"):
        views.edited_task(task, users[:1], calls)


def test_boundary_vs_others_weights_by_tasks():
    df = pd.DataFrame(
        {"step": [1, 1, 1], "region": ["boundary", "hard", "mastered"], "mean_var": [0.2, 0.1, 0.0], "n": [2, 1, 1]}
    )
    out = views.boundary_vs_others(df).iloc[0]
    assert out.boundary == pytest.approx(0.2) and out.others == pytest.approx(0.05) and out.ratio == pytest.approx(4)


def test_task_history_reads_the_reason_code_and_detail_apart_and_logs_without_detail(tmp_path):
    move = {"step": 3, "task_id": "v0", "from_pool": "active", "to_pool": "retired", "reason": "retire/stale"}
    with EventLog(tmp_path / "new") as log:
        log.append("buffer", {**move, "detail": "no informative group for 10 steps"})
    _, moves = views.task_history(RunReader(tmp_path / "new"), "v0")
    assert moves[["reason", "detail"]].values.tolist() == [["retire/stale", "no informative group for 10 steps"]]
    old = {**move, "reason": "retire/stale: no informative group for 10 steps", "seq": 0}
    (events_dir(tmp_path / "old") / "buffer").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([old]), events_dir(tmp_path / "old") / "buffer" / PartFile.name(0, 0, 3, 3))
    _, moves = views.task_history(RunReader(tmp_path / "old"), "v0")
    assert list(moves.columns) == ["step", "from_pool", "to_pool", "reason", "detail"]
    assert moves["reason"].tolist() == [old["reason"]] and moves["detail"].isna().all()


def test_a_runs_benchmark_comes_from_its_config_and_another_benchmarks_tasks_are_grouped(tmp_path):
    from rods_core.benchmarks.memory.tasks import load_memory_seeds
    from storage import curation

    run = tmp_path / "run"
    run.mkdir()
    assert views.run_benchmark(run).name == "bfcl_multi_turn"  # no config.yaml: a run from before the field
    (run / "config.yaml").write_text("benchmark: bfcl_memory_rec_sum\nprereq: fact\n")
    bench = views.run_benchmark(run)
    assert (bench.name, bench.prereq, views.has_structure(bench)) == ("bfcl_memory_rec_sum", "fact", False)
    (run / "config.yaml").write_text("benchmark: memory\n")
    with pytest.raises(views.RunBenchmarkError, match="config.yaml: cannot tell the run's benchmark: unknown"):
        views.run_benchmark(run)
    seed = load_memory_seeds("train")[0]
    prov = seed.provenance.model_copy(update={"source": "synth", "parent_id": seed.id})
    variant = seed.model_copy(update={"id": "v1", "answers": ["Other"], "source": "Other.", "provenance": prov})
    snap = PoolsSnapshot(step=1, written_at=None, pools={"seeds": [seed], "staged": [variant]})
    table = views.structure_table(snap, tmp_path / "cache.json", bench)
    assert set(table.class_combo) == set(table.category) == {seed.scenario} and not (tmp_path / "cache.json").exists()
    assert bench.distance(seed, variant) == Distance(2, 0, 0)  # the answer and the source
    rows = curation.review_rows(snap, {}, {}, pd.DataFrame(), [], bench=bench)
    assert rows[["task_id", "category", "class_combo", "values_changed"]].values.tolist() == [
        ["v1", seed.scenario, "", 2]
    ]


def test_the_review_editor_shows_a_memory_task_as_its_fields_and_reads_them_back():
    """Fix & Accept of a memory task: question and source as text, accepted answers a line each, one area per
    prerequisite conversation (a turn a line); the id and lineage are kept; what comes back is parsed as the
    benchmark's task, naming the field that fails."""
    from rods_core.benchmarks.memory.benchmark import BfclMemory
    from rods_lab.record_form import edited_from_form, form_fields

    bench = BfclMemory("kv")
    task = bench.seeds("train")[0]
    fields = {f.name: f for f in form_fields(task.to_record())}
    assert {n: f.kind for n, f in fields.items()} == {
        "scenario": "text",
        "question": "text",
        "answers": "lines",
        "source": "text",
        "sessions": "blocks",
    }
    texts = {n: f.value for n, f in fields.items()}
    assert edited_from_form(bench, task, texts) == task  # unchanged fields read back as the task itself
    first = texts["sessions"][0].splitlines()
    edited = edited_from_form(
        bench,
        task,
        {
            **texts,
            "question": "What is my name?",
            "answers": "Michael\n\n Mike\n",
            "sessions": ["\n".join([*first, "One more turn."]), *texts["sessions"][1:]],
        },
    )
    assert edited.question == "What is my name?" and edited.answers == ["Michael", " Mike"]
    assert edited.sessions[0] == [*task.sessions[0], "One more turn."] and edited.sessions[1:] == task.sessions[1:]
    assert (edited.id, edited.provenance) == (task.id, task.provenance)
    refused = {
        "question": ("", "question: String should have at least 1 character"),
        "answers": (" \n ", "answers: List should have at least 1 item"),
        "sessions": (["", *texts["sessions"][1:]], "sessions.0: List should have at least 1 item"),
    }
    for name, (value, needle) in refused.items():
        with pytest.raises(ValueError, match=f"not a bfcl_memory_kv task: .*{needle}"):
            edited_from_form(bench, task, {**texts, name: value})
    with pytest.raises(ValueError, match="sessions: the edit must keep its 10 item"):
        edited_from_form(bench, task, {**texts, "sessions": texts["sessions"][:-1]})


def test_a_json_field_of_the_review_editor_is_refused_as_a_value_error_whatever_it_holds():
    """A field that is neither text nor lines (a mapping, numbers) is edited as JSON: deep nesting (json's
    RecursionError), a 5,000-digit number, or no JSON at all each come back as a ValueError naming the field
    and the problem, never as a page traceback."""
    from rods_lab.record_form import form_fields, record_from_form

    record = {"id": "t_1", "word": "apple", "counts": {"a": 1}}
    assert [(f.name, f.kind) for f in form_fields(record)] == [("word", "text"), ("counts", "json")]
    assert record_from_form(record, {"counts": '{"a": 2}'})["counts"] == {"a": 2}
    cases = {
        "[" * 100_000: "nested deeper than",
        '{"a":' * 5000 + "1" + "}" * 5000: "nested deeper than",
        "9" * 5000: "digits",
        "{": "not valid JSON",
    }
    for text, needle in cases.items():
        with pytest.raises(ValueError, match=f"counts: .*{needle}"):
            record_from_form(record, {"counts": text})


def test_pickers_open_on_the_newest_synthesizing_run_unless_the_user_chose_one():
    table = pd.DataFrame({"id": ["twin", "pair", "old"], "method": ["static", "rods", "uniform_synth"]})
    assert views.default_run(table) == "pair"  # newer than it, the static twin has no variants to show
    assert views.default_run(table, remembered="twin") == "twin"
    assert views.default_run(table, remembered="gone") == "pair"
    assert views.default_run(table, synthesizing=False) == "twin"
    assert views.default_run(table[table.method == "static"]) == "twin"  # none synthesizes: the newest

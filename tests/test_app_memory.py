"""Every page over a real BFCL v4 memory run (the tiny model, 3 steps, uniform synthesis with review-gated
variants): memory questions and answers shown as the benchmark renders them, grouped by scenario, and
Review's Fix & Accept editing a variant's fields, verified before it is sent."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from app_helpers import kill_group, lab_env, page, rods, smoke_config

from rods_lab import views
from rods_lab.paths import AppPaths

MEMORY_RUN = "fx_memory"
# the four train questions with the shortest episodes (configs/memory-cpu.yaml)
SEEDS = ["memory_145_notetaker_15", "memory_142_notetaker_12", "memory_144_notetaker_14", "memory_143_notetaker_13"]


@pytest.fixture(scope="module")
def memory_env(tmp_path_factory, tiny_model_dir):
    """(workspace, run folder) of a real memory run (`rods train`, ~15 s on a loaded machine), shown by the
    app through RODS_* variables for this module's tests (restored after)."""
    base = tmp_path_factory.mktemp("memory_app")
    ws, runs = base / "ws", base / "runs"
    model = ws / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model)
    overrides = {
        "name": "fx_memory",
        "method": "uniform_synth",
        "benchmark": "bfcl_memory_kv",
        "prereq": "fact",
        "seeds.subset": "all",
        "seeds.ids": SEEDS,
        "seeds.limit": None,
        "episode.max_context_tokens": 4096,
        "eval.every": 0,
        "eval.split": "test",
        "buffer.review": "gated",
        "buffer.probe_slots": 1,
        "synthesis.parents_per_step": 2,
        "synthesis.n_per_parent": 2,
    }
    cfg = base / "memory.yaml"
    cfg.write_text(yaml.safe_dump(smoke_config(base, model, **overrides)))
    rods("train", "--config", str(cfg), "--run-id", MEMORY_RUN)
    with lab_env(ws, runs):
        yield ws, runs / MEMORY_RUN


def memory_page(path: str):
    at = page(path)
    at.session_state["lab_run"] = MEMORY_RUN
    return at


def texts(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_memory_pages_render_questions_and_answers_and_group_by_scenario(memory_env):
    _, run_dir = memory_env
    snap = views.snapshot(run_dir)
    staged = snap.tasks("staged")
    assert staged, "uniform synthesis staged no memory variant to review"
    for path in ("app.py", "pages/1_Launch.py", "pages/6_Compare.py", "pages/2_Boundary.py"):
        at = memory_page(path).run()
        assert not at.exception, path
    assert len(at.get("plotly_chart")) == 4  # the scatter, regions, variance, and success by scenario
    assert [s.key for s in at.selectbox] == ["boundary_run"]  # no class combination to pick
    at = memory_page("pages/4_Buffer.py").run()
    assert not at.exception
    variant = staged[0]
    at.selectbox(key="buffer_task").select(variant.id).run()
    assert not at.exception
    shown = texts(at)
    assert f"**Question:** {variant.question}" in shown and all(f"`{a}`" in shown for a in variant.answers)
    at = memory_page("pages/3_Review.py")
    at.session_state["review_reviewer"] = "ana"
    at.run()
    assert not at.exception
    assert set(at.multiselect(key="review_cats").options) == {"notetaker"}  # the scenario, memory's group
    focus = next(t for t in staged if t.id == at.selectbox(key="review_focus").value)
    parent = next(t for t in snap.tasks("all") if t.id == focus.provenance.parent_id)
    shown = texts(at)
    for task in (focus, parent):  # parent and variant side by side, the changed answer marked
        assert task.question in shown and all(a in shown for a in task.answers)
    assert ":green[▍] **Accepted answers:**" in shown


def test_memory_fix_and_accept_edits_the_fields_and_verifies_them_first(memory_env):
    db = AppPaths.from_env().db()
    n = len(db.decisions(MEMORY_RUN))
    at = memory_page("pages/3_Review.py")
    at.session_state["review_reviewer"] = "ana"
    at.run()
    tid = at.selectbox(key="review_focus").value
    at.button(key="review_focus_edit").click().run()
    key = f"review_f_{tid}_"
    shown = {ta.key.removeprefix(key): ta.value for ta in at.text_area if ta.key.startswith(key)}
    focus = next(t for t in views.snapshot(memory_env[1]).tasks("all") if t.id == tid)
    assert shown["question"] == focus.question and shown["answers"].splitlines() == focus.answers
    assert [shown[f"sessions_{i}"].splitlines() for i in range(len(focus.sessions))] == focus.sessions
    assert not any(k.startswith("id") or k.startswith("provenance") for k in shown)

    def submit(**edits: str):
        for name, value in {**shown, **edits}.items():
            at.text_area(key=key + name).input(value)
        next(b for b in at.button if b.proto.form_id == f"review_fix_{tid}").click().run()
        assert not at.exception
        return " ".join(e.value for e in at.error)

    assert "answers: List should have at least 1 item" in submit(answers=" \n ")
    assert "sessions.0: List should have at least 1 item" in submit(sessions_0="")
    assert "not a bfcl_memory_kv task" in submit(question="")
    assert "test-split leak" in submit(scenario="healthcare")  # the benchmark's own verification
    assert len(db.decisions(MEMORY_RUN)) == n  # nothing recorded for a failing edit
    assert not submit(question=shown["question"] + " Answer briefly.", answers=shown["answers"] + "\nMike")
    last = db.decisions(MEMORY_RUN)[-1]
    assert (last.task_id, last.action, last.author) == (tid, "edit", "ana")
    sent = last.payload_dict()["task"]
    assert sent["question"].endswith("Answer briefly.") and sent["answers"] == [*focus.answers, "Mike"]
    assert sent["sessions"] == focus.sessions and sent["id"] == tid


def test_memory_seeds_import_through_the_benchmark_and_launch_only_with_a_memory_config(memory_env):
    """The Seeds page's door reads a file as the chosen benchmark's tasks (schema, verifier, leak guard), the
    catalog shows them by scenario, and a run on them needs a config of their benchmark."""
    from rods_core.benchmarks.memory.tasks import MemoryTask, load_memory_seeds
    from rods_core.benchmarks.task_files import write_tasks
    from storage.catalog import seed_frame

    ws, _ = memory_env
    db = AppPaths.from_env().db()
    by_id = {t.id: t for t in load_memory_seeds("all")}
    write_tasks(ws / "imports" / "memory.jsonl", [by_id[i] for i in SEEDS[:2]])
    write_tasks(ws / "imports" / "leak.jsonl", load_memory_seeds("test")[:1])
    at = memory_page("pages/5_Seeds.py").run()

    def import_file(name: str):
        at.text_input(key="seeds_path").input(f"imports/{name}").run()
        at.button(key="seeds_import").click().run()
        assert not at.exception
        return " ".join(c.value for c in at.code)

    assert "memory.jsonl:1" in import_file("memory.jsonl")  # read as BFCL multi-turn tasks, the default
    assert any("Nothing was imported" in e.value for e in at.error) and not db.list_seeds()
    at.selectbox(key="seeds_benchmark").select("bfcl_memory_kv").run()
    assert "refused" in import_file("leak.jsonl") and not db.list_seeds()
    import_file("memory.jsonl")
    assert any("Imported 2 new" in s.value for s in at.success)
    assert all(isinstance(s.task(), MemoryTask) for s in db.list_seeds())
    assert set(seed_frame(db).category) == {"notetaker"}
    at.multiselect(key="seeds_pick").set_value(SEEDS[:2]).run()
    at.selectbox(key="seeds_config").select("demo-cpu").run()
    before = {r.id for r in db.list_runs()}
    at.button(key="seeds_launch").click().run()
    assert any("not bfcl_multi_turn tasks" in e.value for e in at.error)
    assert {r.id for r in db.list_runs()} == before  # nothing launched
    at.selectbox(key="seeds_config").select("memory-cpu").run()
    at.text_area(key="seeds_more").input(f"model.path={ws / 'models' / 'tiny'}\ngrpo.max_steps=1").run()
    at.button(key="seeds_launch").click().run()
    assert not at.exception and not at.error
    (run,) = [r for r in db.list_runs() if r.id not in before]
    try:
        cfg = run.config_dict()
        assert cfg["benchmark"] == "bfcl_memory_kv" and cfg["seeds"]["ids"] is None  # the chosen seeds are the pool
        with open(cfg["seeds"]["file"]) as f:
            assert [json.loads(line)["id"] for line in f] == SEEDS[:2]
    finally:
        kill_group(run.pid)

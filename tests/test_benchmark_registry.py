"""The benchmark registry is open: a benchmark registered here, in a test file, is named by a run config,
trains through the run path the app launches, and shows on the app's Boundary, Review and Buffer pages; an
installed package adds one through an entry point; the config refuses an unregistered name, listing the
registered ones."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from pydantic import ValidationError

from rods_core.benchmarks.registry import (
    ENTRY_POINT_GROUP,
    benchmark_entry,
    benchmark_names,
    discover_benchmarks,
    make_benchmark,
    parse_any_record,
    register_benchmark,
    task_type_of,
    unregister_benchmark,
)
from rods_core.config import RunConfig
from tests.test_benchmark_training import WORDS_RUN, Words, WordTask

BUILT_IN = ("bfcl_multi_turn", "bfcl_memory_kv", "bfcl_memory_rec_sum")


@pytest.fixture
def words():
    """`words` registered for one test (the registry is per process), then forgotten."""
    register_benchmark("words", Words, task_type=WordTask, description="say a word")
    try:
        yield
    finally:
        unregister_benchmark("words")


def test_a_registered_benchmark_is_named_by_a_config_and_built_by_the_registry(words):
    assert benchmark_names() == (*BUILT_IN, "words") and benchmark_entry("words").options == frozenset()
    assert RunConfig.model_validate({"benchmark": "words", "seeds": {"subset": "all"}}).benchmark == "words"
    assert isinstance(make_benchmark("words"), Words) and task_type_of("words") is WordTask
    assert parse_any_record({"id": "w_1", "word": "fern"}) == WordTask(id="w_1", word="fern")
    # its options are its entry's: BFCL multi-turn's demo seeds are refused on it, naming the field
    with pytest.raises(ValidationError, match="seeds.subset 'demo'.*benchmark words has none"):
        RunConfig.model_validate({"benchmark": "words", "seeds": {"subset": "demo"}})
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark("words", Words, task_type=WordTask)
    with pytest.raises(ValueError, match="unknown options \\['hint'\\]"):
        register_benchmark("words2", Words, task_type=WordTask, options={"hint"})


def test_an_unregistered_name_is_refused_at_validation_with_the_registered_names(tmp_path):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    with pytest.raises(ValidationError, match="benchmark") as e:
        RunConfig.model_validate({"benchmark": "words"})
    assert "unknown benchmark 'words'; choose one of bfcl_multi_turn, bfcl_memory_kv, bfcl_memory_rec_sum" in str(
        e.value
    )
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("benchmark: words\n")
    r = CliRunner().invoke(app, ["train", "--config", str(cfg)])
    assert r.exit_code == 2 and "benchmark: Value error, unknown benchmark 'words'" in r.output
    assert "Traceback" not in r.output


def _installed_plugin(tmp_path, entry_point: str, module: str) -> None:
    """A package installed on sys.path as pip would leave it: its module and a dist-info naming the entry point."""
    (tmp_path / "words_plugin.py").write_text(textwrap.dedent(module))
    info = tmp_path / "words_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: words-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_point}\n")


def test_an_installed_packages_entry_point_adds_a_benchmark(tmp_path, monkeypatch):
    """Discovery reads the group once per process (the CLI and the app alike); a broken plugin is reported
    when named and never stops the others."""
    _installed_plugin(
        tmp_path,
        "words = words_plugin:ENTRY\nbroken = words_plugin:MISSING",
        """
        from rods_core.benchmarks.registry import BenchmarkEntry
        from tests.test_benchmark_training import Words, WordTask

        ENTRY = BenchmarkEntry("words", Words, WordTask, description="say a word")
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        not_loaded = discover_benchmarks(again=True)
        assert "words" in benchmark_names() and isinstance(make_benchmark("words"), Words)
        assert list(not_loaded) == ["broken"] and "words_plugin:MISSING" in not_loaded["broken"]
        with pytest.raises(ValidationError, match="benchmark 'broken' did not load: entry point broken"):
            RunConfig.model_validate({"benchmark": "broken"})
    finally:
        unregister_benchmark("words")
        monkeypatch.undo()
        assert discover_benchmarks(again=True) == {}
    assert "words" not in benchmark_names()


def test_the_built_ins_are_entries_like_any_other():
    for name in BUILT_IN:
        entry = benchmark_entry(name)
        assert make_benchmark(name).options == entry.options
        assert isinstance(entry.factory, str) and ":" in entry.factory  # imported when first built


def test_a_benchmark_registered_in_a_test_trains_by_name_and_shows_in_the_app(words, tmp_path, tiny_model_dir):
    """`benchmark: words` in a run config: trained 2 steps through the run path the app launches (no
    benchmark object handed to it), then the Boundary, Review and Buffer pages of that run, rendered in this
    process (where `words` is registered, as an entry point registers it in the app's process)."""
    from app_helpers import lab_env, page

    from rods_lab.run import train
    from tests.conftest import smoke_config

    overrides = {"benchmark": "words", **WORDS_RUN}
    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **overrides))
    run_dir = train(cfg, run_id="words_run", log=lambda *_: None)
    assert (run_dir / "final" / "config.json").exists()
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["benchmark"] == "words"  # what the pages read
    seeds = {t.id for t in Words().seeds("train")}

    with lab_env(tmp_path / "ws", tmp_path / "runs"):
        pages = {}
        for name, path in (("boundary", "2_Boundary"), ("review", "3_Review"), ("buffer", "4_Buffer")):
            at = page(f"pages/{path}.py")
            at.session_state["lab_run"] = "words_run"
            pages[name] = at.run()
            assert not pages[name].exception, (name, pages[name].exception)

    scatter = next(c for c in pages["boundary"].get("plotly_chart") if c.proto.id.endswith("boundary_scatter"))
    assert any(tid in scatter.proto.spec for tid in seeds)
    assert pages["boundary"].get("plotly_chart")[-1].proto.id.endswith("boundary_groups")  # success by group
    review = pages["review"].dataframe[0].value
    assert len(review) and all(tid.split("_s")[0] in seeds for tid in review.task_id)  # word_N_sK variants
    buffer = pages["buffer"].dataframe[0].value
    assert seeds <= set(buffer.task_id)
    assert any("say " in m.value for m in pages["buffer"].markdown)  # the task as Words renders it


def test_a_plugin_whose_task_model_does_not_import_never_stops_other_records_being_read():
    """The seed catalog reads records of every benchmark; one plugin's broken import fails only its own."""
    seed = make_benchmark("bfcl_multi_turn").seeds("train")[0]
    register_benchmark("broken", Words, task_type="no_such_module_anywhere:Task")
    try:
        assert parse_any_record(seed.to_record()) == seed
        with pytest.raises(ModuleNotFoundError):
            task_type_of("broken")
    finally:
        unregister_benchmark("broken")


def test_a_record_no_task_model_can_read_because_none_imports_is_a_value_error(monkeypatch):
    import rods_core.benchmarks.registry as registry

    register_benchmark("broken", Words, task_type="no_such_module_anywhere:Task")
    monkeypatch.setattr(registry, "benchmark_names", lambda: ["broken"])
    try:
        with pytest.raises(ValueError, match="no registered benchmark's task model could be imported"):
            parse_any_record({"id": "x"})
    finally:
        unregister_benchmark("broken")


def test_a_benchmark_declaring_demo_seeds_must_offer_them():
    """`seeds.subset: demo` and the warm start read the option and call demo_seeds(): a plugin declaring one
    without the other is refused where it is built, naming both, not deep inside a run."""
    register_benchmark("words", Words, task_type=WordTask, options={"demo_seeds"})
    try:
        with pytest.raises(TypeError, match="'words' declares the demo_seeds option but has no demo_seeds"):
            make_benchmark("words")
    finally:
        unregister_benchmark("words")
    assert make_benchmark("bfcl_multi_turn").demo_seeds()

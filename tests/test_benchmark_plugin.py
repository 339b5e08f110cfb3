"""A benchmark with an option of its own, written in one file (tests/echo_benchmark.py) and registered by
`register_benchmark`: a run config names it and sets its option, which trains by name; a bad value is refused
naming the field, by the config and by `rods train`; `rods config benchmarks` and the Launch page show the
option, drawn from its schema."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from rods_core.benchmarks.registry import unregister_benchmark
from rods_core.config import RunConfig
from tests import echo_benchmark


@pytest.fixture
def echo():
    """`echo` registered for one test (the registry is per process), then forgotten."""
    echo_benchmark.register()
    try:
        yield
    finally:
        unregister_benchmark(echo_benchmark.NAME)


def test_a_one_file_benchmark_trains_by_name_with_its_option(echo, tmp_path, tiny_model_dir):
    from rods_lab.run import train
    from rods_lab.views import run_benchmark
    from tests.conftest import smoke_config

    overrides = {
        "benchmark": "echo",
        "benchmark_options": {"times": 3},
        "method": "static",
        "seeds.subset": "all",
        "eval.split": "test",
        "grpo.max_steps": 2,
    }
    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **overrides))
    assert cfg.benchmark_options == {"times": 3}
    run_dir = train(cfg, run_id="echo_run", log=lambda *_: None)
    assert (run_dir / "final" / "config.json").exists()
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (saved["benchmark"], saved["benchmark_options"]) == ("echo", {"times": 3})
    assert run_benchmark(run_dir).times == 3  # what the app's pages rebuild from the run folder


def test_a_bad_option_is_refused_naming_the_field(echo, tmp_path):
    from rods_lab.cli import app

    with pytest.raises(ValidationError, match=r"benchmark_options.times: Input should be less than or equal to 5"):
        RunConfig.model_validate({"benchmark": "echo", "benchmark_options": {"times": 9}})
    with pytest.raises(ValidationError, match=r"benchmark_options.loud: Extra inputs are not permitted.*echo: times"):
        RunConfig.model_validate({"benchmark": "echo", "benchmark_options": {"loud": True}})
    with pytest.raises(ValidationError, match="prereq 'fact': an option of bfcl_memory_kv"):
        RunConfig.model_validate({"benchmark": "echo", "prereq": "fact"})  # memory's option is not echo's
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("benchmark: echo\nbenchmark_options:\n  times: 0\n")
    r = CliRunner().invoke(app, ["train", "--config", str(cfg)])
    assert r.exit_code == 2 and "benchmark_options.times: Input should be greater than or equal to 1" in r.output
    assert str(cfg) in r.output and "Traceback" not in r.output
    listed = CliRunner().invoke(app, ["config", "benchmarks"])
    assert "echo: say a word N times" in listed.output
    assert "benchmark_options.times: int (default 2): how many times a reply must say the word" in listed.output


def test_the_launch_page_lists_it_and_draws_its_option_from_the_schema(echo, app_env):
    from app_helpers import page

    from rods_lab.paths import AppPaths

    db = AppPaths.from_env().db()
    before = {r.id for r in db.list_runs()}
    at = page("pages/1_Launch.py").run()
    assert not at.exception
    assert "echo" in at.selectbox(key="launch_benchmark").options
    at.selectbox(key="launch_benchmark").select("echo").run()
    times = at.number_input(key="launch_opt_echo_times")
    assert times.value == 2 and "how many times" in times.help
    times.set_value(9)
    at.button[0].click().run()  # the form's submit button: refused, beside the option
    assert not at.exception
    assert any("benchmark_options" in e.value and "less than or equal to 5" in e.value for e in at.error)
    assert {r.id for r in db.list_runs()} == before  # nothing launched

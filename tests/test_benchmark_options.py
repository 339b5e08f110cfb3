"""Each benchmark declares what a run may set on it: the shared run fields it uses (its registry entry's
`options`), refused on the others by that declaration, never by the benchmark's name; and its own options
(its entry's `options_model`, a run's `benchmark_options`), validated by the entry and given to its factory.
Memory's `prereq` is one of those, still read at the top level of older configs."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from rods_core.benchmarks.registry import benchmark_entry, benchmark_names, make_benchmark
from rods_core.config import RunConfig, dump_config, load_config
from rods_core.config import benchmark_entries as entries
from rods_core.config.run import benchmark_option_problems


def test_every_named_benchmark_declares_its_options_as_the_config_checks_them():
    for name in benchmark_names():
        assert make_benchmark(name).options == benchmark_entry(name).options


def test_the_config_refuses_a_shared_field_the_benchmark_does_not_declare(monkeypatch):
    cfg = RunConfig.model_construct(**{**RunConfig().__dict__, "benchmark": "bfcl_memory_kv", "method": "env_augment"})
    assert [p.split(":")[0] for p in benchmark_option_problems(cfg)] == ["method env_augment / episode.hints"]
    # the declaration decides: give memory BFCL multi-turn's hints and the same config passes
    entry = benchmark_entry("bfcl_memory_kv")
    monkeypatch.setitem(entries._ENTRIES, entry.name, dataclasses.replace(entry, options=entry.options | {"hints"}))
    assert benchmark_option_problems(cfg) == []


def test_memorys_prereq_is_its_own_option_validated_by_its_entry():
    memory = RunConfig.model_validate({"benchmark": "bfcl_memory_kv", "benchmark_options": {"prereq": "fact"}})
    assert (
        memory.benchmark_options == {"prereq": "fact"} and make_benchmark("bfcl_memory_kv", options={}).prereq == "all"
    )
    assert RunConfig(benchmark="bfcl_memory_rec_sum").benchmark_options == {"prereq": "all"}  # defaults filled in
    assert RunConfig().benchmark_options == {}  # BFCL multi-turn has none
    with pytest.raises(ValidationError, match=r"benchmark_options.prereq: Input should be 'all' or 'fact'"):
        RunConfig.model_validate({"benchmark": "bfcl_memory_kv", "benchmark_options": {"prereq": "some"}})
    with pytest.raises(ValidationError, match=r"benchmark_options.prereq: Extra inputs.*bfcl_multi_turn: none"):
        RunConfig.model_validate({"benchmark_options": {"prereq": "fact"}})
    with pytest.raises(ValueError, match=r"benchmark_options.prereq: Input should be"):
        make_benchmark("bfcl_memory_kv", options={"prereq": "some"})


def test_an_older_configs_top_level_prereq_still_loads(tmp_path):
    """`prereq:` at the top level (configs and saved config.yaml files written before benchmark_options, and
    `--set prereq=...`) is memory's option; its saved value on BFCL multi-turn is dropped, another is refused."""
    legacy = RunConfig.model_validate({"benchmark": "bfcl_memory_kv", "prereq": "fact"})
    assert legacy.benchmark_options == {"prereq": "fact"} and legacy.prereq == "fact"
    assert RunConfig.model_validate({"prereq": "all"}).benchmark_options == {}  # every saved BFCL config has it
    with pytest.raises(ValidationError, match="prereq 'fact': an option of bfcl_memory_kv, bfcl_memory_rec_sum"):
        RunConfig.model_validate({"prereq": "fact"})
    with pytest.raises(ValidationError, match="set it in one place"):
        RunConfig.model_validate(
            {"benchmark": "bfcl_memory_kv", "prereq": "fact", "benchmark_options": {"prereq": "all"}}
        )
    path = tmp_path / "old.yaml"
    path.write_text("benchmark: bfcl_memory_kv\nprereq: all\n")
    assert load_config(path, {"prereq": "fact"}).benchmark_options == {"prereq": "fact"}  # --set prereq=fact
    saved = yaml.safe_load(dump_config(load_config(path)))
    assert "prereq" not in saved and saved["benchmark_options"] == {"prereq": "all"}
    assert RunConfig.model_validate(saved) == load_config(path)  # a new config.yaml reads back the same


def test_rods_train_refuses_a_bad_option_with_its_file_and_field(tmp_path):
    from rods_lab.cli import app

    cfg = tmp_path / "bad.yaml"
    cfg.write_text("benchmark: bfcl_memory_kv\nbenchmark_options:\n  prereq: some\n")
    r = CliRunner().invoke(app, ["train", "--config", str(cfg)])
    assert r.exit_code == 2 and str(cfg) in r.output and "benchmark_options.prereq: Input should be" in r.output
    assert "Traceback" not in r.output


def test_rods_config_benchmarks_lists_each_benchmarks_options_from_its_schema():
    from rods_lab.cli import app

    r = CliRunner().invoke(app, ["config", "benchmarks"])
    assert r.exit_code == 0, r.output
    assert "benchmark_options.prereq: 'all' | 'fact' (default 'all')" in r.output
    assert "bfcl_multi_turn" in r.output and "(no options of its own)" in r.output


def test_rods_eval_takes_a_benchmarks_own_option_and_refuses_a_bad_one_naming_it(tiny_model_dir):
    """`--option KEY=VALUE` is read by the named benchmark's options model (`--prereq` is memory's shorthand);
    a value or a key it refuses is exit 2 before any episode is played."""
    from rods_lab.cli import app

    base = ["eval", "--model", str(tiny_model_dir), "--limit", "1"]
    r = CliRunner().invoke(app, [*base, "--benchmark", "bfcl_memory_kv", "--option", "prereq=some"])
    assert r.exit_code == 2 and "benchmark_options.prereq: Input should be 'all' or 'fact'" in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--option", "prereq=fact"])  # BFCL multi-turn has no options
    assert r.exit_code == 2 and "benchmark_options.prereq: Extra inputs are not permitted" in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--benchmark", "bfcl_memory_kv", "--prereq", "all", "--option", "prereq=fact"])
    assert r.exit_code == 2 and "set it in one place" in r.output, r.output
    assert "--option" in CliRunner().invoke(app, ["eval", "--help"]).output

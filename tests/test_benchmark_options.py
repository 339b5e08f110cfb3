"""Each benchmark declares the run options it has (its registry entry's `options`); the config refuses
the others by that declaration, never by the benchmark's name."""

from __future__ import annotations

import dataclasses

from rods_core.benchmarks import entries
from rods_core.benchmarks.registry import benchmark_entry, benchmark_names, make_benchmark
from rods_core.config import RunConfig
from rods_core.config.run import benchmark_option_problems


def test_every_named_benchmark_declares_its_options_as_the_config_checks_them():
    for name in benchmark_names():
        assert make_benchmark(name).options == benchmark_entry(name).options


def test_the_config_refuses_an_option_the_benchmark_does_not_declare(monkeypatch):
    cfg = RunConfig.model_construct(**{**RunConfig().__dict__, "prereq": "fact"})
    assert [p.split(":")[0] for p in benchmark_option_problems(cfg)] == ["prereq 'fact'"]
    # the declaration decides: give BFCL multi-turn memory's option and the same config passes
    entry = benchmark_entry("bfcl_multi_turn")
    monkeypatch.setitem(entries._ENTRIES, entry.name, dataclasses.replace(entry, options=entry.options | {"prereq"}))
    assert benchmark_option_problems(cfg) == []

"""Each benchmark declares the run options it has (BENCHMARK_OPTIONS, its `options`); the config refuses the
others by that declaration, never by the benchmark's name."""

from __future__ import annotations

from rods_core.benchmarks.registry import make_benchmark
from rods_core.config import BENCHMARK_NAMES, BENCHMARK_OPTIONS, RunConfig
from rods_core.config.run import benchmark_option_problems


def test_every_named_benchmark_declares_its_options_as_the_config_checks_them():
    for name in BENCHMARK_NAMES:
        assert make_benchmark(name).options == BENCHMARK_OPTIONS[name]


def test_the_config_refuses_an_option_the_benchmark_does_not_declare(monkeypatch):
    cfg = RunConfig.model_construct(**{**RunConfig().__dict__, "prereq": "fact"})
    assert [p.split(":")[0] for p in benchmark_option_problems(cfg)] == ["prereq 'fact'"]
    # the declaration decides: give BFCL multi-turn memory's option and the same config passes
    monkeypatch.setitem(BENCHMARK_OPTIONS, "bfcl_multi_turn", BENCHMARK_OPTIONS["bfcl_multi_turn"] | {"prereq"})
    assert benchmark_option_problems(cfg) == []

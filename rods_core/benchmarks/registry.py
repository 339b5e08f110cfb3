"""The benchmarks by name (the config's and `rods eval`'s `benchmark` value): one factory that builds any
registered one (config/benchmark_entries.py: the built-ins, `register_benchmark` calls and installed entry points) with the
episode settings they share (prompt format, tool-call messages per turn, hints, synthesis) and its own options
(its entry's options model: a run's `benchmark_options`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rods_core.benchmarks.protocols import Benchmark, DemoSeeds
from rods_core.benchmarks.task_files import record_parser
from rods_core.config import BenchmarkName, PromptConfig
from rods_core.config.benchmark_entries import (
    ENTRY_POINT_GROUP,
    BenchmarkEntry,
    benchmark_entry,
    benchmark_names,
    discover_benchmarks,
    register_benchmark,
    unknown_benchmark,
    unregister_benchmark,
)
from rods_core.config.run import DEFAULT_BENCHMARK

__all__ = [
    "DEFAULT_BENCHMARK",
    "ENTRY_POINT_GROUP",
    "BenchmarkEntry",
    "BenchmarkName",
    "benchmark_entry",
    "benchmark_names",
    "benchmark_problem",
    "discover_benchmarks",
    "loadable_task_types",
    "make_benchmark",
    "parse_any_record",
    "register_benchmark",
    "task_type_of",
    "unregister_benchmark",
]


def benchmark_problem(name: str, *, hints: bool = False) -> str | None:
    """Why `name` (with these options) names no benchmark, or None: a rule the config and the CLI share."""
    problem = unknown_benchmark(name)
    if problem:
        return problem
    if hints and "hints" not in benchmark_entry(name).options:
        having = ", ".join(n for n in benchmark_names() if "hints" in benchmark_entry(n).options)
        return f"hints (the env_augment baseline) exist for {having} only, not {name!r}"
    return None


def make_benchmark(
    name: str,
    *,
    prompt: PromptConfig | None = None,
    max_steps_per_turn: int = 4,
    hints: bool = False,
    options: BaseModel | dict[str, Any] | None = None,
    synth=None,
    scratch: Path | None = None,
) -> Benchmark:
    """The named benchmark, its factory given the settings it takes: `prompt` shapes BFCL multi-turn's
    messages (memory speaks BFCL's own memory prompts); `options` are its own (a run's `benchmark_options`,
    validated by its entry's options model: ValueError naming the field; None = their defaults); `synth` is
    BFCL multi-turn's pipeline settings (a run's `synthesis:` section; the defaults when None); `scratch` is
    where memory's synthesizer plays its verification episodes (a run's scratch folder; the system's temporary
    folder when None; BFCL multi-turn's pipeline writes no files)."""
    problem = benchmark_problem(name, hints=hints)
    if problem:
        raise ValueError(problem)
    entry = benchmark_entry(name)
    settings = {"prompt": prompt, "max_steps_per_turn": max_steps_per_turn, "hints": hints}
    bench = entry.build(**settings, options=entry.validate_options(options), synth=synth, scratch=scratch)
    if "demo_seeds" in entry.options and not isinstance(bench, DemoSeeds):  # what readers of the option call
        raise TypeError(f"benchmark {name!r} declares the demo_seeds option but has no demo_seeds() (DemoSeeds)")
    return bench


def task_type_of(name: str) -> type:
    """The task model of the named benchmark, without building it (readers of a run's records)."""
    return benchmark_entry(name).load_task_type()


def parse_any_record(rec: Any) -> Any:
    """A record of a store that holds tasks of every benchmark (the seed catalog), read by the first task
    model, in registration order, whose schema it fits; the first model's error when none does."""
    first_error = None
    for kind in dict.fromkeys(kind for _, kind in loadable_task_types()):
        try:
            return record_parser(kind)(rec)
        except ValueError as e:
            first_error = first_error or e
    raise first_error or ValueError("no registered benchmark's task model could be imported") from None


def loadable_task_types() -> list[tuple[str, type]]:
    """Every registered benchmark's name and task model, in registration order; a plugin whose model does not
    import is passed over (naming it gives its error), so it never stops the others' records being read."""
    pairs = []
    for name in benchmark_names():
        try:
            pairs.append((name, task_type_of(name)))
        except Exception:  # noqa: BLE001 - a broken plugin's import error: its own records fail, no one else's
            continue
    return pairs

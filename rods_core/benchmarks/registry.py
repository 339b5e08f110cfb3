"""The benchmarks by name (the config's and `rods eval`'s `benchmark` value): one factory that builds any of
them with the episode settings they share (prompt format, tool-call messages per turn, hints, prereq)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rods_core.benchmarks.bfcl_multi_turn import BfclMultiTurn
from rods_core.benchmarks.protocols import Benchmark
from rods_core.config import BENCHMARK_NAMES, BENCHMARK_OPTIONS, BenchmarkName, Prereq, PromptConfig
from rods_core.tasks import parse_record, record_parser

__all__ = [
    "BENCHMARK_NAMES",
    "DEFAULT_BENCHMARK",
    "BenchmarkName",
    "Prereq",
    "benchmark_problem",
    "make_benchmark",
    "parse_any_record",
    "task_type_of",
]
DEFAULT_BENCHMARK = "bfcl_multi_turn"


def benchmark_problem(name: str, *, hints: bool = False) -> str | None:
    """Why `name` (with these options) names no benchmark, or None: a rule the config and the CLI share."""
    if name not in BENCHMARK_NAMES:
        return f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARK_NAMES)}"
    if hints and "hints" not in BENCHMARK_OPTIONS[name]:
        return f"hints (the env_augment baseline) exist for bfcl_multi_turn only, not {name!r}"
    return None


def make_benchmark(
    name: str = DEFAULT_BENCHMARK,
    *,
    prompt: PromptConfig | None = None,
    max_steps_per_turn: int = 4,
    hints: bool = False,
    prereq: Prereq = "all",
    synth=None,
    scratch: Path | None = None,
) -> Benchmark:
    """The named benchmark. `prompt` shapes BFCL multi-turn's messages (memory speaks BFCL's own memory
    prompts); `prereq` is memory's ("all" prerequisite conversations, as BFCL, or only the "fact" one);
    `synth` is BFCL multi-turn's pipeline settings (a run's `synthesis:` section; the defaults when None);
    `scratch` is where memory's synthesizer plays its verification episodes (a run's scratch folder; the
    system's temporary folder when None; BFCL multi-turn's pipeline writes no files)."""
    problem = benchmark_problem(name, hints=hints)
    if problem:
        raise ValueError(problem)
    if name == "bfcl_multi_turn":
        return BfclMultiTurn(prompt, max_steps_per_turn=max_steps_per_turn, hints=hints, synth=synth)
    # Imported here, not at the top: the memory classes load bfcl-eval's memory modules (~0.3 s), which
    # commands that only train or evaluate BFCL multi-turn never need.
    from rods_core.benchmarks.bfcl_memory import BfclMemory

    return BfclMemory(
        name.removeprefix("bfcl_memory_"), max_steps_per_turn=max_steps_per_turn, prereq=prereq, synth_workdir=scratch
    )


def task_type_of(name: str) -> type:
    """The task model of the named benchmark, without building it (readers of a run's records)."""
    problem = benchmark_problem(name)
    if problem:
        raise ValueError(problem)
    if name == "bfcl_multi_turn":
        return BfclMultiTurn.task_type
    from rods_core.benchmarks.memory_tasks import MemoryTask  # not at the top: see make_benchmark

    return MemoryTask


def parse_any_record(rec: Any) -> Any:
    """A record of a store that holds tasks of every benchmark (the seed catalog), read by the first task
    model, in BENCHMARK_NAMES order, whose schema it fits; BFCL multi-turn's error when none does."""
    try:
        return parse_record(rec)
    except ValueError as bfcl_error:
        for kind in dict.fromkeys(task_type_of(n) for n in BENCHMARK_NAMES[1:]):
            try:
                return record_parser(kind)(rec)
            except ValueError:
                continue
        raise bfcl_error from None

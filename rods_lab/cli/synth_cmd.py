"""`rods synth`: synthesize verified variants of one task and print per-stage acceptance (the default benchmark's
`protocols.SynthCommand`)."""

from __future__ import annotations

from pathlib import Path

import typer

from rods_core.benchmarks.protocols import SynthCommand
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_core.config.inputs import check_output_file
from rods_lab.cli._common import emit_json, fail


def synth(
    from_id: str = typer.Option(..., "--from", help="parent task id: a train-split seed, or an id in --tasks"),
    n: int = typer.Option(4, "--n", min=1, max=100, help="accepted variants wanted"),
    out: Path = typer.Option(..., "--out", help="JSONL file to write the accepted variants to"),
    tasks: Path | None = typer.Option(None, "--tasks", help="JSONL task file to look the parent up in"),
    seed: int = typer.Option(0, "--seed", help="random seed"),
    backend: str = typer.Option("template", "--backend", help="template | llm"),
    config: Path | None = typer.Option(
        None, "--config", help="YAML/JSON SynthesisConfig (fields of rods_core.benchmarks.bfcl.synth.SynthesisConfig)"
    ),
    json_out: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """Synthesize N verified variants of a task (Plan, Execute, Rewrite, Critique, Augment).

    Example: rods synth --from multi_turn_base_3 --n 4 --out variants.jsonl
    """
    bench = make_benchmark(DEFAULT_BENCHMARK)
    if not isinstance(bench, SynthCommand):
        fail(f"benchmark {DEFAULT_BENCHMARK} offers no `rods synth`")
    try:
        check_output_file(out, "--out file")
        report = bench.synth_report(from_id, n, out, tasks, seed=seed, backend=backend, config=config)
    except (ValueError, OSError) as e:
        fail(str(e))
    if json_out:
        emit_json(report)
    else:
        bench.print_synth_report(report)

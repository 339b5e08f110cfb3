"""`rods synth`: synthesize verified variants of one task and print per-stage acceptance."""

from __future__ import annotations

from pathlib import Path

import typer

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
    from rods_core.benchmarks.bfcl.synth.cli_support import find_parent, load_config, render_counts, run
    from rods_core.inputs import check_output_file

    try:
        check_output_file(out, "--out file")
        parent = find_parent(from_id, tasks)
        cfg = load_config(config, seed=seed, backend=backend, n=n)
        report = run(parent, cfg, out, tasks)
    except (ValueError, OSError) as e:
        fail(str(e))
    if json_out:
        emit_json(report)
    else:
        render_counts(report)

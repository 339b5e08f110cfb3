"""`rods seeds ...`: the BFCL multi-turn seed set's statistics (the default benchmark's `SeedStatistics`), and the
seed catalog's import door (any benchmark)."""

from __future__ import annotations

from pathlib import Path

import typer

from rods_core.benchmarks.protocols import SeedStatistics
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_core.config.inputs import read_bytes
from rods_lab.cli._common import DB_HELP, BenchmarkChoice, Split, clean_errors, emit_json, fail, open_db

app = typer.Typer(
    no_args_is_help=True,
    help="Seeds: BFCL multi-turn's statistics; import a task file of any benchmark into the catalog.",
)


@app.command("stats")
def stats(
    split: Split = typer.Option(Split.all.value, help="which seeds"),
    json_out: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """Counts per category, class combination and dependency depth.

    Example: rods seeds stats --split train --json
    """
    bench = make_benchmark(DEFAULT_BENCHMARK)
    if not isinstance(bench, SeedStatistics):
        fail(f"benchmark {DEFAULT_BENCHMARK} offers no seed statistics")
    report = bench.seed_stats(bench.seeds(split.value))
    if json_out:
        emit_json({"split": split.value, **report})
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{report['tasks']}[/] tasks ({split.value})")
    for key in ("by_category", "by_class_combo", "by_depth"):
        table = Table(key.removeprefix("by_").replace("_", " "), "tasks")
        for name, n in report[key].items():
            table.add_row(str(name), str(n))
        console.print(table)


@app.command("import")
def seeds_import(
    file: Path = typer.Argument(..., help="JSONL task file"),
    tag: list[str] = typer.Option([], help="tag(s) for the imported seeds (kept tags stay)"),
    allow_test: bool = typer.Option(False, help="allow held-out test-split tasks (leaks the test set)"),
    benchmark: BenchmarkChoice = typer.Option(DEFAULT_BENCHMARK, help="the benchmark of the file's tasks"),
    db: str | None = typer.Option(None, help=DB_HELP),
) -> None:
    """Validate a whole JSONL file (schema, then verification by execution), then add its tasks to the seed
    catalog (nothing on any error).

    Example: rods seeds import my_tasks.jsonl --tag handmade
    """
    from storage.catalog import import_seeds  # not at the top: the catalog pulls pandas and the store ~0.8 s

    with clean_errors():
        data = read_bytes(file, "task file")
        report = import_seeds(
            lambda: open_db(db),
            data,
            str(file),
            "rods seeds import",
            tags=tag,
            allow_test=allow_test,
            benchmark=make_benchmark(benchmark.value),
        )
    typer.echo(f"imported {report.added} new and {report.updated} updated seed(s) from {file}")

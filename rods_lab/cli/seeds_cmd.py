"""`rods seeds ...`: the BFCL multi-turn seed set's statistics, and the seed catalog's import door (any benchmark)."""

from __future__ import annotations

import typer

from rods_lab.cli._common import Split, emit_json, seeds_of_split

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
    from rods_core.stats import seed_stats

    report = seed_stats(seeds_of_split(split))
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

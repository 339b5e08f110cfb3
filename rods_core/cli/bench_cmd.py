"""`rods bench ...`: benchmarks that print figures (never asserted in tests)."""

from __future__ import annotations

import json

import typer

app = typer.Typer(no_args_is_help=True, help="Benchmarks: environment, store, synthesis, buffer, training.")


@app.command("env")
def env(repeats: int = typer.Option(3, min=1, help="take the best of this many passes")) -> None:
    """Tool calls per second on one core and ms per task for replay + check.

    Example: rods bench env
    """
    from bench.env_bench import run

    typer.echo(json.dumps(run(repeats), indent=2))

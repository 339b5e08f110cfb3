"""`rods train` and `rods config`: runs from validated YAML configs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from rods_core.config import RunConfig, dump_config
from rods_core.config.benchmark_entries import benchmark_entry, benchmark_names
from rods_core.ids import new_run_id
from rods_core.preflight import check_ids, preflight
from rods_core.ranks import under_launcher
from rods_lab.cli._common import clean_errors, fail, load_run_config
from rods_lab.cli.handoff import handoff_to_accelerate
from rods_lab.cli.plan_cmd import train_preflight

config_app = typer.Typer(no_args_is_help=True, help="Run configs: show defaults, validate a file.")


def train(
    config: Path = typer.Option(..., "--config", "-c", help="YAML run config (see configs/)"),
    run_id: str = typer.Option(
        None, help="run id: letters, digits and _ (default: date_time_name_random); the app passes its own"
    ),
    resume: str = typer.Option(None, help="resume this run id (a folder in the runs folder) from its last checkpoint"),
    sets: list[str] = typer.Option([], "--set", help="override a field, e.g. --set grpo.max_steps=5"),
    processes: int = typer.Option(
        None, "--processes", min=1, help="training processes (= --set compute.processes=N): > 1 runs accelerate"
    ),
    skip_plan: bool = typer.Option(
        False, "--skip-plan", help="start a multi-GPU run even when the memory estimate (rods plan) refuses it"
    ),
) -> None:
    """Train a policy with GRPO (and RODS, per the config's method).

    Example: rods train --config configs/demo-cpu.yaml --set grpo.max_steps=10
    """
    cfg = load_run_config(config, [*sets, *([f"compute.processes={processes}"] if processes else [])])
    launched = under_launcher()
    with clean_errors():
        if launched:  # the ids by the rule on every rank, however the launcher was started
            check_ids(run_id, resume)
        else:  # the rest once, before anything is made
            run_id = preflight(cfg, run_id, resume) or new_run_id(cfg.name)
    if not skip_plan:  # before any model is loaded, on every rank (each exits 2 on a refusal)
        train_preflight(cfg, int(os.environ.get("WORLD_SIZE", "1")) if launched else cfg.compute.processes)
    if cfg.compute.processes > 1 and not under_launcher():
        argv = sys.argv[1:]
        if not resume and "--run-id" not in argv:
            argv += ["--run-id", run_id]  # every rank must use the same id
        handoff_to_accelerate(cfg.compute.processes, argv, cpu=cfg.grpo.use_cpu)
    # only after the hand-off: importing the run (torch, transformers, TRL) takes ~10 s, which a process that
    # is about to exec `accelerate launch` would spend for nothing
    from rods_core.loop import RunSetupError
    from rods_lab.run import train as run_training

    try:
        run_dir = run_training(cfg, run_id=resume or run_id, resume=bool(resume), log=typer.echo)
    except RunSetupError as e:
        fail(str(e))
    if os.environ.get("RANK", "0") == "0":  # one line per run, not per process
        typer.echo(f"run folder: {run_dir}")


@config_app.command("show")
def show(
    config: Path = typer.Option(None, "--config", "-c", help="a config file (default: the built-in defaults)"),
) -> None:
    """Print a config with every default filled in.

    Example: rods config show --config configs/demo-cpu.yaml
    """

    typer.echo(dump_config(load_run_config(config, []) if config else RunConfig()))


@config_app.command("validate")
def validate(config: Path = typer.Argument(..., help="a YAML run config")) -> None:
    """Validate a config file; errors name the field, the reason and the fix.

    Example: rods config validate configs/static.yaml
    """
    cfg = load_run_config(config, [])
    typer.echo(f"{config}: valid ({cfg.method}, {cfg.grpo.max_steps} steps)")


@config_app.command("benchmarks")
def benchmarks() -> None:
    """List the benchmarks a config may name, each with its own options (`benchmark_options:`), read from its
    entry's options model.

    Example: rods config benchmarks
    """
    from typing import Literal, get_args, get_origin

    for name in benchmark_names():
        entry = benchmark_entry(name)
        typer.echo(f"{name}: {entry.description}" if entry.description else name)
        fields = entry.load_options_model().model_fields
        for field, info in fields.items():
            kind = info.annotation
            shown = (
                " | ".join(map(repr, get_args(kind)))
                if get_origin(kind) is Literal
                else getattr(kind, "__name__", kind)
            )
            typer.echo(f"  benchmark_options.{field}: {shown} (default {info.default!r}): {info.description or ''}")
        if not fields:
            typer.echo("  (no options of its own)")

"""Output helpers shared by the commands: JSON or a rich table, and clean error exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

import typer

from rods_core.config import BENCHMARK_NAMES


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fail(msg: str, code: int = 2) -> None:
    """Print an error to stderr and exit; for bad input the user can fix."""
    typer.secho(f"error: {msg}", fg="red", err=True)
    raise typer.Exit(code)


@contextmanager
def clean_errors(*more: type[Exception]) -> Iterator[None]:
    """Input refused at a door (DoorError, or the given types) exits 2 with its message, never a traceback."""
    from rods_core.inputs import DoorError

    try:
        yield
    except (DoorError, *more) as e:
        fail(str(e))


def choices(name: str, values: Iterable[str]) -> type[Enum]:
    """A string Enum of `values` for a typer option: `--help` lists them and typer refuses anything else."""
    return Enum(name, {v: v for v in values}, type=str)


Split = choices("Split", ("train", "test", "all"))  # rods_core.seeds.Split (tests/test_cli.py compares them)
BenchmarkChoice = choices("BenchmarkChoice", BENCHMARK_NAMES)


def seeds_of_split(split: Split):
    """The BFCL seeds of a split named on the command line (train | test | all)."""
    from rods_core.seeds import load_seeds

    return load_seeds(split.value)


def load_run_config(config, sets: list[str]):
    """The config file (its `extends:` chain merged) with the --set overrides, validated; exit 2 when bad."""
    from rods_core.config import load_config, parse_overrides

    with clean_errors():
        return load_config(config, parse_overrides(sets))

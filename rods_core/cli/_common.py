"""Output helpers shared by the commands: JSON or a rich table, and clean error exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fail(msg: str, code: int = 2) -> None:
    """Print an error to stderr and exit; for bad input the user can fix."""
    typer.secho(f"error: {msg}", fg="red", err=True)
    raise typer.Exit(code)


@contextmanager
def clean_errors(*more: type[Exception]) -> Iterator[None]:
    """Input refused at a door (DoorError, or the given types) exits 2 with its message, never a traceback."""
    from rods_core.doors import DoorError

    try:
        yield
    except (DoorError, *more) as e:
        fail(str(e))


def seeds_of_split(split: str):
    """The BFCL seeds of a split named on the command line (train | test | all)."""
    from rods_core.seeds import load_seeds

    if split not in ("train", "test", "all"):
        raise typer.BadParameter("must be train, test or all", param_hint="--split")
    return load_seeds(split)  # type: ignore[arg-type]

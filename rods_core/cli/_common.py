"""Output helpers shared by the commands: JSON or a rich table, and clean error exits."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fail(msg: str, code: int = 2) -> None:
    """Print an error to stderr and exit; for bad input the user can fix."""
    typer.secho(f"error: {msg}", fg="red", err=True)
    raise typer.Exit(code)

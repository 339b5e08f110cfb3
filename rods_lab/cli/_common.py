"""Output helpers shared by the commands: JSON or a rich table, and clean error exits."""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

import typer

from rods_core.config import ConfigRenamedWarning, load_config, parse_overrides
from rods_core.config.benchmark_entries import benchmark_names
from rods_core.config.inputs import DoorError

_DOCUMENT: list[Any] = []  # the real stdout while one_document() holds it; empty otherwise
_SAVED_FD: list[int] = []  # its file descriptor

# Commands that always print a JSON document (the others do with --json).
DOCUMENT_COMMANDS = (("runs", "show"), ("bench", "store"), ("bench", "env"), ("bench", "pilot-length"))


def prints_document(args: list[str]) -> bool:
    """Whether this command line prints a JSON document on stdout: `--json`, or a command that always does."""
    words = [a for a in args if not a.startswith("-")]
    return "--json" in args or any(tuple(words[: len(c)]) == c for c in DOCUMENT_COMMANDS)


@contextmanager
def one_document() -> Iterator[None]:
    """Stdout carries one JSON document: everything else written to it (libraries' import chatter such as
    transformers' "[INFO] Running in WANDB offline mode", TRL's step logs, child processes) goes to stderr,
    at the file-descriptor level so C code and subprocesses follow; `emit_json` writes to the real stdout.
    (sys.stdout is swapped too, for code that holds a Python stream other than fd 1.)"""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    document, python_stdout = os.fdopen(os.dup(saved), "w"), sys.stdout
    sys.stdout = sys.stderr
    _DOCUMENT.append(document)
    _SAVED_FD.append(saved)
    try:
        yield
    finally:
        _DOCUMENT.pop()
        _SAVED_FD.pop()
        sys.stdout.flush()
        document.close()
        sys.stdout = python_stdout
        os.dup2(saved, 1)
        os.close(saved)


def stdout_for_exec() -> None:
    """Give fd 1 back to the real stdout before this process execs another command (accelerate's launcher):
    that command's own entry point keeps its stdout to the one document."""
    if _SAVED_FD:
        sys.stdout.flush()
        os.dup2(_SAVED_FD[-1], 1)


def emit_json(obj: Any) -> None:
    """Print `obj` as the command's JSON document (to the real stdout under one_document())."""
    out = _DOCUMENT[-1] if _DOCUMENT else sys.stdout
    out.write(json.dumps(obj, indent=2, default=str) + "\n")
    out.flush()


def fail(msg: str, code: int = 2) -> None:
    """Print an error to stderr and exit; for bad input the user can fix."""
    typer.secho(f"error: {msg}", fg="red", err=True)
    raise typer.Exit(code)


@contextmanager
def clean_errors(*more: type[Exception]) -> Iterator[None]:
    """Input refused at a door (DoorError, or the given types) exits 2 with its message, never a traceback."""
    try:
        yield
    except (DoorError, *more) as e:
        fail(str(e))


def choices(name: str, values: Iterable[str]) -> type[Enum]:
    """A string Enum of `values` for a typer option: `--help` lists them and typer refuses anything else."""
    return Enum(name, {v: v for v in values}, type=str)


Split = choices(
    "Split", ("train", "test", "all")
)  # rods_core.benchmarks.protocols.Split (tests/test_cli.py compares them)
BenchmarkChoice = choices("BenchmarkChoice", benchmark_names())  # entry points included (docs/benchmarks.md)


def load_run_config(config, sets: list[str]):
    """The config file (its `extends:` chain merged) with the --set overrides, validated; exit 2 when bad."""
    with clean_errors():
        return load_config(config, parse_overrides(sets))


DB_HELP = "control store: a SQLite file or a URL (default: $RODS_CONTROL_DB or workspace/control.sqlite)"


def open_db(db: str | None):
    """The control store named by --db (DB_HELP says the default); exit 2 when it cannot be opened."""
    from storage.control import ControlDB, StoreError  # not at the top: SQLModel costs ~0.7 s, which --help never needs

    try:
        return ControlDB(db)
    except StoreError as e:
        fail(str(e))


def config_notes_on_stderr() -> None:
    """A config's notes (a renamed section it still loads: rods_core.config.ConfigRenamedWarning) print as one
    `note: ...` line on stderr, not as a Python warning with its source line; other warnings are unchanged."""
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, ConfigRenamedWarning):
            print(f"note: {message}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show

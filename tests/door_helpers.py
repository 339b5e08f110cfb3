"""Shared by the input-door tests (test_inputs.py, test_config.py): run a CLI command and fail on a traceback,
check a refusal's exit code and message, write a run config that never trains, and the fuzzing strategies."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rods_lab.cli import app

runner = CliRunner()
DEEP = "[" * 100_000 + "]" * 100_000
NOT_UTF8 = b"\xff\xfe\x80"


def invoke(*args):
    """The command's result; a traceback (any exception but a clean exit) fails the test with its stack."""
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        pytest.fail("traceback:\n" + "".join(traceback.format_exception(result.exception)) + result.output)
    return result


def refused(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())  # rich wraps long lines
    for n in needles:
        assert " ".join(n.split()) in out, (n, result.output)


def files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")} if root.exists() else set()


def run_config(tmp_path: Path, **fields) -> Path:
    """A config whose model folder does not exist (never trains: the pre-flight stops it)."""
    data = {
        "output_dir": str(tmp_path / "runs"),
        "workspace": str(tmp_path / "ws"),
        "model": {"path": str(tmp_path / "no-model")},
        "seeds": {"subset": "demo"},
    }
    for k, v in fields.items():
        node = data
        *parents, leaf = k.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.just("x" * 200_000),
)
JSON = st.recursive(
    JSON_LEAF,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
FUZZ = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def clean_or_valid(result) -> None:
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert result.output.startswith("error: ") or "Error" in result.output

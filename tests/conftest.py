"""Shared fixtures: seed tasks are loaded once per session (they are immutable copies per call)."""

from __future__ import annotations

import os
import sys
import uuid

import pytest
from app_helpers import app_env, smoke_config  # noqa: F401 - re-exported for the tests

from rods_core.benchmarks.bfcl.seeds import load_seeds


@pytest.fixture(scope="session", autouse=True)
def _audit_keys(tmp_path_factory):
    """The audit chain's keys and recorded heads (storage.audit_keys) in one folder of the session's own, for
    every store, app and process a test starts: never the project's workspace/audit."""
    os.environ["RODS_AUDIT_DIR"] = str(tmp_path_factory.mktemp("audit"))


@pytest.fixture(scope="session")
def all_seeds():
    return load_seeds("all")


@pytest.fixture(scope="session")
def train_seeds():
    return load_seeds("train")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """An untrained tiny model (a few seconds to build): enough to run the training machinery."""
    from rods_core.config import TinyModelConfig
    from rods_core.policy.tiny import init_tiny

    out = tmp_path_factory.mktemp("tiny") / "model"
    init_tiny(TinyModelConfig(hidden=64, layers=2, heads=2, kv_heads=1, ffn=128, vocab=1000), out)
    return out


POSTGRES_ENV = "RODS_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """A fresh, empty control store, as `ControlDB` takes it: a SQLite file, or a schema of its own on the
    PostgreSQL server named by $RODS_TEST_POSTGRES_URL (`.ci/run` starts one; skipped where none runs)."""
    if request.param == "sqlite":
        yield str(tmp_path / "control.sqlite")
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"no PostgreSQL server: set {POSTGRES_ENV} (`source .ci/postgres` starts one and sets it)")
    engine = create_engine(url)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with engine.begin() as conn:
            conn.execute(text(f"create schema {schema}"))
    except OperationalError as e:
        pytest.skip(f"PostgreSQL at ${POSTGRES_ENV} is not reachable: {str(e).splitlines()[0]}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"drop schema {schema} cascade"))
        engine.dispose()


@pytest.fixture(autouse=True)
def _real_main_module():
    """Streamlit's script runner (AppTest) installs the page it ran as sys.modules["__main__"] and leaves it
    there; a process spawned later (the synthesis worker) re-runs __main__'s file, i.e. that
    page, and dies where the page needs a run it cannot find. Put the real module back after each test."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main

"""Shared fixtures: seed tasks are loaded once per session (they are immutable copies per call)."""

from __future__ import annotations

import sys

import pytest
from app_helpers import app_env, smoke_config  # noqa: F401 - re-exported for the tests

from rods_core.seeds import load_seeds


@pytest.fixture(scope="session")
def all_seeds():
    return load_seeds("all")


@pytest.fixture(scope="session")
def train_seeds():
    return load_seeds("train")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """An untrained tiny model (a few seconds to build): enough to run the training machinery."""
    from rods_core.policy.tiny import TinyModelConfig, init_tiny

    out = tmp_path_factory.mktemp("tiny") / "model"
    init_tiny(TinyModelConfig(hidden=64, layers=2, heads=2, kv_heads=1, ffn=128, vocab=1000), out)
    return out


@pytest.fixture(autouse=True)
def _real_main_module():
    """Streamlit's script runner (AppTest) installs the page it ran as sys.modules["__main__"] and leaves it
    there; a process spawned later (ControlDBProcess, the synthesis worker) re-runs __main__'s file, i.e. that
    page, and dies where the page needs a run it cannot find. Put the real module back after each test."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main

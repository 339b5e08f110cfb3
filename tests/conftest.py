"""Shared fixtures: seed tasks are loaded once per session (they are immutable copies per call)."""

from __future__ import annotations

import pytest
from app_helpers import app_env  # noqa: F401 - the app tests' run store (one per session)

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


def smoke_config(tmp_path, model_dir, **overrides) -> dict:
    """A run config (as a dict) that trains the tiny model for a few quick steps into tmp_path."""
    cfg = {
        "name": "smoke",
        "method": "rods",
        "output_dir": str(tmp_path / "runs"),
        "workspace": str(tmp_path / "ws"),
        "model": {"path": str(model_dir)},
        "seeds": {"subset": "demo", "limit": 6},
        "episode": {
            "max_steps_per_turn": 2,
            "max_context_tokens": 1024,
            "sampling": {"temperature": 1.0, "max_new_tokens": 24},
        },
        "grpo": {"num_generations": 2, "tasks_per_step": 2, "max_steps": 3, "save_steps": 2, "learning_rate": 1e-3},
        "eval": {"every": 0, "split": "train", "limit": 2},
        "synthesis": {"parents_per_step": 1, "variants_per_parent": 1},
    }
    for key, value in overrides.items():
        node = cfg
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg

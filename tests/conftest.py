"""Shared fixtures: seed tasks are loaded once per session (they are immutable copies per call)."""

from __future__ import annotations

import pytest

from rods_core.seeds import load_seeds


@pytest.fixture(scope="session")
def all_seeds():
    return load_seeds("all")


@pytest.fixture(scope="session")
def train_seeds():
    return load_seeds("train")

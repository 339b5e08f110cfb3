"""A real run's store for the app tests: a tiny untrained model trained 3 steps with uniform synthesis and
review-gated variants (so the review queue is not empty), in a temporary workspace the app points at."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
RUN_ID = "fx_run"


def rods(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


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
        "synthesis": {"parents_per_step": 1, "n_per_parent": 1},
    }
    for key, value in overrides.items():
        node = cfg
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg


def small_run_config(base: Path, model: Path, steps: int = 3) -> dict:
    """The app tests' run: uniform synthesis with review-gated variants, so the review queue is not empty."""
    return smoke_config(
        base,
        model,
        **{
            "name": "fx",
            "method": "uniform_synth",
            "grpo.max_steps": steps,
            "eval.every": 2,
            "buffer.review": "gated",
            "buffer.probe_slots": 1,
            "synthesis.parents_per_step": 2,
            "synthesis.n_per_parent": 2,
        },
    )


@pytest.fixture(scope="session")
def app_env(tmp_path_factory, tiny_model_dir):
    """(workspace, runs folder, model folder, run folder); the app reads them through RODS_* variables.

    The run is real (`rods train`, ~12 s quiet): every page's AppTest reads the store a trainer wrote. The
    session's tiny model is copied in (the app only accepts models inside its workspace)."""
    base = tmp_path_factory.mktemp("app")
    ws, runs = base / "ws", base / "runs"
    model = ws / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model)
    cfg = base / "fx.yaml"
    cfg.write_text(yaml.safe_dump(small_run_config(base, model)))
    rods("train", "--config", str(cfg), "--run-id", RUN_ID)
    with lab_env(ws, runs):
        yield ws, runs, model, runs / RUN_ID


@contextlib.contextmanager
def lab_env(ws, runs):
    """The app's workspace and runs folder for a module's pages (module-scoped fixtures cannot monkeypatch)."""
    old = {k: os.environ.get(k) for k in ("RODS_WORKSPACE", "RODS_RUNS")}
    os.environ["RODS_WORKSPACE"], os.environ["RODS_RUNS"] = str(ws), str(runs)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def page(path: str):
    """An AppTest of one page (path from the project root) showing the fixture's run, query caches emptied."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()  # queries are cached for a few seconds; each test reads the store afresh
    at = AppTest.from_file(str(ROOT / path), default_timeout=60)
    at.session_state["lab_run"] = RUN_ID  # the run pickers open on the fixture's run, not the newest one
    return at


def kill_group(pid: int) -> None:
    """End a process this test started (its own session) and wait until it is gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.05)


def awaiting_review(run_dir: str | Path) -> list[str]:
    """The staged tasks whose latest buffer event left them awaiting review (the Review page's queue)."""
    from rods_core.reasons import OfferReason
    from rods_lab.views import latest_buffer_reasons, snapshot
    from storage.reader import RunReader

    reasons = latest_buffer_reasons(RunReader(run_dir))
    staged = snapshot(run_dir).tasks("staged")
    return [t.id for t in staged if reasons.get(t.id, ("", None))[0] == OfferReason.AWAITING_REVIEW]


def catch_downloads(monkeypatch) -> dict[str, bytes]:
    """File name -> the bytes a page hands a download button, caught where Streamlit stores them."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    stored: dict[str, bytes] = {}
    keep = MemoryMediaFileStorage.load_and_get_id

    def spy(self, data, mimetype, kind, filename=None):
        stored[filename or ""] = data if isinstance(data, bytes) else b""
        return keep(self, data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", spy)
    return stored

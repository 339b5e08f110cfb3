"""A run's model-build progress (runs/<id>/build.json): written atomically and validated, read back, and shown
on the Home card in every phase instead of "queued"."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rods_lab import views
from storage.build_progress import BUILD_FILE, BuildProgressError, read_build_progress, write_build_progress

PHASES = {  # phase -> (fields, what the card says, the word of the state it is counted in)
    "waiting": (
        {"waiting_for": "run demo_1a2b"},
        "waiting for the model build of run demo_1a2b",
        "waiting for a build",
    ),
    "tokenizer": ({}, "building the model: training the tokenizer", "building: the model"),
    "variants": (
        {"done": 12, "total": 60, "eta_s": 95},
        "building the model: synthesizing warm-start variants 12 / 60 · ETA 1m35s",
        "building: the model",
    ),
    "sft": (
        {"epoch": 3, "epochs": 52, "loss": 0.4123, "eta_s": 720},
        "building the model: SFT epoch 3 / 52 · loss 0.412 · ETA 12m00s",
        "building: the model",
    ),
    "done": ({}, "model built: waiting for the first step", "queued"),
    "failed": (
        {"detail": "loss target not reached"},
        "model build failed: loss target not reached",
        "failed: model build",
    ),
}


def test_write_then_read_round_trips_atomically(tmp_path):
    run = tmp_path / "runs" / "r1"  # created by the writer
    written = write_build_progress(run, "sft", epoch=3, epochs=52, loss=0.41, eta_s=720)
    assert [p.name for p in run.iterdir()] == [BUILD_FILE]  # no temp file left behind
    got = read_build_progress(run)
    assert got == written and got.updated.tzinfo is not None and got.fraction == pytest.approx(3 / 52)
    write_build_progress(run, "done")
    assert read_build_progress(run).phase == "done" and read_build_progress(run).fraction == 1.0
    assert read_build_progress(tmp_path / "never-built") is None


@pytest.mark.parametrize(
    ("phase", "fields", "message"),
    [
        ("compiling", {}, "phase: Input should be"),
        ("sft", {"epoch": -1}, "epoch: Input should be greater than or equal to 0"),
        ("sft", {"loss": float("nan")}, "loss: Input should be a finite number"),
        ("sft", {"epcoh": 3}, "epcoh: Extra inputs are not permitted"),
    ],
)
def test_a_bad_snapshot_names_the_field_and_writes_nothing(tmp_path, phase, fields, message):
    with pytest.raises(BuildProgressError, match=message):
        write_build_progress(tmp_path / "r", phase, **fields)
    assert not (tmp_path / "r").exists()


def test_a_damaged_file_names_the_file_and_the_field(tmp_path):
    (tmp_path / BUILD_FILE).write_text("{not json")
    with pytest.raises(BuildProgressError, match=r"build\.json: not JSON \(line 1"):
        read_build_progress(tmp_path)
    (tmp_path / BUILD_FILE).write_text(json.dumps({"phase": "sft", "epochs": 0, "updated": "2026-12-01T10:00:00"}))
    with pytest.raises(BuildProgressError, match="epochs: Input should be greater than or equal to 1.*updated"):
        read_build_progress(tmp_path)


@pytest.mark.parametrize("phase", PHASES)
def test_the_card_describes_each_phase(tmp_path, phase):
    fields, text, shown = PHASES[phase]
    write_build_progress(tmp_path, phase, **fields)
    status = "failed" if phase == "failed" else "queued"
    state, view = views.run_view(tmp_path, status, has_steps=False)
    assert (view.text, state.word) == (text, shown)
    assert views.build_view(tmp_path, status, has_steps=True) is None  # the first step replaces the build


def test_the_card_ignores_the_build_when_it_says_nothing_new(tmp_path):
    assert views.build_view(tmp_path, "queued", has_steps=False) is None  # no build.json: the model existed
    write_build_progress(tmp_path, "sft", epoch=1, epochs=9)
    assert views.build_view(tmp_path, "finished", has_steps=False) is None
    assert views.build_view(tmp_path, "failed", has_steps=False) is None  # died mid-build: its message says more
    (tmp_path / BUILD_FILE).write_text("[]")
    view = views.build_view(tmp_path, "queued", has_steps=False)
    assert (
        views.run_view(tmp_path, "queued", False)[0].state == "queued" and "build.json" in view.text
    )  # a damaged file is shown, not raised


def test_home_card_shows_each_build_phase_not_queued(tmp_path, monkeypatch):
    import streamlit as st
    from app_helpers import ROOT
    from streamlit.testing.v1 import AppTest

    from storage.control import ControlDB

    ws, runs = tmp_path / "ws", tmp_path / "runs"
    monkeypatch.setenv("RODS_WORKSPACE", str(ws))
    monkeypatch.setenv("RODS_RUNS", str(runs))
    db = ControlDB(ws / "control.sqlite")
    for phase, (fields, _, _) in PHASES.items():
        db.create_run(f"b-{phase}", runs / f"b-{phase}", {"grpo": {"max_steps": 40}}, "rods")
        write_build_progress(runs / f"b-{phase}", phase, **fields, updated=datetime.now(UTC))
    db.update_run("b-failed", status="failed", message="see train.log")
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    bars = [b.proto.text for b in at.get("progress")]
    assert sorted(bars) == sorted(text for _, text, _ in PHASES.values())
    heads = {m.value.split("`")[1]: m.value for m in at.markdown if m.value.startswith("**b-")}
    assert heads["b-sft"].endswith(" building: the model") and heads["b-failed"].endswith(" failed: model build")
    assert heads["b-done"].endswith(" queued")  # built, waiting for its first step

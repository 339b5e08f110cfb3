"""rods_lab.status: a run's shown status is derived without writing; the one write (reconcile_dead_runs)
records runs that died before registering; the log's tail; progress and ETA."""

from __future__ import annotations

import subprocess

import pytest

from rods_core.process_identity import process_start
from rods_lab import views
from rods_lab.status import (
    LOG_FILE,
    STATES,
    format_eta,
    progress,
    reconcile_dead_runs,
    run_state,
    run_status,
    tail,
)
from storage.control import ControlDB


def test_tail_reads_last_lines(tmp_path):
    log = tmp_path / "train.log"
    assert tail(log) == ""
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3) == "line 97\nline 98\nline 99"
    assert tail(log, 5, max_bytes=20).splitlines()[-1] == "line 99"


def test_progress_and_eta():
    assert progress(None, 10, []) == (0.0, None)
    assert progress(2, 10, [float("nan"), 0.0]) == (0.2, None)
    done, eta = progress(4, 10, [100.0, 2.0, 4.0], window=2)
    assert done == 0.4 and eta == pytest.approx(18.0)
    assert progress(12, 10, [1.0]) == (1.0, 0.0)
    assert format_eta(None) == "ETA —" and format_eta(75) == "ETA 1m15s" and format_eta(7260) == "ETA 2h01m"


def test_a_dead_queued_run_shows_failed_without_a_write_until_reconciled(tmp_path):
    db = ControlDB(tmp_path / "control.sqlite")
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid names no process
    alive = subprocess.Popen(["sleep", "60"])
    try:
        for run_id, proc in (("dead", dead), ("alive", alive)):
            (tmp_path / run_id).mkdir()
            db.create_run(run_id, tmp_path / run_id, {}, "rods")
            db.update_run(run_id, pid=proc.pid, proc_start=process_start(proc.pid))
        (tmp_path / "dead" / LOG_FILE).write_text("Traceback\nImportError: no module named x\n")

        assert run_status(db, db.get_run("dead")) == "failed"
        shown = views.runs_table(db).set_index("id")
        assert shown.status["dead"] == "failed" and shown.message["dead"].endswith("no module named x")
        assert db.get_run("dead").status == "queued"  # reading (status, table) wrote nothing
        assert run_status(db, db.get_run("alive")) == "queued"

        assert reconcile_dead_runs(db) == ["dead"]
        stored = db.get_run("dead")
        assert (stored.status, stored.message.splitlines()[-1]) == ("failed", "ImportError: no module named x")
        assert db.get_run("alive").status == "queued" and reconcile_dead_runs(db) == []
    finally:
        alive.kill()
        alive.wait()


def _build(phase: str | None):
    from storage.build_progress import BuildProgress

    return None if phase is None else BuildProgress(phase=phase)


@pytest.mark.parametrize(
    ("status", "phase", "has_steps", "state", "word"),
    [
        ("queued", None, False, "queued", "queued"),
        ("queued", "sft", False, "building", "building: the model"),
        ("running", "tokenizer", False, "building", "building: the model"),
        ("running", "variants", False, "building", "building: the model"),
        ("running", "sft", False, "building", "building: the model"),
        ("running", "waiting", False, "waiting", "waiting for a build"),
        ("running", "done", False, "starting", "starting"),
        ("running", None, False, "starting", "starting"),
        ("running", "done", True, "running", "running"),
        ("running", "sft", True, "running", "running"),  # a step was logged: the build is history
        ("stale", "sft", False, "stale", "stale"),
        ("stale", None, True, "stale", "stale"),
        ("finished", "done", True, "finished", "finished"),
        ("stopped", "sft", False, "stopped", "stopped"),
        ("failed", None, False, "failed", "failed"),
        ("failed", "failed", False, "failed", "failed: model build"),
        ("running", "failed", False, "failed", "failed: model build"),
        ("lost", None, True, "failed", "failed: the process ended without recording an outcome"),
    ],
)
def test_every_status_and_phase_maps_to_one_counted_state(status, phase, has_steps, state, word):
    got = run_state(status, _build(phase), has_steps)
    assert (got.state, got.word) == (state, word)
    label, icon = STATES[state]
    assert got.icon == icon and got.word.startswith(label.lower())  # the card says what its counter says


def test_every_state_has_its_own_icon():
    assert len({icon for _, icon in STATES.values()}) == len(STATES)

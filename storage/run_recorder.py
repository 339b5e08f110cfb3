"""A run's record on disk: the event log, pools.json, build.json and the run's row and decisions in the
control store, behind the library's `RunRecorder` protocol (rods_core/recording.py), on rank 0.

Decisions reach the trainer exactly once: `claim_decisions` takes the run's pending ones (each reaches one
caller only) and `record_outcomes` marks each applied or refused at the step whose checkpoint holds its
effect. `resume_to` puts the record back to a checkpoint's step: events after it are dropped and decisions
recorded after it (or claimed by a process that died) become pending again, so a decision is applied
exactly once in the run that survives.

Liveness: from the moment a run's process registers until its first step, a background thread beats every
HEARTBEAT_S (the model build, in this process or a delegated one, a wait for another run's build of the same
folder, loading the policy, TRL's start-up and the step-0 evaluation report no steps); from the first step
on, the steps beat, and the thread beats again inside `working()` (a held-out evaluation between steps, the
final evaluation and save: minutes on a large held-out set). So `stale` means a live process whose steps
stopped coming outside such work, never one still starting or evaluating.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.config import RunConfig
from rods_core.process_identity import process_start
from rods_core.recording import Decision, DecisionOutcome
from storage.build_progress import write_build_progress
from storage.control import ControlDB, open_store
from storage.events import EventLog
from storage.pools import write_pools_snapshot

HEARTBEAT_S = 10.0  # seconds between liveness writes to the control database


class StoreRecorder:
    """The `RunRecorder` of rank 0: writes the run folder and the run's rows in the control store."""

    def __init__(
        self, run_dir: Path, run_id: str, db: ControlDB, events: EventLog, startup_beat_s: float | None = None
    ):
        """`startup_beat_s`: beat every that many seconds from a thread until the first step's heartbeat, and
        inside `working()` (until `close`); None beats only with steps."""
        self.run_dir, self.run_id, self.db, self.events = run_dir, run_id, db, events
        self._beat = float("-inf")
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._started = False  # the first step has beaten: start-up is over
        self._working = 0  # `working()` blocks open now
        self._pulse = None
        if startup_beat_s:
            self._pulse = threading.Thread(
                target=self._pulse_beats, args=(startup_beat_s,), name="rods-beat", daemon=True
            )
            self._pulse.start()

    def busy(self) -> bool:
        """Whether the thread beats now: before the first step, or inside a `working()` block."""
        with self._lock:
            return not self._started or self._working > 0

    def _pulse_beats(self, every_s: float) -> None:
        """The thread's heartbeat: while the main thread lives and the process is busy outside steps. A write
        the store refuses (busy past its timeout) is skipped; the next one tries again."""
        main = threading.main_thread()
        while not self._closed.wait(every_s) and main.is_alive():
            if not self.busy():
                continue
            try:
                self.db.heartbeat(self.run_id)
            except SQLAlchemyError:
                pass

    @contextmanager
    def working(self) -> Iterator[None]:
        """Beat from the thread for the block's duration: work between steps that reports no step."""
        with self._lock:
            self._working += 1
        try:
            yield
        finally:
            with self._lock:
                self._working -= 1

    def write(self, events: dict[str, list[dict]]) -> None:
        for kind, rows in events.items():
            if rows:
                self.events.append(kind, rows)

    def flush(self) -> None:
        self.events.flush()

    def write_pools(self, step: int, pools: dict[str, list[TaskRecord]]) -> None:
        """runs/<id>/pools.json: the tasks of every pool, for the app and exports."""
        write_pools_snapshot(self.run_dir, pools, step)

    def heartbeat(self, step: int) -> None:
        """At most every HEARTBEAT_S seconds: each write waits for the disk (fsync), and the app reads the
        step from the event log anyway; the liveness timeout is 120 s. The first ends the start-up beat."""
        with self._lock:
            self._started = True
        now = time.monotonic()
        if now - self._beat >= HEARTBEAT_S:
            self.db.heartbeat(self.run_id, step)
            self._beat = now

    def build_progress(self, phase: str, **fields: Any) -> None:
        write_build_progress(self.run_dir, phase, **fields)

    def claim_decisions(self) -> list[Decision]:
        """The run's pending decisions, claimed by this process. A claim whose process dies before the
        outcomes are recorded leaves them claimed, and `resume_to` reopens them."""
        claimed = self.db.claim_decisions(self.run_id, f"pid:{os.getpid()}")
        return [Decision(d.id, d.task_id, d.action, d.payload) for d in claimed]

    def record_outcomes(self, step: int, outcomes: list[DecisionOutcome]) -> None:
        """Mark each decision applied or refused at `step`: the step whose checkpoint will hold its effect
        (a checkpoint at step S holds every decision recorded with step <= S; `resume_to` reopens later ones)."""
        for o in outcomes:
            self.db.mark_decision(o.decision_id, o.outcome, o.reason, step=step)

    def resume_to(self, checkpoint_step: int) -> dict[str, int]:
        """Drop events after the checkpoint and reopen decisions recorded after it; returns the counts.

        With no checkpoint (a run killed before its first save) pass checkpoint_step = -1: every event goes,
        the step-0 evaluation included, and every decision is pending again."""
        dropped = self.events.truncate_after(checkpoint_step)
        reopened = self.db.reopen_decisions_after(self.run_id, checkpoint_step)
        return {"events_dropped": dropped, "decisions_reopened": reopened}

    def close(self, status: str) -> None:
        self._closed.set()
        if self._pulse is not None:
            self._pulse.join()
        self.events.flush()
        self.events.close()
        self.db.update_run(self.run_id, status=status)


def open_run_recorder(
    cfg: RunConfig, run_dir: Path, run_id: str, resume: bool, startup_beat_s: float = HEARTBEAT_S
) -> StoreRecorder:
    """The recorder of a run whose folder exists: its event log, and its control-store row (created when
    missing, e.g. not made beforehand by the app) marked running with this process registered, beating
    every `startup_beat_s` until its first step."""
    events = EventLog(run_dir)  # first, as it locks the folder against a second writer
    db = open_store(cfg.workspace)
    if db.get_run(run_id) is None:
        db.create_run(run_id, run_dir, cfg.model_dump(mode="json"), cfg.method, name=cfg.name)
    db.register_process(run_id, os.getpid(), process_start(os.getpid()))
    db.update_run(run_id, status="running")
    return StoreRecorder(run_dir, run_id, db, events, startup_beat_s)

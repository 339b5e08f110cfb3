"""Checkpoints of a run: the one place that saves and restores the RODS state beside TRL's own.

TRL (transformers' Trainer) saves the model, optimizer, scheduler and RNG states in
`checkpoints/checkpoint-N/`; this module adds `rods_state.json` (buffer, detector, counters) last, so a
checkpoint counts only once its RODS state is complete (a kill mid-save leaves the previous one). On
resume the record goes back to the checkpoint's step: later events are dropped and later decisions
reopened (the recorder's `resume_to`); with no complete checkpoint the run restarts from step 0
with every event dropped and every decision pending again.
"""

from __future__ import annotations

import json
from pathlib import Path

STATE_FILE = "rods_state.json"


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"checkpoint-{step}"


def checkpoint_step(ckpt: Path) -> int:
    """The step a checkpoint folder (`checkpoint-N`) was saved at."""
    return int(ckpt.name.split("-")[1])


def last_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint whose RODS state was written completely, or None."""
    ckpts = [c for c in (Path(run_dir) / "checkpoints").glob("checkpoint-*") if c.name.split("-")[1].isdigit()]
    ckpts = sorted((c for c in ckpts if (c / STATE_FILE).exists()), key=checkpoint_step)
    return ckpts[-1] if ckpts else None


def save_state(ckpt: Path, step: int, state: dict) -> None:
    """Write the RODS state into a checkpoint TRL has just saved (atomically: temp file, then rename)."""
    tmp = ckpt / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps({"step": step, **state}))
    tmp.replace(ckpt / STATE_FILE)


def load_state(ckpt: Path) -> tuple[int, dict]:
    """(step, state) of a checkpoint."""
    state = json.loads((ckpt / STATE_FILE).read_text())
    return int(state.pop("step")), state

"""A run's model-build progress, `runs/<id>/build.json`: the phase of the warm start (waiting for another
run's build of the same folder, tokenizer, synthesized variants, SFT epoch k/n with loss and ETA) that the
Home card and `rods runs` show before the first step. The build code writes it (atomically: readers never
see half a file); anyone reads it."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

BUILD_FILE = "build.json"
Phase = Literal["waiting", "tokenizer", "variants", "sft", "done", "failed"]
PHASES: tuple[Phase, ...] = ("waiting", "tokenizer", "variants", "sft", "done", "failed")


class BuildProgressError(ValueError):
    """build.json exists but cannot be used; the message names the file and the field."""


class BuildProgress(BaseModel):
    """One snapshot of the build; fields that do not apply to the phase stay None."""

    model_config = ConfigDict(extra="forbid")
    phase: Phase = Field(description="waiting | tokenizer | variants | sft | done | failed")
    waiting_for: str | None = Field(
        None, max_length=200, description="waiting: who is building the same model folder, e.g. 'run demo_1a2b'"
    )
    epoch: int | None = Field(None, ge=0, description="sft: epochs completed so far")
    epochs: int | None = Field(None, ge=1, description="sft: epochs planned (the most the loss target allows)")
    loss: float | None = Field(None, ge=0, allow_inf_nan=False, description="sft: the latest training loss")
    eta_s: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="estimated seconds until the build is done"
    )
    done: int | None = Field(None, ge=0, description="variants: warm-start variants synthesized so far")
    total: int | None = Field(None, ge=0, description="variants: warm-start variants wanted")
    detail: str = Field("", max_length=2000, description="free text, e.g. why the build failed")
    updated: datetime = Field(
        default_factory=lambda: datetime.now(UTC), description="when this snapshot was written (UTC)"
    )

    @field_validator("updated")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("must carry a time zone (UTC)")
        return v

    @property
    def fraction(self) -> float:
        """Share of the current phase done, in [0, 1] (0 when the phase has no count)."""
        if self.phase == "done":
            return 1.0
        if self.phase == "sft" and self.epoch is not None and self.epochs:
            return min(self.epoch / self.epochs, 1.0)
        if self.phase == "variants" and self.done is not None and self.total:
            return min(self.done / self.total, 1.0)
        return 0.0


def _errors(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or '(file)'}: {err['msg']}" for err in e.errors())


def write_build_progress(run_dir: str | Path, phase: str, **fields) -> BuildProgress:
    """Validate, then atomically replace runs/<id>/build.json; returns what was written.

    Example: write_build_progress(run_dir, "sft", epoch=3, epochs=52, loss=0.41, eta_s=720)
    A bad phase or field raises BuildProgressError naming it, before anything is written.
    """
    try:
        progress = BuildProgress(phase=phase, **fields)
    except ValidationError as e:
        raise BuildProgressError(f"build progress: {_errors(e)}") from None
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / BUILD_FILE
    tmp = folder / f".{BUILD_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(progress.model_dump_json(), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone after a successful replace; removed after a failed write
    return progress


def read_build_progress(run_dir: str | Path) -> BuildProgress | None:
    """The latest snapshot, or None when the run never wrote one (e.g. its model already existed).

    Raises BuildProgressError naming the file and the field when build.json is not valid."""
    path = Path(run_dir) / BUILD_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return BuildProgress.model_validate(json.loads(text))
    except json.JSONDecodeError as e:
        raise BuildProgressError(f"{path}: not JSON (line {e.lineno}: {e.msg})") from None
    except ValidationError as e:
        raise BuildProgressError(f"{path}: {_errors(e)}") from None

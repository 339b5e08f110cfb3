"""Where a task came from, one model for every benchmark's tasks (a field of each task model, recorded with
the task): the concrete form of `protocols.ProvenanceRecord`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Source = Literal["seed", "synth", "import", "edit"]


class Provenance(BaseModel):
    """Where a task came from: a seed of its benchmark, a synthesized variant, an import, or an edit."""

    model_config = ConfigDict(extra="forbid")
    source: Source = Field("seed", description="seed | synth | import | edit")
    parent_id: str | None = Field(None, description="the task this one was derived from")
    created_step: int | None = Field(None, description="training step at which it was created")
    note: str | None = Field(None, description="free text: the synthesis plan, the editor, ...")

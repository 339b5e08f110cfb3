"""BFCL v4 memory's own run options (`benchmark_options:` of a run on bfcl_memory_kv or bfcl_memory_rec_sum),
validated by its registry entry; a leaf module, so naming the options never loads bfcl-eval's memory code."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Prereq = Literal["all", "fact"]


class MemoryOptions(BaseModel):
    """What a memory episode plays before its question."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prereq: Prereq = Field(
        "all",
        description="play all prerequisite conversations before the question (BFCL), or only the one that "
        "states the answer (fact: episodes short enough for a small context)",
    )

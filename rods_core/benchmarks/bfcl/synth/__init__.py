"""Skill-aligned task synthesis (RODS stage 2): Plan -> Execute -> Rewrite -> Critique -> Augment.

Public API: `SynthesisConfig`, `synthesize(parent, n, pool_keys, cfg) -> SynthResult` (its `attempts`: one
`Attempt` per candidate), `synthesize_many`, `SynthWorker` (background synthesis with a non-blocking
`drain()`), `merge_counts`, `variant_distance`. One module per stage; prompts/ holds the LLM prompts.
"""

from rods_core.benchmarks.bfcl.synth.pipeline import (
    Attempt,
    SynthResult,
    SynthWorker,
    merge_counts,
    synthesize,
    synthesize_many,
    variant_distance,
)
from rods_core.benchmarks.bfcl.synth.stages import STAGES, StageError, StageOutcome
from rods_core.config import SynthesisConfig

__all__ = [
    "STAGES",
    "Attempt",
    "StageError",
    "StageOutcome",
    "SynthesisConfig",
    "SynthResult",
    "SynthWorker",
    "merge_counts",
    "synthesize",
    "synthesize_many",
    "variant_distance",
]

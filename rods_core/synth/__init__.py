"""Skill-aligned task synthesis (RODS stage 2): Plan -> Execute -> Rewrite -> Critique -> Augment.

Public API: `SynthConfig`, `synthesize(parent, n, pool_keys, cfg) -> SynthResult`, `synthesize_many`, `SynthWorker`
(background synthesis with a non-blocking `drain()`), `merge_counts`. One module per stage.
"""

from rods_core.synth.pipeline import (
    SynthConfig,
    SynthResult,
    SynthWorker,
    merge_counts,
    synthesize,
    synthesize_many,
)
from rods_core.synth.stages import STAGES, StageError, StageOutcome

__all__ = [
    "STAGES",
    "StageError",
    "StageOutcome",
    "SynthConfig",
    "SynthResult",
    "SynthWorker",
    "merge_counts",
    "synthesize",
    "synthesize_many",
]

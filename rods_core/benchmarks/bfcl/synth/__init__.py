"""Skill-aligned task synthesis (RODS stage 2): Plan -> Execute -> Rewrite -> Critique -> Augment.

Public API: `SynthesisConfig`, `synthesize(parent, n, pool_keys, cfg) -> SynthResult` (its `attempts`: one
`Attempt` per candidate; both in rods_core.benchmarks.synthesis, with the stages' outcome and error),
`synthesize_many`, `merge_counts` (rods_core.benchmarks.synthesis's), `variant_distance`; rods_core.benchmarks.synth_worker runs `synthesize`
beside training. One module per stage; prompts/ holds the LLM prompts.
"""

from rods_core.benchmarks.bfcl.synth.pipeline import synthesize, synthesize_many, variant_distance
from rods_core.benchmarks.synthesis import merge_counts
from rods_core.config import SynthesisConfig

__all__ = [
    "SynthesisConfig",
    "merge_counts",
    "synthesize",
    "synthesize_many",
    "variant_distance",
]

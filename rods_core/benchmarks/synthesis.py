"""A benchmark's Synthesizer as the job of the RODS step's synthesis worker (synth.pipeline.SynthWorker), so
synthesis runs beside training for any benchmark; BFCL multi-turn's five-stage pipeline keeps its own job,
which records every stage of every attempt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rods_core.benchmarks.bfcl_multi_turn import BfclPipelineSynthesizer
from rods_core.benchmarks.protocols import Synthesizer
from rods_core.synth.pipeline import Attempt, SynthResult
from rods_core.synth.stages import StageOutcome


@dataclass(frozen=True)
class VariantsJob:
    """`job(parent, n, pool_keys, cfg) -> SynthResult` over `synthesizer.variants`: each variant one accepted
    attempt; a variant whose content is already in the pool, or a shortfall, one rejected attempt each."""

    synthesizer: Synthesizer

    def __call__(self, parent: Any, n: int, pool_keys: set[str], cfg) -> SynthResult:
        result = SynthResult(parent.id)
        seen = set(pool_keys)
        for v in self.synthesizer.variants(parent, n, cfg.seed):
            if v.content_key() in seen:
                result.attempts.append(Attempt([StageOutcome("augment", False, "duplicates a task in the pool")]))
                continue
            seen.add(v.content_key())
            result.attempts.append(Attempt([StageOutcome("augment", True)], variant=v))
        short = n - len(result.attempts)
        result.attempts += [
            Attempt([StageOutcome("augment", False, "the synthesizer found no further verified variant")])
            for _ in range(short)
        ]
        return result


def worker_job(synthesizer: Synthesizer | None):
    """The worker's job for a benchmark's synthesizer: None (the pipeline's own) for BFCL multi-turn's."""
    if synthesizer is None or isinstance(synthesizer, BfclPipelineSynthesizer):
        return None
    return VariantsJob(synthesizer)

"""A benchmark's Synthesizer as the job of the RODS step's synthesis worker (bfcl.synth.pipeline.SynthWorker), so
synthesis runs beside training for any benchmark through the one protocol method, `Synthesizer.variants`; and
`listed_result`, the attempts of a synthesizer that makes a plain list of verified variants."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from rods_core.benchmarks.bfcl.synth.pipeline import Attempt, SynthResult
from rods_core.benchmarks.bfcl.synth.stages import StageOutcome
from rods_core.benchmarks.protocols import Synthesizer


@dataclass(frozen=True)
class VariantsJob:
    """`job(parent, n, pool_keys, cfg) -> SynthResult`: `synthesizer.variants` with the worker's seed (the
    worker's `cfg.seed`, a run's `synth.seed` or the seed it was given) and its pool's content keys."""

    synthesizer: Synthesizer

    def __call__(self, parent: Any, n: int, pool_keys: set[str], cfg) -> SynthResult:
        return self.synthesizer.variants(parent, n, cfg.seed, pool_keys)


def worker_job(synthesizer: Synthesizer) -> VariantsJob:
    """The worker's job for a benchmark's synthesizer."""
    return VariantsJob(synthesizer)


def listed_result(parent_id: str, variants: list[Any], n: int, pool_keys: Collection[str]) -> SynthResult:
    """Verified variants made as a plain list, as attempts: each variant one accepted attempt at `augment`;
    one whose content is already in the pool (or earlier in the list), or a shortfall below `n`, one rejected
    attempt each."""
    result = SynthResult(parent_id)
    seen = set(pool_keys)
    for v in variants:
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

"""Synthesis beside training, for any benchmark: `SynthWorker` runs a job in the background (a thread or a process)
and hands its variants over without blocking a step; `worker_job` makes a benchmark's Synthesizer its job, so the
RODS step reaches every benchmark's synthesis through the one protocol method, `Synthesizer.variants`."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rods_core.benchmarks.protocols import Synthesizer
from rods_core.benchmarks.synthesis import Attempt, StageOutcome, SynthResult
from rods_core.config import SynthesisConfig

# job(parent, n, pool_keys, cfg) -> SynthResult
Job = Callable[[Any, int, set[str], SynthesisConfig], SynthResult]


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


def _result(fut: Future, parent_id: str) -> SynthResult:
    """A job's result (waiting for it); a job that raised is a rejected attempt with the error as its reason."""
    try:
        return fut.result()
    except Exception as e:  # noqa: BLE001 - a failed job must not stop training; report it
        failed = StageOutcome("plan", False, f"worker error: {type(e).__name__}: {e}")
        return SynthResult(parent_id, [Attempt([failed])])


class SynthWorker:
    """Synthesis in the background: `submit` never blocks (False when the queue is full), `drain` never waits,
    `collect` waits for the oldest jobs (runs that must repeat exactly).

    Variants accepted by earlier jobs are remembered, so two jobs never hand over the same task.
    """

    def __init__(self, cfg: SynthesisConfig, pool_keys: set[str] | None = None, *, job: Job):
        """`job(parent, n, pool_keys, cfg) -> SynthResult`: a benchmark's synthesis (`worker_job`, or a module-level
        function such as BFCL multi-turn's `synthesize`: picklable for `worker="process"`)."""
        self.cfg = cfg
        self._job = job
        self.pool_keys: set[str] = set(pool_keys or ())
        self._given = frozenset(self.pool_keys)
        self.handed_out: list[str] = []  # content keys of the variants handed out, in order (a job sees a prefix)
        self._pending: list[tuple[Future, str]] = []
        self._executor: Executor = (
            # spawn, not fork: forking a trainer that holds torch threads can deadlock the child.
            ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            if self.cfg.worker == "process"
            else ThreadPoolExecutor(max_workers=1)
        )
        self.submitted = 0
        self.refused = 0

    def submit(self, parent: Any, n: int | None = None, seed: int | None = None, known: int | None = None) -> bool:
        """Queue a parent (`n` variants, default n_per_parent; `seed`, default the config's). `known`: the job
        avoids only the first `known` variants handed out (a resumed run asking again what it asked before its
        checkpoint, when fewer had been handed out); default all of them.

        Returns False, queueing nothing, when `queue_size` jobs are already waiting or running: the
        caller never blocks, and a refused parent is simply not synthesized this time (`refused` counts
        them). A caller that must not lose the request keeps it and submits it again later.
        """
        if self.in_flight >= self.cfg.queue_size:
            self.refused += 1
            return False
        cfg = self.cfg if seed is None else self.cfg.model_copy(update={"seed": seed})
        keys = set(self.pool_keys) if known is None else self._given | set(self.handed_out[:known])
        fut = self._executor.submit(self._job, parent, n or self.cfg.n_per_parent, keys, cfg)
        self._pending.append((fut, parent.id))
        self.submitted += 1
        return True

    def drain(self) -> list[SynthResult]:
        """Finished results, without waiting; duplicates of earlier hand-outs are dropped."""
        done = [(f, pid) for f, pid in self._pending if f.done()]
        self._pending = [(f, pid) for f, pid in self._pending if not f.done()]
        return [self._dedupe(_result(fut, parent_id)) for fut, parent_id in done]

    def collect(self, count: int) -> list[SynthResult]:
        """The results of the `count` oldest jobs not yet taken back, in the order they were submitted,
        waiting for any that has not finished: what a run that must repeat exactly takes at a fixed step,
        whatever the machine's load made finish first. Duplicates of earlier hand-outs are dropped."""
        take, self._pending = self._pending[:count], self._pending[count:]
        return [self._dedupe(_result(fut, parent_id)) for fut, parent_id in take]

    def _dedupe(self, res: SynthResult) -> SynthResult:
        """Drop variants handed out before: their attempt ends rejected at `augment` instead."""
        for attempt in res.attempts:
            if attempt.variant is None:
                continue
            key = attempt.variant.content_key()
            if key in self.pool_keys:
                attempt.variant = None
                attempt.outcomes[-1] = StageOutcome("augment", False, "duplicates a variant handed out earlier")
            else:
                self.pool_keys.add(key)
                self.handed_out.append(key)
        return res

    def restore(self, handed_out: list[str]) -> None:
        """A resumed run's worker: the variants handed out before its checkpoint count as handed out."""
        self.handed_out = list(handed_out)
        self.pool_keys = set(self._given) | set(handed_out)

    @property
    def in_flight(self) -> int:
        return sum(not f.done() for f, _ in self._pending)

    def close(self, wait: bool = True) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=not wait)

    def __enter__(self) -> SynthWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close(wait=False)

"""The synthesis pipeline: Plan -> Execute -> Rewrite -> Critique -> Augment, and a worker beside training.

`synthesize(parent, n, pool_keys, cfg)` makes up to `max_attempts` candidates from one parent and keeps
the first `n` that pass every stage. Each candidate is an `Attempt`: the verdict of every stage it
reached, in order, and the variant it became or the stage and reason that rejected it; per-stage counts
are summed from those. How far a variant moves from its parent is one knob, `distance` (see `knobs`);
later attempts move less, trading variety for yield on hard parents; a candidate whose parent words
state nothing changeable is composed from the docs instead (`compose_fallback`).
`SynthWorker` runs synthesis in a background thread or process; the trainer `submit`s boundary tasks
(never blocking: a full queue refuses) and takes finished results with a non-blocking `drain()`.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import random
import re
from collections import Counter, defaultdict
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field

from rods_core.benchmarks.bfcl.seeds import leak_guard
from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.synth.augment import Augmenter
from rods_core.benchmarks.bfcl.synth.critique import Critic
from rods_core.benchmarks.bfcl.synth.execute import base_task, execute
from rods_core.benchmarks.bfcl.synth.llm import ChatEndpoint, endpoint_of
from rods_core.benchmarks.bfcl.synth.plan import Planner
from rods_core.benchmarks.bfcl.synth.rewrite import LlmRewriter, Rewriter, TemplateRewriter
from rods_core.benchmarks.bfcl.synth.stages import STAGES, StageError, StageOutcome, reason_group
from rods_core.benchmarks.bfcl.tasks import Message, Provenance, Task
from rods_core.config import SynthesisConfig
from rods_core.ids import variant_id
from rods_core.prompt_files import Prompts


def knobs(cfg: SynthesisConfig, attempt: int) -> tuple[float, float, float]:
    """(draw_prob, compose_prob, swap_prob) of one attempt: the distance knob, and later attempts nearer.

    From attempt 0 to 21 the draw probability falls linearly to a quarter of `distance` (with the default
    0.85: 0.85 -> 0.21), so a parent whose far candidates keep failing still yields near ones.
    """
    return cfg.distance * max(0.25, 1 - attempt / 28), cfg.compose_share * cfg.distance, cfg.swap_prob * cfg.distance


@dataclass
class Attempt:
    """One candidate: the verdict of each stage it reached, in order; the variant it became, or the
    rejecting stage and reason; its distance from the parent (None when Plan rejected it)."""

    outcomes: list[StageOutcome] = field(default_factory=list)
    variant: Task | None = None
    distance: int | None = None

    @property
    def stage(self) -> str | None:
        """The stage that rejected the candidate, or None when it was accepted."""
        last = self.outcomes[-1] if self.outcomes else None
        return last.stage if last is not None and not last.accepted else None

    @property
    def reason(self) -> str:
        return "accepted" if self.variant is not None else (self.outcomes[-1].reason if self.outcomes else "")


@dataclass
class SynthResult:
    """Accepted variants of one parent, every attempt that made them or was rejected, and counts per stage."""

    parent_id: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def accepted(self) -> list[Task]:
        return [a.variant for a in self.attempts if a.variant is not None]

    @property
    def outcomes(self) -> list[StageOutcome]:
        """Every stage verdict, attempt after attempt (each attempt's run ends in a rejection or an accepted augment)."""
        return [o for a in self.attempts for o in a.outcomes]

    def counts(self) -> dict[str, dict]:
        out: dict[str, dict] = {s: {"accepted": 0, "rejected": 0, "reasons": Counter()} for s in STAGES}
        for o in self.outcomes:
            out[o.stage]["accepted" if o.accepted else "rejected"] += 1
            if not o.accepted:
                out[o.stage]["reasons"][reason_group(o.reason)] += 1
        return {s: {**c, "reasons": dict(c["reasons"].most_common())} for s, c in out.items()}


def variant_distance(task: Task) -> int | None:
    """The distance a synthesized variant records in its provenance note, or None for other tasks."""
    m = re.match(r"distance=(\d+)", task.provenance.note or "")
    return int(m.group(1)) if m else None


def _rng(seed: int, parent_id: str, attempt: int) -> random.Random:
    h = hashlib.sha256(f"{seed}:{parent_id}:{attempt}".encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def make_rewriter(
    cfg: SynthesisConfig, endpoint: ChatEndpoint | None = None, prompts: Prompts | None = None
) -> Rewriter:
    return LlmRewriter(endpoint or endpoint_of(cfg), prompts) if cfg.backend == "llm" else TemplateRewriter()


def synthesize(parent: Task, n: int, pool_keys: set[str], cfg: SynthesisConfig | None = None) -> SynthResult:
    """Up to `n` verified variants of `parent` that collide with nothing in `pool_keys` or the test split."""
    cfg = cfg or SynthesisConfig()
    leak = leak_guard().reason(parent)
    if leak:
        raise ValueError(f"refusing to synthesize from {parent.id}: {leak}; variants of test tasks would leak them")
    result = SynthResult(parent.id)
    try:
        planner = Planner(parent, perturb=cfg.perturb_config)
    except StageError as e:
        result.attempts.append(Attempt([StageOutcome(e.stage, False, e.reason)]))
        return result
    stages = _Stages(planner, set(pool_keys), cfg)
    for i in range(cfg.max_attempts):
        if len(result.accepted) >= n:
            break
        attempt = stages.attempt(_rng(cfg.seed, parent.id, i), i)
        if attempt.variant is not None:
            stages.keys.add(attempt.variant.content_key())
        result.attempts.append(attempt)
    return result


class _Stages:
    """The five stages wired once for one parent; `attempt` runs one candidate through them."""

    def __init__(self, planner: Planner, keys: set[str], cfg: SynthesisConfig):
        uses_llm = cfg.backend == "llm" or cfg.llm_critic
        endpoint, prompts = (endpoint_of(cfg), Prompts(cfg.prompts_dir)) if uses_llm else (None, None)
        self.planner, self.keys, self.cfg = planner, keys, cfg
        self.parent_sig = signature(planner.parent)
        self.rewriter = make_rewriter(cfg, endpoint, prompts)
        llm = endpoint if cfg.llm_critic else None
        self.critic = Critic(signature(planner.base.task), planner.infos, keys, llm, prompts)
        self.augmenter = Augmenter(
            self.parent_sig, perturb=cfg.perturb_config, distractors=cfg.long_context_distractors
        )

    def attempt(self, rng: random.Random, i: int) -> Attempt:
        """One candidate through Plan -> Execute -> Rewrite -> Critique -> Augment; the first rejection ends it."""
        out, stage = Attempt(), "plan"
        try:
            plan = self._plan(rng, i)
            out.distance = plan.distance
            out.outcomes.append(StageOutcome("plan", True))
            stage = "execute"
            execution = execute(plan)
            out.outcomes.append(StageOutcome("execute", True))
            stage = "rewrite"
            rewrite = self.rewriter.rewrite(plan, execution, rng)
            out.outcomes.append(StageOutcome("rewrite", True))
            stage = "critique"
            base = base_task(plan).model_copy(
                update={
                    "question": [[Message(content=" ".join(s))] for s in rewrite.segments],
                    "ground_truth": execution.ground_truth,
                }
            )
            substituted = {t for t, m in enumerate(rewrite.modes) if m == "substitute"}
            self.critic.check(base, substituted, plan.changes)
            out.outcomes.append(StageOutcome("critique", True))
            stage = "augment"
            final = self.augmenter.augment(base, rewrite.segments, plan, execution, rng)
        except StageError as e:
            # Attributed to the stage that was running, so the counts chain (plan accepted = execute seen).
            out.outcomes.append(StageOutcome(stage, False, e.reason))
            return out
        out.outcomes.append(StageOutcome("augment", True))
        planner, key = self.planner, final.content_key()
        note = f"{plan.summary()}; {signature(final).summary()['class_combo']}"
        out.variant = final.model_copy(
            update={
                "id": variant_id(planner.parent.id, key),
                "provenance": Provenance(source="synth", parent_id=planner.parent.id, note=note),
            }
        )
        return out

    def _plan(self, rng: random.Random, i: int):
        cfg = self.cfg
        draw, compose_prob, swap = knobs(cfg, i)
        compose = cfg.backend == "template" and rng.random() < compose_prob
        try:
            return self.planner.plan(rng, compose=compose, draw_prob=draw, swap_prob=swap)
        except StageError as e:
            # The parent's words state nothing that can change: compose this candidate's turns instead.
            if compose or not cfg.compose_fallback or cfg.backend != "template" or "no value" not in e.reason:
                raise
            return self.planner.plan(rng, compose=True, draw_prob=draw, swap_prob=swap)


def synthesize_many(
    parents: list[Task],
    n: int,
    pool_keys: set[str] | None = None,
    cfg: SynthesisConfig | None = None,
    *,
    seed: int | None = None,
) -> tuple[list[Task], list[SynthResult]]:
    """Verified variants of several parents (a warm-start set, held-out variants), none duplicating another,
    a parent, or `pool_keys`. Each parent's draws derive from (seed, parent id, attempt) alone, so adding or
    dropping a parent changes no other parent's candidates; `seed` overrides `cfg.seed`."""
    cfg = cfg or SynthesisConfig()
    if seed is not None:
        cfg = cfg.model_copy(update={"seed": seed})
    keys = set(pool_keys or ())
    keys.update(p.content_key() for p in parents)
    variants, results = [], []
    for parent in parents:
        res = synthesize(parent, n, keys, cfg)
        keys.update(t.content_key() for t in res.accepted)
        variants += res.accepted
        results.append(res)
    return variants, results


def merge_counts(results: list[SynthResult]) -> dict[str, dict]:
    """Per-stage counts summed over several parents."""
    total: dict[str, dict] = {s: {"accepted": 0, "rejected": 0, "reasons": defaultdict(int)} for s in STAGES}
    for r in results:
        for stage, c in r.counts().items():
            total[stage]["accepted"] += c["accepted"]
            total[stage]["rejected"] += c["rejected"]
            for reason, k in c["reasons"].items():
                total[stage]["reasons"][reason] += k
    return {s: {**c, "reasons": dict(sorted(c["reasons"].items(), key=lambda x: -x[1]))} for s, c in total.items()}


# ----- beside training --------------------------------------------------------------------------------
def _job(parent: Task, n: int, pool_keys: set[str], cfg: SynthesisConfig) -> SynthResult:
    return synthesize(parent, n, pool_keys, cfg)


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

    def __init__(self, cfg: SynthesisConfig | None = None, pool_keys: set[str] | None = None, job=None):
        """`job(parent, n, pool_keys, cfg) -> SynthResult` defaults to `synthesize` (picklable for processes)."""
        self.cfg = cfg or SynthesisConfig()
        self._job = job or _job
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

    def submit(self, parent: Task, n: int | None = None, seed: int | None = None, known: int | None = None) -> bool:
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

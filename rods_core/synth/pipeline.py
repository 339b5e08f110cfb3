"""The synthesis pipeline: Plan -> Execute -> Rewrite -> Critique -> Augment, and a worker beside training.

`synthesize(parent, n, pool_keys, cfg)` makes up to `max_attempts` candidates from one parent and keeps
the first `n` that pass every stage; each attempt records one outcome per stage it reached, so the
result says how many candidates each stage accepted and rejected, and why. Later attempts keep more of
the parent's values (keep_prob rises), trading variety for yield on hard parents; a candidate whose
parent words state nothing changeable is composed from the docs instead (`compose_fallback`).
`SynthWorker` runs synthesis in a background thread or process; the trainer `submit`s boundary tasks
(never blocking: a full queue refuses) and takes finished results with a non-blocking `drain()`.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import random
from collections import Counter, defaultdict
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rods_core.ids import variant_id
from rods_core.seeds import leak_guard
from rods_core.signature import signature
from rods_core.synth.augment import augment
from rods_core.synth.critique import Critic
from rods_core.synth.execute import base_task, execute
from rods_core.synth.llm import ChatEndpoint
from rods_core.synth.plan import Planner
from rods_core.synth.rewrite import LlmRewriter, Rewriter, TemplateRewriter
from rods_core.synth.stages import STAGES, StageError, StageOutcome, reason_group
from rods_core.tasks import Message, Provenance, Task


class SynthConfig(BaseModel):
    """How variants are synthesized; YAML run configs hold one of these under `synth:`."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["template", "llm"] = Field(
        "template", description="rewrite backend: 'template' (tool docs / parent wording, no LLM) or 'llm'"
    )
    endpoint_url: str | None = Field(
        None, description="OpenAI-compatible base URL for the llm backend and critic, e.g. http://127.0.0.1:8000/v1"
    )
    endpoint_model: str | None = Field(None, description="model name sent to the endpoint")
    api_key_env: str | None = Field(
        None, description="NAME of the environment variable holding the endpoint's API key (the key is never stored)"
    )
    n_per_parent: int = Field(4, ge=1, le=100, description="accepted variants wanted per parent task")
    max_attempts: int = Field(24, ge=1, le=1000, description="candidates tried per parent before giving up")
    seed: int = Field(0, description="seed of every random choice; same seed + parent = same variants")
    perturb_config: bool = Field(True, description="also perturb the initial state (rename unused files, balances)")
    compose_share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="share of candidates whose turns are composed from the tool docs "
        "(the rest keep the parent's wording with new values)",
    )
    compose_fallback: bool = Field(
        True,
        description="when the parent's words state no value that can change, compose that candidate's turns "
        "from the tool docs instead of giving up (template backend)",
    )
    keep_prob: float = Field(0.15, ge=0.0, le=1.0, description="chance to keep a stated value at the first attempt")
    swap_prob: float = Field(
        0.3, ge=0.0, le=1.0, description="chance to swap a call for a same-skill function (composed turns)"
    )
    long_context_distractors: int = Field(
        0, ge=0, le=200, description="distractor files added to long_context variants"
    )
    llm_critic: bool = Field(False, description="also ask the endpoint to judge each variant (off by default)")
    llm_timeout_s: float = Field(60.0, gt=0, description="timeout of one endpoint request")
    queue_size: int = Field(32, ge=1, le=10_000, description="SynthWorker: parents waiting or in flight at most")
    worker: Literal["thread", "process"] = Field(
        "thread", description="SynthWorker: run beside training in a thread or a process"
    )

    @model_validator(mode="after")
    def _endpoint_when_needed(self) -> SynthConfig:
        if (self.backend == "llm" or self.llm_critic) and not (self.endpoint_url and self.endpoint_model):
            raise ValueError(
                "backend='llm' and llm_critic need endpoint_url and endpoint_model; set both or use backend='template'"
            )
        return self

    def endpoint(self) -> ChatEndpoint:
        return ChatEndpoint(self.endpoint_url, self.endpoint_model, self.api_key_env, self.llm_timeout_s)


@dataclass
class SynthResult:
    """Accepted variants of one parent, and per stage how many candidates passed or failed and why."""

    parent_id: str
    accepted: list[Task] = field(default_factory=list)
    outcomes: list[StageOutcome] = field(default_factory=list)
    attempts: int = 0

    def counts(self) -> dict[str, dict]:
        out: dict[str, dict] = {s: {"accepted": 0, "rejected": 0, "reasons": Counter()} for s in STAGES}
        for o in self.outcomes:
            out[o.stage]["accepted" if o.accepted else "rejected"] += 1
            if not o.accepted:
                out[o.stage]["reasons"][reason_group(o.reason)] += 1
        return {s: {**c, "reasons": dict(c["reasons"].most_common())} for s, c in out.items()}


def _rng(seed: int, parent_id: str, attempt: int) -> random.Random:
    h = hashlib.sha256(f"{seed}:{parent_id}:{attempt}".encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def make_rewriter(cfg: SynthConfig) -> Rewriter:
    return LlmRewriter(cfg.endpoint()) if cfg.backend == "llm" else TemplateRewriter()


def synthesize(parent: Task, n: int, pool_keys: set[str], cfg: SynthConfig | None = None) -> SynthResult:
    """Up to `n` verified variants of `parent` that collide with nothing in `pool_keys` or the test split."""
    cfg = cfg or SynthConfig()
    leak = leak_guard().reason(parent)
    if leak:
        raise ValueError(f"refusing to synthesize from {parent.id}: {leak}; variants of test tasks would leak them")
    result = SynthResult(parent.id)
    try:
        planner = Planner(parent, keep_prob=cfg.keep_prob, swap_prob=cfg.swap_prob, perturb=cfg.perturb_config)
    except StageError as e:
        result.outcomes.append(StageOutcome(e.stage, False, e.reason))
        result.attempts = 1
        return result
    parent_sig = signature(parent)
    keys = set(pool_keys)
    critic = Critic(signature(planner.base.task), planner.infos, keys, cfg.endpoint() if cfg.llm_critic else None)
    rewriter = make_rewriter(cfg)
    for attempt in range(cfg.max_attempts):
        if len(result.accepted) >= n:
            break
        result.attempts += 1
        rng = _rng(cfg.seed, parent.id, attempt)
        try:
            variant = _attempt(planner, rewriter, critic, parent_sig, cfg, rng, attempt, result.outcomes)
        except StageError as e:
            result.outcomes.append(StageOutcome(e.stage, False, e.reason))
            continue
        keys.add(variant.content_key())
        result.accepted.append(variant)
    return result


def _attempt(planner, rewriter, critic, parent_sig, cfg, rng, attempt, outcomes) -> Task:
    keep = min(0.8, cfg.keep_prob + 0.03 * attempt)
    compose = cfg.backend == "template" and rng.random() < cfg.compose_share
    try:
        plan = planner.plan(rng, compose=compose, keep_prob=keep)
    except StageError as e:
        # The parent's words state nothing that can change: compose this candidate's turns instead.
        if compose or not cfg.compose_fallback or cfg.backend != "template" or "no value" not in e.reason:
            raise
        plan = planner.plan(rng, compose=True, keep_prob=keep)
    outcomes.append(StageOutcome("plan", True))
    execution = execute(plan)
    outcomes.append(StageOutcome("execute", True))
    rewrite = rewriter.rewrite(plan, execution, rng)
    outcomes.append(StageOutcome("rewrite", True))
    base = base_task(plan).model_copy(
        update={
            "question": [[Message(content=" ".join(s))] for s in rewrite.segments],
            "ground_truth": execution.ground_truth,
        }
    )
    critic.check(base, {t for t, m in enumerate(rewrite.modes) if m == "substitute"}, plan.changes)
    outcomes.append(StageOutcome("critique", True))
    final = augment(
        base, rewrite.segments, plan.base.spec, parent_sig, distractors=cfg.long_context_distractors, rng=rng
    )
    outcomes.append(StageOutcome("augment", True))
    key = final.content_key()
    note = f"{plan.summary()}; {signature(final).summary()['class_combo']}"
    return final.model_copy(
        update={
            "id": variant_id(planner.parent.id, key),
            "provenance": Provenance(source="synth", parent_id=planner.parent.id, note=note),
        }
    )


def synthesize_many(
    parents: list[Task], n: int, pool_keys: set[str] | None = None, cfg: SynthConfig | None = None
) -> tuple[list[Task], list[SynthResult]]:
    """Variants of several parents (an SFT warm-start set, say), none duplicating another or the pool."""
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
def _job(parent: Task, n: int, pool_keys: set[str], cfg: SynthConfig) -> SynthResult:
    return synthesize(parent, n, pool_keys, cfg)


class SynthWorker:
    """Synthesis in the background: `submit` never blocks (False when the queue is full), `drain` never waits.

    Variants accepted by earlier jobs are remembered, so two jobs never hand over the same task.
    """

    def __init__(self, cfg: SynthConfig | None = None, pool_keys: set[str] | None = None, job=None):
        """`job(parent, n, pool_keys, cfg) -> SynthResult` defaults to `synthesize` (picklable for processes)."""
        self.cfg = cfg or SynthConfig()
        self._job = job or _job
        self.pool_keys: set[str] = set(pool_keys or ())
        self._pending: list[Future] = []
        self._executor: Executor = (
            # spawn, not fork: forking a trainer that holds torch threads can deadlock the child.
            ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            if self.cfg.worker == "process"
            else ThreadPoolExecutor(max_workers=1)
        )
        self.submitted = 0
        self.refused = 0

    def submit(self, parent: Task, n: int | None = None) -> bool:
        """Queue a parent; False (and nothing queued) when `queue_size` jobs are already waiting."""
        if sum(not f.done() for f in self._pending) >= self.cfg.queue_size:
            self.refused += 1
            return False
        fut = self._executor.submit(self._job, parent, n or self.cfg.n_per_parent, set(self.pool_keys), self.cfg)
        self._pending.append(fut)
        self.submitted += 1
        return True

    def drain(self) -> list[SynthResult]:
        """Finished results, without waiting; duplicates of earlier hand-outs are dropped."""
        done = [f for f in self._pending if f.done()]
        self._pending = [f for f in self._pending if not f.done()]
        out = []
        for fut in done:
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - a failed job must not stop training; report it
                res = SynthResult("?", outcomes=[StageOutcome("plan", False, f"worker error: {type(e).__name__}: {e}")])
            out.append(self._dedupe(res))
        return out

    def _dedupe(self, res: SynthResult) -> SynthResult:
        """Drop variants handed out before; their passed `augment` outcome becomes a rejection, so the
        k-th accepted augment outcome still belongs to the k-th accepted variant."""
        fresh, outcomes, k = [], [], 0
        for o in res.outcomes:
            if o.stage == "augment" and o.accepted:
                variant = res.accepted[k]
                k += 1
                if variant.content_key() in self.pool_keys:
                    o = StageOutcome("augment", False, "duplicates a variant handed out earlier")
                else:
                    self.pool_keys.add(variant.content_key())
                    fresh.append(variant)
            outcomes.append(o)
        res.accepted, res.outcomes = fresh, outcomes
        return res

    @property
    def in_flight(self) -> int:
        return sum(not f.done() for f in self._pending)

    def close(self, wait: bool = True) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=not wait)

    def __enter__(self) -> SynthWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close(wait=False)

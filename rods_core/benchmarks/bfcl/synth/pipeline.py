"""The synthesis pipeline: Plan -> Execute -> Rewrite -> Critique -> Augment.

`synthesize(parent, n, pool_keys, cfg)` makes up to `max_attempts` candidates from one parent and keeps
the first `n` that pass every stage. Each candidate is an `Attempt`: the verdict of every stage it
reached, in order, and the variant it became or the stage and reason that rejected it; per-stage counts
are summed from those. How far a variant moves from its parent is one knob, `distance` (see `knobs`);
later attempts move less, trading variety for yield on hard parents; a candidate whose parent words
state nothing changeable is composed from the docs instead (`compose_fallback`).
rods_core.benchmarks.synth_worker runs it beside training (`synthesize` is picklable: a process worker's job).
"""

from __future__ import annotations

import hashlib
import random
import re

from rods_core.benchmarks.bfcl.seeds import leak_guard
from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.synth.augment import Augmenter
from rods_core.benchmarks.bfcl.synth.critique import Critic
from rods_core.benchmarks.bfcl.synth.execute import base_task, execute
from rods_core.benchmarks.bfcl.synth.llm import ChatEndpoint, endpoint_of
from rods_core.benchmarks.bfcl.synth.plan import Planner
from rods_core.benchmarks.bfcl.synth.rewrite import LlmRewriter, Rewriter, TemplateRewriter
from rods_core.benchmarks.bfcl.tasks import Message, Provenance, Task
from rods_core.benchmarks.synthesis import Attempt, StageError, StageOutcome, SynthResult
from rods_core.config import SynthesisConfig
from rods_core.config.prompt_files import Prompts
from rods_core.ids import variant_id


def knobs(cfg: SynthesisConfig, attempt: int) -> tuple[float, float, float]:
    """(draw_prob, compose_prob, swap_prob) of one attempt: the distance knob, and later attempts nearer.

    From attempt 0 to 21 the draw probability falls linearly to a quarter of `distance` (with the default
    0.85: 0.85 -> 0.21), so a parent whose far candidates keep failing still yields near ones.
    """
    return cfg.distance * max(0.25, 1 - attempt / 28), cfg.compose_share * cfg.distance, cfg.swap_prob * cfg.distance


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

"""The trainer's task source: its interface (TaskSource) and the RODS dynamic replay buffer.

Pools: active (sampled for training), staged (new variants: awaiting review or being probed), dormant
(mastered seeds, re-probed every `reprobe_every` steps) and retired (variants that left; kept with their
records for export). Seeds are never retired; the retirement rules are pure functions in
rods_core.retirement, applied here. Departures from the paper: hard seeds stay active (at a low sampling
weight) rather than resting, and a variant is promoted at its first probe that reads as boundary
(retired after `probe_obs` probes that do not). The static baselines are in rods_core.sources.

Sampling: staged probes (<= probe_slots) and due dormant re-probes (<= reprobe_slots) first, then active
tasks without replacement, weighted by region (boundary 4 > unseen 2 > hard 1 > mastered 0.5 by default),
then resting seeds re-probed early when the active pool is smaller than a batch. Admission control:
room() counts both P_max and the staged backlog the probe slots can serve within max_probe_wait steps.
Every pool change is a BufferEvent with a reason code from rods_core.reasons; a decision's events come out
of `decision_moves()` at the step it is applied. The RNG is `random.Random(config.seed)`, saved in state_dict, and every
iteration that feeds it runs over insertion-ordered dicts, so a restored buffer samples the same future."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.boundary import BoundaryDetector, TaskStats
from rods_core.config import BoundaryConfig, BufferConfig
from rods_core.ids import next_edit_id
from rods_core.reasons import DecisionReason, OfferReason, ReprobeReason
from rods_core.retirement import (
    PoolMove,
    active_retirement,
    capacity_evictions,
    probe_verdict,
    seed_exemption,
    stale_probe,
)
from rods_core.rng import derive_seed, rng_state, set_rng_state, weighted_pick

Pool = Literal["active", "staged", "dormant", "retired"]
POOLS: tuple[Pool, ...] = ("active", "staged", "dormant", "retired")


# ----- events, decisions, the interface --------------------------------------------------------------
@dataclass(frozen=True)
class BufferEvent:
    """One pool transition; a pool of None means outside the buffer (an offer that was not admitted)."""

    step: int
    task_id: str
    from_pool: Pool | None
    to_pool: Pool | None
    reason: str  # a code of rods_core.reasons
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", str(self.reason))  # the plain code, as the log stores it


class BufferDecision(BaseModel):
    """A researcher's decision, applied at a step boundary."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["approve", "reject", "edit", "reseed"]
    task_id: str = Field(min_length=1, description="the task decided on")
    task: Any = Field(
        None, description="edit only: the edited task (the run's task type), already re-verified by the caller"
    )
    mode: Literal["promote", "synthesize"] | None = Field(
        None, description="reseed only: promote the task to a seed (default), or request more variants of it"
    )

    @model_validator(mode="after")
    def _fields_fit_action(self) -> BufferDecision:
        if (self.action == "edit") != (self.task is not None):
            raise ValueError("decision.task is required for action 'edit' and not allowed otherwise")
        if self.mode is not None and self.action != "reseed":
            raise ValueError(f"decision.mode applies to action 'reseed' only, not {self.action!r}")
        return self


@runtime_checkable
class TaskSource(Protocol):
    """What the trainer draws tasks from, and feeds reward matrices and decisions to. Each step updates
    `detector` with the matrix (the ids `reprobes` names start fresh), then calls `observe`."""

    detector: BoundaryDetector | None

    def sample(self, n: int) -> list[str]: ...
    def task(self, task_id: str) -> TaskRecord: ...
    def reprobes(self, matrix: Mapping[str, Sequence[float]]) -> list[str]: ...
    def observe(self, step: int, matrix: Mapping[str, Sequence[float]]) -> list[BufferEvent]: ...
    def offer(self, variants: list[TaskRecord], step: int) -> list[BufferEvent]: ...
    def apply_decision(self, decision: BufferDecision) -> tuple[bool, str]: ...
    def decision_moves(self) -> list[BufferEvent]: ...
    def pools(self) -> dict[str, list[str]]: ...
    def boundary_tasks(self, k: int) -> list[str]: ...
    def room(self) -> int: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def admission(cfg: BufferConfig) -> tuple[Pool, str, OfferReason]:
    """(pool, staged status, reason) an admitted variant enters with: staged and probed, staged awaiting review
    (`review: gated`), or active at once (`injection: direct`, an ablation of staged injection)."""
    if cfg.injection == "direct":
        return "active", "", OfferReason.DIRECT
    if cfg.review == "gated":
        return "staged", "awaiting_review", OfferReason.AWAITING_REVIEW
    return "staged", "probing", OfferReason.STAGED


# ----- the replay buffer ------------------------------------------------------------------------------
@dataclass
class Entry:
    """The buffer's bookkeeping of one task (its statistics live in the detector)."""

    pool: Pool
    seed: bool
    since: int  # step it entered its current pool
    status: str = ""  # staged only: "probing" | "awaiting_review"
    probes: int = 0  # observations since it entered its current pool
    pending: int = 0  # draws not yet observed (keeps a probe from being drawn twice before its result)
    draws: int = 0
    reason: str = ""  # the reason of its last transition


class ReplayBuffer:
    """RODS' dynamic replay buffer: staged injection, multi-layer retirement, dormant seeds, P_max.

    Not thread-safe: call it from the training loop at step boundaries and hand the ids from
    boundary_tasks() to the synthesis worker; offer() its results back from the loop.
    """

    def __init__(
        self, seeds: Sequence[TaskRecord], detector: BoundaryDetector | None = None, config: BufferConfig | None = None
    ):
        if not seeds:
            raise ValueError("a replay buffer needs at least one seed task")
        self.config = config or BufferConfig()
        # not `detector or …`: an empty detector has len 0, is falsy, and its config would be lost
        self.detector = detector if detector is not None else BoundaryDetector(BoundaryConfig())
        self.step = 0
        self.rng = random.Random(self.config.seed)
        # Parent picks (uniform_synth) get their own stream, so sampling does not depend on how often
        # the loop asks for parents.
        self.parent_rng = random.Random(derive_seed(self.config.seed, "buffer-parents"))
        self._ctor_ids = tuple(t.id for t in seeds)
        self._seed_ids = list(self._ctor_ids)  # grows when a decision promotes a variant to seed
        self._tasks: dict[str, TaskRecord] = {}
        self._entries: dict[str, Entry] = {}
        self._pools: dict[Pool, dict[str, None]] = {p: {} for p in POOLS}  # insertion-ordered sets
        self._content: dict[str, str] = {}  # content key -> task id, for duplicate offers
        self._children: dict[str, int] = {}  # parent id -> variants offered from it
        self.synthesis_requests: list[str] = []  # reseed/synthesize decisions the loop has not served yet
        self._outbox: list[BufferEvent] = []
        for t in seeds:
            if t.id in self._tasks:
                raise ValueError(f"seed id {t.id!r} appears twice")
            self._add(t, Entry("active", True, 0))

    @property
    def target_active(self) -> int:
        return self.config.target_active or 2 * len(self._seed_ids)

    # ----- sampling (draws counted at generation time) -------------------------------------------
    def sample(self, n: int) -> list[str]:
        """Task ids for the next generation batch: staged probes and due re-probes first, then active
        tasks drawn without replacement by region weight; repeats only when the pool is smaller than n."""
        if n < 1:
            raise ValueError(f"sample size must be >= 1, got {n}")
        cfg = self.config
        fixed = (self._due("staged", cfg.probe_slots) + self._due("dormant", cfg.reprobe_slots))[:n]
        active = list(self._pools["active"])
        picked = fixed + self._draw(active, n - len(fixed))
        if len(picked) < n:  # the active pool is smaller than a batch: re-probe resting seeds early
            resting = sorted((self._entries[t].since, t) for t in self._pools["dormant"] if t not in picked)
            picked += [t for _, t in resting[: n - len(picked)]]
        # Tiny pools: repeat the batch so far; the caller merges a repeated id's rewards into one group.
        picked += [picked[i % len(picked)] for i in range(n - len(picked))]
        for tid in picked:
            e = self._entries[tid]
            e.draws += 1
            if e.pool != "active":
                e.pending += 1
        return picked

    def _due(self, pool: Pool, slots: int) -> list[str]:
        """Staged variants waiting for a probe, or dormant seeds whose rest is over, oldest first."""
        due = []
        for tid in self._pools[pool]:
            e = self._entries[tid]
            if e.pending or (pool == "staged" and e.status != "probing"):
                continue
            if pool == "dormant" and self.step - e.since < self.config.reprobe_every:
                continue
            due.append((e.since, e.probes, tid))
        return [tid for *_, tid in sorted(due)[:slots]]

    def _draw(self, ids: list[str], n: int) -> list[str]:
        if n <= 0 or not ids:
            return []
        weights = [self._weight(tid) for tid in ids]
        if not any(weights):
            weights = [1.0] * len(ids)
        return weighted_pick(ids, weights, n, self.rng)

    def _weight(self, tid: str) -> float:
        cfg, region = self.config, self.detector.region(tid)
        if region is None:
            return cfg.weight_unseen
        return {"boundary": cfg.weight_boundary, "hard": cfg.weight_hard, "mastered": cfg.weight_mastered}[region]

    # ----- observation ----------------------------------------------------------------------------
    def reprobes(self, matrix: Mapping[str, Sequence[float]]) -> list[str]:
        """The matrix's tasks that are dormant seeds' re-probes: the detector starts their statistics fresh
        (`detector.update(..., fresh=)`), before `observe` judges them."""
        unknown = [t for t in matrix if t not in self._entries]
        if unknown:
            raise ValueError(f"reward matrix names task(s) the buffer never held: {unknown[:5]}")
        return [t for t in matrix if self._entries[t].pool == "dormant"]

    def observe(self, step: int, matrix: Mapping[str, Sequence[float]]) -> list[BufferEvent]:
        """Judge one generation step's reward matrix, once the detector holds it; return the pool
        transitions it caused (a decision's come out of decision_moves())."""
        self.reprobes(matrix)  # refuses a task it never held
        self.step = max(self.step, step)
        events: list[BufferEvent] = []
        for tid in matrix:
            e = self._entries[tid]
            e.pending, e.probes = 0, e.probes + 1
            st = self.detector.stats(tid)
            if e.pool == "staged" and e.status == "probing":
                events += self._judge_probe(tid, e, st)
            elif e.pool == "dormant":
                events += self._judge_reprobe(tid, e, st)
        return events + self._retire_active() + self._retire_stale_probes() + self._evict_over_capacity()

    def _judge_probe(self, tid: str, e: Entry, st: TaskStats) -> list[BufferEvent]:
        v = probe_verdict(st, e.probes, self.config)
        return [] if v is None else [self._apply(tid, v)]

    def _judge_reprobe(self, tid: str, e: Entry, st: TaskStats) -> list[BufferEvent]:
        detail = f"re-probe mean {st.last_mean:.2f}, var share {st.last_var_share:.2f}"
        if st.region == "mastered":
            return [self._move(tid, "dormant", ReprobeReason.MASTERED, detail)]  # rests another R steps
        return [self._move(tid, "active", ReprobeReason(f"wake/{st.region}"), "forgetting caught: " + detail)]

    def _retire_active(self) -> list[BufferEvent]:
        """Apply the retirement layers to every active task: seeds only ever go dormant (mastered)."""
        events = []
        for tid in list(self._pools["active"]):
            e = self._entries[tid]
            v = active_retirement(self.detector.stats(tid), e.since, self.step, self.config)
            if e.seed:
                v = seed_exemption(v)
            if v is not None:
                events.append(self._apply(tid, v))
        return events

    def _retire_stale_probes(self) -> list[BufferEvent]:
        probing = [t for t in self._pools["staged"] if self._entries[t].status == "probing"]
        verdicts = [
            (t, stale_probe(self.detector.stats(t), self._entries[t].since, self.step, self.config)) for t in probing
        ]
        return [self._apply(t, v) for t, v in verdicts if v is not None]

    def _evict_over_capacity(self) -> list[BufferEvent]:
        variants = [(t, self.detector.stats(t)) for t in self._pools["active"] if not self._entries[t].seed]
        evicted = capacity_evictions(variants, len(self._pools["active"]), self.target_active)
        return [self._apply(t, v) for t, v in evicted]

    # ----- synthesis side -------------------------------------------------------------------------
    def room(self) -> int:
        """How many more variants may be admitted now: the expansion budget P_max, and no more staged
        than the probe slots can probe within `max_probe_wait` steps."""
        cfg = self.config
        alive = sum(not self._entries[t].seed for p in ("active", "staged") for t in self._pools[p])
        backlog = sum(self._entries[t].status == "probing" for t in self._pools["staged"])
        caps = [cfg.probe_slots * cfg.max_probe_wait - backlog]
        if cfg.expansion_budget:
            caps.append(cfg.p_max - alive)
        return max(0, min(caps))

    def offer(self, variants: list[TaskRecord], step: int) -> list[BufferEvent]:
        """Verified variants enter staged (probing, or awaiting review when gated; active at once under
        `injection: direct`) while room() allows."""
        self.step = max(self.step, step)
        cfg, events, room = self.config, [], self.room()
        for t in variants:
            dup = t.id if t.id in self._entries else self._content.get(t.content_key())
            if dup is not None:
                events.append(BufferEvent(self.step, t.id, None, None, OfferReason.DUPLICATE, f"same as {dup}"))
            elif room <= 0:
                why = f"{cfg.probe_slots * cfg.max_probe_wait} variants await a probe"
                why = f"p_max {cfg.p_max} reached or {why}" if cfg.expansion_budget else why
                events.append(BufferEvent(self.step, t.id, None, None, OfferReason.BUDGET, why))
            else:
                room -= 1
                pool, status, reason = admission(cfg)
                self._add(t, Entry(pool, False, self.step, status=status, reason=str(reason)))
                events.append(BufferEvent(self.step, t.id, None, pool, reason))
        return events

    def boundary_tasks(self, k: int) -> list[str]:
        """Parents for the next synthesis round: every researcher request (reseed → synthesize) first, then
        up to k boundary tasks with the fewest variants so far (most informative first) — or random seeds
        under `synth_parents: uniform`."""
        requested, self.synthesis_requests = list(self.synthesis_requests), []
        n = k
        if n <= 0:
            return requested
        if self.config.synth_parents == "uniform":
            return requested + self.parent_rng.sample(self._seed_ids, min(n, len(self._seed_ids)))
        boundary = [t for t in self._pools["active"] if self.detector.region(t) == "boundary" and t not in requested]
        boundary.sort(key=lambda t: (self._children.get(t, 0), -self.detector.stats(t).var))
        return requested + boundary[:n]

    # ----- decisions ------------------------------------------------------------------------------
    def decision_moves(self) -> list[BufferEvent]:
        """The pool transitions of the decisions applied since the last call, in decision order: the step logs
        them beside its decision_applied rows, not a step later."""
        events, self._outbox = self._outbox, []
        return events

    def apply_decision(self, decision: BufferDecision) -> tuple[bool, str]:
        """Apply a researcher's decision now; its transitions come out of decision_moves() at the same step."""
        tid, e = decision.task_id, self._entries.get(decision.task_id)
        if e is None:
            return False, f"unknown task {tid!r}"
        act = decision.action
        if act == "approve":
            if e.pool != "staged" or e.status != "awaiting_review":
                return False, f"{tid} is not awaiting review (pool {e.pool})"
            e.status = "probing"
            self._outbox.append(BufferEvent(self.step, tid, "staged", "staged", DecisionReason.APPROVE, "now probed"))
            return True, "approved: it will be probed"
        if act == "reject":
            if e.seed or e.pool == "retired":
                return False, f"{tid} is a seed or already retired; seeds are never deleted"
            self._outbox.append(self._move(tid, "retired", DecisionReason.REJECT))
            return True, "rejected: retired"
        if act == "edit":
            return self._apply_edit(tid, e, decision.task)
        if decision.mode == "synthesize":
            self.synthesis_requests.append(tid)
            return True, "more variants requested: boundary_tasks() returns it next"
        if e.seed:
            return False, f"{tid} is already a seed"
        e.seed = True
        self._seed_ids.append(tid)
        self._outbox.append(self._move(tid, "active", DecisionReason.RESEED, "promoted to seed"))
        return True, "promoted to seed: never retired from now on"

    def _apply_edit(self, tid: str, e: Entry, edited: TaskRecord) -> tuple[bool, str]:
        if edited.id == tid or edited.id in self._entries:  # records are immutable per id: give it a fresh one
            edited = edited.model_copy(update={"id": next_edit_id(tid, self._entries)})
        prov = edited.provenance.model_copy(update={"source": "edit", "parent_id": tid, "created_step": self.step})
        edited = edited.model_copy(update={"provenance": prov})
        replaces = not e.seed and e.pool in ("active", "staged")
        if not replaces and self.room() <= 0:
            return False, f"p_max {self.config.p_max} reached; the edit of {tid} was not admitted"
        if replaces:
            self._outbox.append(self._move(tid, "retired", DecisionReason.EDIT, f"replaced by {edited.id}"))
        self._add(edited, Entry("staged", False, self.step, status="probing", reason=str(DecisionReason.EDIT)))
        self._outbox.append(BufferEvent(self.step, edited.id, None, "staged", DecisionReason.EDIT, f"edit of {tid}"))
        return True, f"edited as {edited.id}: probed next"

    # ----- views ----------------------------------------------------------------------------------
    def task(self, task_id: str) -> TaskRecord:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise KeyError(f"the buffer holds no task {task_id!r}") from None

    def pools(self) -> dict[str, list[str]]:
        """Disjoint pools; seeds are in active or dormant, never retired."""
        return {p: list(ids) for p, ids in self._pools.items()}

    # ----- internals ------------------------------------------------------------------------------
    def _add(self, task: TaskRecord, entry: Entry) -> None:
        self._tasks[task.id] = task
        self._entries[task.id] = entry
        self._pools[entry.pool][task.id] = None
        self._content.setdefault(task.content_key(), task.id)
        if (parent := task.provenance.parent_id) is not None and not entry.seed:
            self._children[parent] = self._children.get(parent, 0) + 1

    def _apply(self, tid: str, move: PoolMove) -> BufferEvent:
        """Move a task to the pool a rule sends it to."""
        return self._move(tid, move.to_pool, move.reason, move.detail)

    def _move(self, tid: str, to: Pool, reason: str, detail: str = "") -> BufferEvent:
        e = self._entries[tid]
        src = e.pool
        del self._pools[src][tid]
        self._pools[to][tid] = None
        e.pool, e.since, e.probes, e.reason = to, self.step, 0, str(reason)
        if to != "staged":
            e.status = ""
        return BufferEvent(self.step, tid, src, to, reason, detail)

    # ----- checkpoint -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable; holds the records of every task that was not a constructor seed."""
        ctor = set(self._ctor_ids)
        return {
            "version": 1,
            "kind": "replay",
            "config": self.config.model_dump(),
            "step": self.step,
            "rng": rng_state(self.rng),
            "parent_rng": rng_state(self.parent_rng),
            "ctor_ids": list(self._ctor_ids),
            "seed_ids": list(self._seed_ids),
            "entries": {tid: asdict(e) for tid, e in self._entries.items()},
            "pools": {p: list(ids) for p, ids in self._pools.items()},
            "tasks": {tid: t.to_record() for tid, t in self._tasks.items() if tid not in ctor},
            "children": dict(self._children),
            "synthesis_requests": list(self.synthesis_requests),
            "outbox": [asdict(ev) for ev in self._outbox],
            "detector": self.detector.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a saved buffer over the same seeds; draws in flight at save time are forgotten."""
        if state.get("version") != 1 or state.get("kind") != "replay":
            raise ValueError(f"buffer state: expected a version-1 replay state, got {state.get('kind')!r}")
        if list(state["ctor_ids"]) != list(self._ctor_ids):
            missing = sorted(set(state["ctor_ids"]) ^ set(self._ctor_ids))[:5]
            raise ValueError(f"buffer state: saved over different seeds (differing ids: {missing})")
        seeds = {t: self._tasks[t] for t in self._ctor_ids}
        kind = type(seeds[self._ctor_ids[0]])  # variants are tasks of their seeds' type (the run's benchmark's)
        tasks = {**seeds, **{tid: kind.model_validate(rec) for tid, rec in state["tasks"].items()}}
        self.step = int(state["step"])
        set_rng_state(self.rng, state["rng"])
        set_rng_state(self.parent_rng, state["parent_rng"])
        self._seed_ids = list(state["seed_ids"])
        self._entries = {tid: Entry(**{**rec, "pending": 0}) for tid, rec in state["entries"].items()}
        self._tasks = {tid: tasks[tid] for tid in self._entries}
        self._pools = {p: dict.fromkeys(state["pools"][p]) for p in POOLS}
        self._content = {}
        for tid, t in self._tasks.items():
            self._content.setdefault(t.content_key(), tid)
        self._children = dict(state["children"])
        self.synthesis_requests = list(state["synthesis_requests"])
        self._outbox = [BufferEvent(**ev) for ev in state["outbox"]]
        self.detector.load_state_dict(state["detector"])

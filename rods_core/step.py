"""The RODS hooks of a training step: boundary detector → replay buffer → synthesis → researcher decisions.

`RodsStep.after_step(step, report, decisions)` runs on every rank after TRL's update, on the batch's reward
matrix (no generation, no environment call). Synthesis runs in a worker thread on rank 0 beside training
and is collected when ready (with synthesis.deterministic: at a fixed later step, waiting if late); the variants it accepted are shared from rank 0, and the decisions arrive
already shared by the loop, so every rank's buffer makes the same moves. It returns the step's events,
metrics, decision outcomes and state digest; the loop records them (rank 0 only). The static baselines
run the same code with a source that never changes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rods_core.benchmarks.edits import parse_edit, verify_edit
from rods_core.benchmarks.leaks import TestSplitRefused, refuse_test_tasks
from rods_core.benchmarks.protocols import Benchmark, TaskRecord
from rods_core.benchmarks.synth_worker import SynthWorker, worker_job
from rods_core.benchmarks.synthesis import StageOutcome
from rods_core.boundary import group_stats, is_informative
from rods_core.buffer import BufferDecision
from rods_core.config import RunConfig
from rods_core.ranks import Ranks, digest
from rods_core.recording import Decision, DecisionOutcome
from rods_core.rng import derive_seed
from rods_core.sources import build_source
from rods_core.tasksets import HELDOUT_REASON, heldout_keys
from rods_core.trainer import RolloutReport

MAX_DECISION_PAYLOAD = 1_000_000  # characters of JSON; an edited task is a few KB
MAX_REASON = 2_000  # a reason is shown in the app and stored in the database: bounded


@dataclass
class Asked:
    """A synthesis job asked of the worker and not yet taken back: what a resumed run asks again, exactly."""

    parent: str
    n: int
    seed: int
    due: int  # synthesis.deterministic: the step it is taken back at
    known: int  # variants the worker had handed out when it was asked: the job saw only those
    task: TaskRecord  # the parent as asked (a decision may remove it from the pools before the job is back)


@dataclass
class StepOutcome:
    """What the RODS hooks did at one step: event rows by kind, step metrics, the decisions' outcomes, the
    pools when they changed since the last step (None otherwise), and the state digest."""

    events: dict[str, list[dict]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    decisions: list[DecisionOutcome] = field(default_factory=list)
    pools: dict[str, list[TaskRecord]] | None = None
    digest: str = ""


class RodsStep:
    """Task source (static seeds or the replay buffer) + detector + synthesis worker + decisions, per rank."""

    def __init__(
        self,
        cfg: RunConfig,
        seeds: list[TaskRecord],
        ranks: Ranks,
        benchmark: Benchmark,
        scratch: Path | None = None,
    ):
        """`benchmark`: the run's task family (its task type, leak guard and synthesizer)."""
        bench = benchmark
        self.cfg, self.ranks, self.benchmark, self.scratch = cfg, ranks, bench, scratch
        self.task_type, self.leak_reason = bench.task_type, bench.leak_reason
        self.source = build_source(cfg.method, seeds, cfg.boundary, cfg.buffer)
        self.detector = self.source.detector
        self.seed_ids = {t.id for t in seeds}
        self.trajectories = 0
        self.tokens: dict[str, float] = {}  # per task: tokens generated per rollout in its last group
        self.worker = None
        if cfg.synthesizes and ranks.main and bench.synthesizer is not None:
            job = worker_job(bench.synthesizer)
            self.worker = SynthWorker(cfg.synthesis, pool_keys={t.content_key() for t in seeds}, job=job)
            # the leak guard's test keys (BFCL's: ~0.3 s) built here, not inside the first step that synthesizes
            self.leak_reason(seeds[0])
        self._asked: list[Asked] = []  # jobs asked of the worker, not yet back, in the order asked
        self.heldout = heldout_keys(cfg.synthesis.exclude, bench)  # content key -> the held-out set's name
        self._pools_version: str | None = None  # the pools last reported in a StepOutcome

    # ----- what the trainer calls ------------------------------------------------------------------
    def draw(self, n: int) -> list[str]:
        return self.source.sample(n)

    def task(self, task_id: str) -> TaskRecord:
        return self.source.task(task_id)

    def expected_tokens(self, task_id: str) -> float | None:
        """Tokens a rollout of the task is expected to generate: its last group's mean, else its parent's
        (a variant keeps its parent's structure), else None."""
        if task_id in self.tokens:
            return self.tokens[task_id]
        try:
            parent = self.source.task(task_id).provenance.parent_id
        except KeyError:
            return None
        return self.tokens.get(parent) if parent else None

    # ----- one step ----------------------------------------------------------------------------
    def after_step(self, step: int, report: RolloutReport, decisions: list[Decision]) -> StepOutcome:
        """The RODS side of step `step`: `report` is its rollouts (reward matrix, accuracy, tokens),
        `decisions` the researcher's decisions claimed for it, the same list on every rank."""
        matrix: dict[str, list[float]] = {}
        for tid, rewards in report.groups:  # a task drawn twice (tiny pools) is one group of its rewards
            matrix.setdefault(tid, []).extend(rewards)
        out = StepOutcome()
        self.detector.update(step, matrix, fresh=self.source.reprobes(matrix))
        changes = self.detector.changes(step)
        moves = self.source.observe(step, matrix)  # the buffer's probes and retirements
        variants, out.events["variant"], out.events["boundary_sample"], synth_metrics = self._synthesis(step)
        moves += self.source.offer(variants, step) if variants else []
        out.decisions = apply_decisions(decisions, self._apply)
        moves += self.source.decision_moves()  # logged at this step, in the decisions' order
        out.events["decision_applied"] = [
            {"step": step, "decision_id": o.decision_id, "outcome": o.outcome, "reason": o.reason}
            for o in out.decisions
        ]
        self.trajectories += sum(len(r) for r in matrix.values())
        for (tid, rewards), n in zip(report.groups, report.group_tokens, strict=False):
            self.tokens[tid] = n / max(len(rewards), 1)
        out.events["task_stats"] = [self._task_row(step, tid, len(r)) for tid, r in matrix.items()]
        out.events["rollouts"] = _rollout_rows(step, report)
        out.events["region_change"] = [
            {"step": step, "task_id": c.task_id, "old": c.old or "new", "new": c.new} for c in changes
        ]
        out.events["buffer"] = [_move_row(m) for m in moves]
        out.metrics = {**self._metrics(report, matrix), **synth_metrics}
        out.pools = self._changed_pools()
        out.digest = digest(self._shared_state())
        return out

    def _task_row(self, step: int, tid: str, n: int) -> dict:
        st = self.detector.stats(tid)
        return {
            "step": step,
            "task_id": tid,
            "n": n,
            "mean": st.last_mean,
            "var": st.last_var,
            "smoothed_mean": st.mean,
            "smoothed_var": st.var,
            "region": st.region,
        }

    def _metrics(self, report: RolloutReport, matrix: dict[str, list[float]]) -> dict[str, float]:
        rewards = [r for _, rs in report.groups for r in rs]
        variances = [group_stats(rs)[1] for _, rs in report.groups]
        regions = [self.detector.region(t) for t in matrix]
        bcfg = self.detector.config
        return {
            "reward/mean": sum(rewards) / max(len(rewards), 1),
            "reward/std": math.sqrt(group_stats(rewards)[1]) if rewards else 0.0,
            "reward/accuracy": sum(report.accuracy) / max(len(report.accuracy), 1),
            "train/trajectories": float(len(rewards)),
            "train/tokens": float(report.model_tokens),
            "train/rank_token_spread": _spread(report.rank_tokens),
            "boundary/informative_share": sum(is_informative(v, bcfg) for v in variances) / max(len(variances), 1),
            **{f"boundary/{r}": float(regions.count(r)) for r in ("mastered", "boundary", "hard")},
            **{f"buffer/{p}": float(n) for p, n in self.pool_sizes().items()},
        }

    def pool_sizes(self) -> dict[str, int]:
        pools = self.source.pools()
        return {
            "seeds": sum(t in self.seed_ids for ids in pools.values() for t in ids),
            "staged": len(pools.get("staged", [])),
            "active": len(pools.get("active", [])),
            "retired": len(pools.get("retired", [])),
        }

    def pool_tasks(self) -> dict[str, list[TaskRecord]]:
        """The pools as the app shows them: every seed under "seeds" (dormant ones only there), and the
        staged, active and retired tasks."""
        pools = self.source.pools()
        out = {"seeds": [self.source.task(t) for ids in pools.values() for t in ids if t in self.seed_ids]}
        for name in ("staged", "active", "retired"):
            out[name] = [self.source.task(t) for t in pools.get(name, [])]
        return out

    def _changed_pools(self) -> dict[str, list[TaskRecord]] | None:
        """The pools as the app shows them when they changed since the last step, else None."""
        version = digest(self.source.pools())
        if version == self._pools_version:
            return None
        self._pools_version = version
        return self.pool_tasks()

    # ----- synthesis beside training ----------------------------------------------------------------
    def _synthesis(self, step: int) -> tuple[list[TaskRecord], list[dict], list[dict], dict[str, float]]:
        """Hand boundary parents to the worker while the budget has room; take back what is ready."""
        if not self.cfg.synthesizes:
            return [], [], [], {}
        n = self.cfg.synthesis.n_per_parent
        # admission control: ask only for what the buffer could still admit, counting what is in flight
        room = self.source.room() - sum(a.n for a in self._asked)
        k = min(self.cfg.synthesis.parents_per_step, max(0, math.ceil(room / n)))
        parents = self.source.boundary_tasks(k)  # every rank: keeps the buffer's RNGs in step
        accepted, rows, refused = [], [], 0
        fixed = self.cfg.synthesis.deterministic
        if self.worker is not None:
            # a fresh seed per step: the same boundary parent asked again yields new variants
            seed = derive_seed(self.cfg.synthesis.seed, "synth", step)
            for tid in parents:
                try:  # the leak guard at the synthesis door: variants of a test task would leak it
                    refuse_test_tasks([self.source.task(tid)], "synthesis parent", self.leak_reason)
                except TestSplitRefused:
                    refused += 1
                    continue
                # a repeatable run counts its own untaken jobs against the queue, never what happens to be done
                full = fixed and len(self._asked) >= self.cfg.synthesis.queue_size
                parent, known = self.source.task(tid), len(self.worker.handed_out)
                if not full and self.worker.submit(parent, n, seed=seed):
                    self._asked.append(Asked(tid, n, seed, step + self.cfg.synthesis.apply_after, known, parent))
                else:
                    refused += 1
            for result in self._results(step):
                self._forget_asked(result.parent_id)
                reject_heldout(result, self.heldout)
                mine = [
                    v.model_copy(update={"provenance": v.provenance.model_copy(update={"created_step": step})})
                    for v in result.accepted
                ]
                accepted += mine
                rows += [{"step": step, **row} for row in variant_rows_of(result, mine)]
        accepted = [self.task_type.model_validate(r) for r in self.ranks.share([v.to_record() for v in accepted])]
        samples = []
        for tid in parents:
            st = self.detector.stats(tid)
            samples.append(
                {"step": step, "task_id": tid, "mean": st.mean if st else None, "var": st.var if st else None}
            )
        metrics = {
            "synth/accepted": float(len(accepted)),
            "synth/rejected": float(sum(not r["accepted"] for r in rows)),
            "synth/queued": float(len(self._asked) if fixed else self.worker.in_flight if self.worker else 0),
            "synth/refused": float(refused),
        }
        return accepted, rows, samples, metrics

    def _results(self, step: int) -> list:
        """The worker's results this step takes: with synthesis.deterministic, exactly the jobs due by now, in
        the order asked (waiting for a late one); else whatever has finished."""
        if not self.cfg.synthesis.deterministic:
            return self.worker.drain()
        # a prefix: jobs fall due in the order they were asked; each is forgotten as its result is applied
        due = next((i for i, a in enumerate(self._asked) if a.due > step), len(self._asked))
        return self.worker.collect(due)

    def _forget_asked(self, parent_id: str) -> None:
        for i, a in enumerate(self._asked):
            if a.parent == parent_id:
                del self._asked[i]
                return

    # ----- researcher decisions, applied at step boundaries exactly once ---------------------------
    def _apply(self, d: Decision) -> tuple[bool, str]:
        """Verify and apply one decision; raising refuses it with the reason (`apply_decisions`)."""
        if d.payload and len(d.payload) > MAX_DECISION_PAYLOAD:
            return False, f"payload of {len(d.payload)} characters is over the {MAX_DECISION_PAYLOAD} limit"
        payload = d.payload_dict()
        task = None
        if d.action == "edit":
            task = parse_edit(self.benchmark, payload.get("task"))
            refuse_test_tasks([task], f"edit decision {d.id}", self.leak_reason)
            original = self.source.task(d.task_id)
            parent_id = original.provenance.parent_id
            parent = self.source.task(parent_id) if parent_id and parent_id in self.all_ids() else original
            ok, reason = verify_edit(
                self.benchmark, task, self.known_keys() - {original.content_key()}, parent, self.scratch
            )
            if not ok:
                return False, f"edit failed verification: {reason}"
        elif d.action == "reseed" and d.task_id in self.all_ids():
            refuse_test_tasks([self.source.task(d.task_id)], f"reseed decision {d.id}", self.leak_reason)
        decision = BufferDecision(action=d.action, task_id=d.task_id, task=task, mode=payload.get("mode"))
        return self.source.apply_decision(decision)

    def all_ids(self) -> set[str]:
        return {t for ids in self.source.pools().values() for t in ids}

    def known_keys(self) -> set[str]:
        return {self.source.task(t).content_key() for t in self.all_ids()}

    # ----- checkpoint ----------------------------------------------------------------------------
    def _shared_state(self) -> dict[str, Any]:
        """The state every rank holds alike (its digest is compared across ranks)."""
        return {"source": self.source.state_dict(), "trajectories": self.trajectories, "tokens": self.tokens}

    def state_dict(self) -> dict[str, Any]:
        """The shared state, and on the rank that synthesizes, the worker's: the variants it handed out and the
        jobs in flight with their parents, so a resumed run asks them again as they were first asked."""
        state = self._shared_state()
        if self.worker is not None:
            state["synthesis"] = {
                "handed_out": list(self.worker.handed_out),
                "asked": [{**asdict(a), "task": a.task.to_record()} for a in self._asked],
            }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.source.load_state_dict(state["source"])
        self.trajectories = int(state["trajectories"])
        # a checkpoint may hold no token counts: they start empty
        self.tokens = {str(k): float(v) for k, v in state.get("tokens", {}).items()}
        synthesis = state.get("synthesis")  # absent from a checkpoint written before the worker's state was kept
        if self.worker is None or synthesis is None:
            return
        self.worker.restore(synthesis["handed_out"])
        for job in synthesis["asked"]:
            asked = Asked(**{**job, "task": self.task_type.model_validate(job["task"])})
            if self.worker.submit(asked.task, asked.n, seed=asked.seed, known=asked.known):
                self._asked.append(asked)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close(wait=False)


def apply_decisions(decisions: list[Decision], apply) -> list[DecisionOutcome]:
    """Apply each decision with `apply(decision) -> (applied?, reason)`, in order; any exception refuses
    the decision with the error as its reason, so no decision can stop a run. Reasons are bounded."""
    outcomes = []
    for d in decisions:
        try:
            ok, reason = apply(d)
        except Exception as e:  # noqa: BLE001 - a bad decision must not stop training; the researcher sees why
            ok, reason = False, f"{type(e).__name__}: {e}"
        outcomes.append(
            DecisionOutcome(d.id, d.task_id, d.action, "applied" if ok else "refused", str(reason)[:MAX_REASON])
        )
    return outcomes


def reject_heldout(result, keys: dict[str, str]) -> int:
    """Reject, in place, each accepted variant of a synthesis result that equals a held-out task by content
    (its last stage becomes a rejection naming the set); returns how many."""
    hits = 0
    for attempt in result.attempts:
        name = keys.get(attempt.variant.content_key()) if attempt.variant is not None else None
        if name is not None:
            attempt.variant = None
            attempt.outcomes[-1] = StageOutcome("augment", False, f"{HELDOUT_REASON} {name}")
            hits += 1
    return hits


def _spread(per_rank: list[int]) -> float:
    """(max - min) / mean of the processes' generated tokens: 0 when balanced or with one process."""
    if len(per_rank) < 2 or not sum(per_rank):
        return 0.0
    return (max(per_rank) - min(per_rank)) / (sum(per_rank) / len(per_rank))


def _rollout_rows(step: int, report: RolloutReport) -> list[dict]:
    rows, k = [], 0
    for tid, rewards in report.groups:
        for i, r in enumerate(rewards):
            rows.append(
                {
                    "step": step,
                    "task_id": tid,
                    "sample": i,
                    "reward": r,
                    "accuracy": float(report.accuracy[k]),
                    "n_calls": int(report.n_calls[k]),
                }
            )
            k += 1
    return rows


def _move_row(m) -> dict:
    return {
        "step": m.step,
        "task_id": m.task_id,
        "from_pool": m.from_pool,
        "to_pool": m.to_pool,
        "reason": m.reason,
        "detail": m.detail,
    }


def variant_rows_of(result, accepted: list[TaskRecord]) -> list[dict]:
    """One `variant` event per candidate: the stage outcomes of each attempt, in order."""
    rows, ok = [], iter(accepted)
    for attempt in result.attempts:
        variant = next(ok) if attempt.variant is not None else None
        rows.append(
            {
                "variant_id": variant.id if variant else f"{result.parent_id}_rejected{len(rows)}",
                "parent_id": result.parent_id,
                "accepted": variant is not None,
                "stages": [o.to_dict() for o in attempt.outcomes],
                "reason": "accepted" if variant else f"{attempt.stage}: {attempt.reason}",
                "task": variant.to_record() if variant else None,
                "distance": attempt.distance,
            }
        )
    return rows

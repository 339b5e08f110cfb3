"""A run from a config: model → seeds → task source → TRL GRPO → (boundary → buffer → synthesis) → store.

Order of one generation step (DESIGN.md "data flow"): the source draws the batch; TRL's trainer plays
the episodes and computes the rewards; `RunLoop.on_rewards` gets the task x G matrix and feeds the
detector and the buffer (no new generation, no environment call), queues boundary tasks for synthesis
(which runs in worker threads beside training and is collected when ready), applies researcher
decisions from the control database, and appends every event to the run's log. The trainer process
is the only writer of its run folder.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

from rods_core.boundary import group_stats
from rods_core.buffer import Decision as BufferDecision
from rods_core.config import RunConfig
from rods_core.seeds import load_seeds
from rods_core.sources import build_source
from rods_core.tasks import Task, read_tasks

STATE_FILE = "rods_state.json"


# ----- seeds, eval tasks, the model -------------------------------------------------------------------
def select_seeds(cfg: RunConfig) -> list[Task]:
    s = cfg.seeds
    if s.subset == "demo":
        from rods_core.policy.demo import demo_seeds

        tasks = demo_seeds()
    elif s.subset == "file":
        tasks = read_tasks(s.file)
    else:
        tasks = load_seeds("train")
    tasks = [t for t in tasks if t.category in s.categories]
    if s.limit:
        tasks = tasks[: s.limit]
    if not tasks:
        raise ValueError("seeds: the selection is empty; widen seeds.categories or seeds.limit")
    return tasks


def fresh_variants(parents: list[Task], per_parent: int, cfg: RunConfig, seed: int) -> list[Task]:
    """Verified variants of the parents, never of test-split tasks (the leak guard refuses those)."""
    from rods_core.synth.pipeline import synthesize

    synth_cfg = cfg.synth.model_copy(update={"seed": seed})
    out: list[Task] = []
    keys = {p.content_key() for p in parents}
    for p in parents:
        result = synthesize(p, per_parent, keys, synth_cfg)
        out += result.accepted
        keys |= {v.content_key() for v in result.accepted}
    return out


def eval_tasks(cfg: RunConfig, seeds: list[Task], trained_on: set[str] = frozenset()) -> list[Task]:
    """Held-out tasks; with split=variants, fresh variants of the seeds that the warm start never saw."""
    e = cfg.eval
    if e.split == "variants":
        tasks = fresh_variants(seeds, e.variants_per_seed, cfg, seed=cfg.seed + 10_007)
        tasks = [t for t in tasks if t.id not in trained_on]  # variant ids are content hashes
    else:
        tasks = seeds if e.split == "train" else load_seeds("test")
    tasks = [t for t in tasks if t.category in e.categories]
    return tasks[: e.limit] if e.limit else tasks


def ensure_model(cfg: RunConfig, log=print) -> Path:
    """The policy folder; builds the tiny model and warm-starts it when allowed and missing."""
    path = Path(cfg.model.path)
    if (path / "config.json").exists():
        return path
    if not cfg.model.build_if_missing:
        raise FileNotFoundError(
            f"model.path {path} holds no model; point it at a local model folder, run `rods model init-tiny` "
            "and `rods sft`, or set model.build_if_missing: true"
        )
    from rods_core.policy.demo import demo_seeds
    from rods_core.policy.sft import run_sft
    from rods_core.policy.tiny import init_tiny

    raw = path.with_name(path.name + "-init")
    log(f"building the tiny model in {raw} …")
    init_tiny(cfg.model.tiny, raw)
    seeds = demo_seeds()
    variants = (
        fresh_variants(seeds, cfg.model.sft_variants_per_seed, cfg, seed=cfg.seed + 1)
        if cfg.model.sft_variants_per_seed
        else []
    )
    log(
        f"warm-starting on {len(seeds)} demo seeds + {len(variants)} variants (stops at loss {cfg.model.sft.loss_target}) …"
    )
    figures = run_sft(raw, path, seeds + variants, cfg.model.sft)
    log(f"warm start done: {json.dumps({k: v for k, v in figures.items() if k != 'sft/loss_curve'})}")
    return path


# ----- the run ----------------------------------------------------------------------------------------
def new_run_id(cfg: RunConfig) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{cfg.name}-{random.Random().randrange(16**4):04x}"


def last_checkpoint(run_dir: Path) -> Path | None:
    ckpts = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    ckpts = [c for c in ckpts if (c / STATE_FILE).exists()]
    return ckpts[-1] if ckpts else None


class _NullLog:
    """The event log of a non-main process: every rank keeps the same buffer, only rank 0 writes."""

    def append(self, kind, rows) -> int:
        return 0

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def truncate_after(self, step: int) -> int:
        return 0


def _broadcast(obj):
    from accelerate.utils import broadcast_object_list

    return broadcast_object_list([obj])[0]


class RunLoop:
    """Everything around TRL's step: source, detector, synthesis, decisions, the event log.

    With several processes (accelerate launch) every rank runs this loop on the same gathered matrix;
    what comes from outside the process (decisions, synthesized variants) is read on rank 0 and
    broadcast, so every rank's buffer makes the same moves. Only rank 0 writes the store.
    """

    def __init__(self, cfg: RunConfig, run_dir: Path, run_id: str, seeds: list[Task]):
        from accelerate import PartialState

        from storage.control import ControlDB
        from storage.events import EventLog

        state = PartialState()
        self.main = state.is_main_process
        self.share = _broadcast if state.num_processes > 1 else (lambda obj: obj)
        self.cfg, self.run_dir, self.run_id = cfg, run_dir, run_id
        self.source = build_source(cfg.method, seeds, cfg.boundary, cfg.buffer)
        self.detector = self.source.detector
        self.seed_ids = {t.id for t in seeds}
        self.events = EventLog(run_dir) if self.main else _NullLog()
        self.db = ControlDB(Path(cfg.workspace) / "control.duckdb") if self.main else None
        self.worker = None
        if cfg.synthesizes and self.main:
            from rods_core.synth.pipeline import SynthWorker

            self.worker = SynthWorker(cfg.synth, pool_keys={t.content_key() for t in seeds})
        self.trajectories = 0
        self.pending: dict[str, float] = {}
        self.pending_synth: dict[str, float] = {}
        self.stop_requested = False
        self._pools_version = None

    # -- the hook TRL calls once per generation step, on every rank --------------------------------
    def draw(self, n: int) -> list[str]:
        return self.source.sample(n)

    def on_rewards(self, step: int, groups: list[tuple[str, list[float]]], extras: dict[str, list]) -> None:
        t0 = time.perf_counter()
        matrix: dict[str, list[float]] = {}
        for tid, rewards in groups:
            matrix.setdefault(tid, []).extend(rewards)
        moves = self._decisions(step)  # decisions taken since the last step apply before the new matrix
        before = {t: self.detector.region(t) for t in matrix}
        moves += self.source.observe(step, matrix)
        t_detect = time.perf_counter() - t0
        n_traj = sum(len(r) for r in matrix.values())
        self.trajectories += n_traj
        rows = []
        for tid in matrix:
            st = self.detector.stats(tid)
            rows.append(
                {
                    "step": step,
                    "task_id": tid,
                    "n": len(matrix[tid]),
                    "mean": st.last_mean,
                    "var": st.last_var,
                    "smoothed_mean": st.mean,
                    "smoothed_var": st.var,
                    "region": st.region,
                }
            )
        self.events.append("task_stats", rows)
        g = self.cfg.grpo.num_generations
        self.events.append(
            "rollouts",
            [
                {
                    "step": step,
                    "task_id": tid,
                    "sample": i % g,
                    "reward": r,
                    "accuracy": float(extras["accuracy"][k * g + i % g]),
                    "n_calls": int(extras["n_calls"][k * g + i % g]),
                }
                for k, (tid, rs) in enumerate(groups)
                for i, r in enumerate(rs)
            ],
        )
        self.events.append(
            "region_change",
            [
                {"step": step, "task_id": t, "old": before[t] or "new", "new": self.detector.region(t)}
                for t in matrix
                if before[t] != self.detector.region(t)
            ],
        )
        moves += self._synthesis(step)
        self._log_moves(moves)
        variances = [group_stats(r)[1] for _, r in groups]
        regions = [self.detector.region(t) for t in matrix]
        pools = self.pool_sizes()
        self.pending = {
            "reward/mean": sum(sum(r) for r in matrix.values()) / max(n_traj, 1),
            "reward/accuracy": sum(extras["accuracy"]) / max(len(extras["accuracy"]), 1),
            "train/trajectories": float(n_traj),
            "boundary/informative_share": sum(v > 0 for v in variances) / max(len(variances), 1),
            **{f"boundary/{r}": float(regions.count(r)) for r in ("mastered", "boundary", "hard")},
            **{f"buffer/{p}": float(n) for p, n in pools.items()},
            "time/detect_s": t_detect,
        }
        self._write_pools(step)
        self.pending["time/store_s"] = time.perf_counter() - t0 - t_detect

    def pool_sizes(self) -> dict[str, int]:
        pools = self.source.pools()
        seeds = [t for ids in pools.values() for t in ids if t in self.seed_ids]
        return {
            "seeds": len(seeds),
            "staged": len(pools.get("staged", [])),
            "active": len(pools.get("active", [])),
            "retired": len(pools.get("retired", [])),
        }

    # -- synthesis beside training -----------------------------------------------------------------
    def _synthesis(self, step: int) -> list:
        if not self.cfg.synthesizes:
            return []
        k = self.cfg.synthesis.parents_per_step
        parents = self.source.boundary_tasks(k) + self._reseed_requests()  # every rank: keeps RNGs in step
        accepted, variant_rows = [], []
        if self.worker is not None:
            # a fresh synthesis seed per step: the same boundary parent asked again yields new variants,
            # not the duplicates of last step's (which the critic would reject)
            self.worker.cfg = self.cfg.synth.model_copy(update={"seed": self.cfg.synth.seed * 1_000_003 + step})
            for tid in parents:
                self.worker.submit(self.source.task(tid), self.cfg.synthesis.variants_per_parent)
            for result in self.worker.drain():
                mine = [
                    v.model_copy(update={"provenance": v.provenance.model_copy(update={"created_step": step})})
                    for v in result.accepted
                ]
                accepted += mine
                variant_rows += [{"step": step, **row} for row in variant_rows_of(result, mine)]
        accepted = [Task.model_validate(r) for r in self.share([v.to_record() for v in accepted])]
        samples = []
        for tid in parents:
            st = self.detector.stats(tid)
            samples.append(
                {"step": step, "task_id": tid, "mean": st.mean if st else None, "var": st.var if st else None}
            )
        self.events.append("boundary_sample", samples)
        self.events.append("variant", variant_rows)
        self.pending_synth = {
            "synth/accepted": float(len(accepted)),
            "synth/rejected": float(sum(not r["accepted"] for r in variant_rows)),
            "synth/queued": float(self.worker.in_flight if self.worker else 0),
        }
        return self.source.offer(accepted, step) if accepted else []

    def _reseed_requests(self) -> list[str]:
        requests = getattr(self.source, "synthesis_requests", None)
        if not requests:
            return []
        out, requests[:] = list(requests), []
        return out

    # -- researcher decisions, applied at step boundaries exactly once ---------------------------
    def _decisions(self, step: int) -> list:
        claimed = (
            [(d.id, d.action, d.task_id, d.payload_dict()) for d in self.db.claim_decisions(self.run_id)]
            if self.main
            else []
        )
        rows = []
        for did, action, task_id, payload in self.share(claimed):
            applied, reason = self._apply(action, task_id, payload)
            outcome = "applied" if applied else "refused"
            if self.main:
                self.db.mark_decision(did, outcome, reason, step)
            rows.append({"step": step, "decision_id": did, "outcome": outcome, "reason": reason})
        self.events.append("decision_applied", rows)
        return []

    def _apply(self, action: str, task_id: str, payload: dict) -> tuple[bool, str]:
        task = None
        if action == "edit":
            from rods_core.synth.verify import verify_task

            try:
                task = Task.model_validate(payload.get("task"))
                original = self.source.task(task_id)
            except Exception as e:  # noqa: BLE001 - a bad edit is refused with its reason, never raised
                return False, f"edited task is invalid: {e}"
            parent_id = original.provenance.parent_id
            parent = self.source.task(parent_id) if parent_id and parent_id in self.all_ids() else original
            others = self.known_keys() - {original.content_key()}
            ok, reason = verify_task(task, parent, others)
            if not ok:
                return False, f"edit failed verification: {reason}"
        try:
            decision = BufferDecision(action=action, task_id=task_id, task=task, mode=payload.get("mode"))
        except Exception as e:  # noqa: BLE001
            return False, f"malformed decision: {e}"
        return self.source.apply_decision(decision)

    def all_ids(self) -> set[str]:
        return {t for ids in self.source.pools().values() for t in ids}

    def known_keys(self) -> set[str]:
        return {self.source.task(t).content_key() for t in self.all_ids()}

    # -- events and state ---------------------------------------------------------------------------
    def _log_moves(self, moves: list) -> None:
        self.events.append(
            "buffer",
            [
                {
                    "step": m.step,
                    "task_id": m.task_id,
                    "from_pool": m.from_pool,
                    "to_pool": m.to_pool,
                    "reason": m.reason + (f": {m.detail}" if getattr(m, "detail", "") else ""),
                }
                for m in moves
            ],
        )

    def _write_pools(self, step: int) -> None:
        from storage.pools import write_pools_snapshot

        if not self.main:
            return
        pools = self.source.pools()
        version = json.dumps(pools, sort_keys=True)
        if version == self._pools_version:
            return
        self._pools_version = version
        by_pool = {"seeds": [self.source.task(t) for ids in pools.values() for t in ids if t in self.seed_ids]}
        for name in ("staged", "active", "retired"):  # dormant seeds appear under "seeds" only
            by_pool[name] = [self.source.task(t) for t in pools.get(name, [])]
        write_pools_snapshot(self.run_dir, by_pool, step)

    def on_log(self, step: int, logs: dict[str, Any], timings: dict[str, float], wall_s: float) -> None:
        names = {
            "loss": "train/loss",
            "kl": "train/kl",
            "grad_norm": "train/grad_norm",
            "learning_rate": "train/learning_rate",
            "reward_std": "reward/std",
        }
        row = {"step": step, "wall_s": wall_s, **self.pending, **self.pending_synth, **timings}
        row.update({new: float(logs[old]) for old, new in names.items() if old in logs})
        self.events.append("step", row)
        self.events.flush()
        if self.main:
            self.db.heartbeat(self.run_id, step)

    def state_dict(self) -> dict:
        return {"source": self.source.state_dict(), "trajectories": self.trajectories}

    def load_state_dict(self, state: dict) -> None:
        self.source.load_state_dict(state["source"])
        self.trajectories = int(state["trajectories"])

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
        self.events.flush()
        self.events.close()


def variant_rows_of(result, accepted: list[Task]) -> list[dict]:
    """One `variant` event per candidate: the stage outcomes of each attempt, in order.

    A result's outcomes are a flat list; each attempt is a run of passed stages that ends in a rejection
    or in a passed `augment` (an accepted variant, matched to `accepted` in order).
    """
    rows, attempt, ok = [], [], iter(accepted)
    for o in result.outcomes:
        attempt.append(o.to_dict())
        if o.accepted and o.stage != "augment":
            continue
        variant = next(ok, None) if o.accepted else None
        rows.append(
            {
                "variant_id": variant.id if variant else f"{result.parent_id}~rejected{len(rows)}",
                "parent_id": result.parent_id,
                "accepted": variant is not None,
                "stages": attempt,
                "reason": "accepted" if variant else f"{o.stage}: {o.reason}",
                "task": variant.to_record() if variant else None,
            }
        )
        attempt = []
    return rows


def install_stop_handler(loop: RunLoop) -> None:
    """SIGTERM (the app's Stop button) ends the run at the next step boundary, after a checkpoint."""

    def _stop(signum, frame):
        loop.stop_requested = True

    signal.signal(signal.SIGTERM, _stop)


def run_dir_for(cfg: RunConfig, run_id: str) -> Path:
    return Path(cfg.output_dir) / run_id


# ----- the driver -------------------------------------------------------------------------------------
def _record_eval(loop: RunLoop, step: int, result: dict, split: str) -> None:
    per_cat = {k.split("/", 2)[2]: v for k, v in result.items() if k.startswith("eval/progress/")}
    loop.events.append(
        "eval",
        {
            "step": step,
            "split": split,
            "accuracy": result["eval/accuracy"],
            "progress": result["eval/progress"],
            "per_category": per_cat,
            "trajectories": loop.trajectories,
        },
    )
    loop.events.flush()


def train(cfg: RunConfig, *, run_id: str | None = None, resume: bool = False, log=print) -> Path:
    """Run (or resume) one training run; returns its folder. The only writer of that folder."""
    import torch

    from rods_core.config import dump_config
    from rods_core.evaluation import EvalConfig, evaluate
    from rods_core.policy.tiny import load_policy, read_card, write_card
    from rods_core.trainer import LoopCallback, RodsGRPOTrainer

    torch.manual_seed(cfg.seed)
    seeds = select_seeds(cfg)
    model_dir = ensure_model(cfg, log)
    run_id = run_id or new_run_id(cfg)
    run_dir = run_dir_for(cfg, run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume and os.environ.get("RANK", "0") == "0":
        (run_dir / "config.yaml").write_text(dump_config(cfg))
    loop = RunLoop(cfg, run_dir, run_id, seeds)
    if loop.main:
        if loop.db.get_run(run_id) is None:
            loop.db.create_run(run_id, run_dir, cfg.model_dump(mode="json"), cfg.method, name=cfg.name)
        loop.db.register_process(run_id)
        loop.db.update_run(run_id, status="running")
    ckpt = last_checkpoint(run_dir) if resume else None
    if resume and ckpt is None:
        log(f"no complete checkpoint in {run_dir}; starting from step 0")
    if ckpt is not None:
        state = json.loads((ckpt / STATE_FILE).read_text())
        loop.load_state_dict(state)
        loop.events.truncate_after(state["step"])  # events past the checkpoint are replayed by the resumed run
        if loop.main:
            loop.db.reopen_decisions_after(run_id, state["step"])
        log(f"resuming {run_id} from {ckpt.name}")

    model, tokenizer, card_prompt = load_policy(model_dir)
    # a tiny model is trained on its card's chat format; any other model uses the config's
    prompt = card_prompt if read_card(model_dir) else cfg.episode.prompt
    episode_cfg = cfg.episode.model_copy(
        update={"prompt": prompt, "hints": cfg.episode.hints or cfg.method == "env_augment"}
    )
    sft_ids = {tid for stage in read_card(model_dir).get("stages", []) for tid in stage.get("task_ids", [])}
    held_out = eval_tasks(cfg, seeds, sft_ids)
    greedy = EvalConfig(
        episode=episode_cfg.model_copy(
            update={"sampling": episode_cfg.sampling.model_copy(update={"temperature": 0.0}), "hints": False}
        )
    )

    def run_eval(step: int) -> None:
        if not held_out:
            return
        was_training = model.training
        model.eval()
        with torch.no_grad():
            result = evaluate((trainer.accelerator.unwrap_model(trainer.model), tokenizer), held_out, greedy)
        model.train(was_training)
        _record_eval(loop, step, result, cfg.eval.split)
        log(
            f"step {step}: eval {cfg.eval.split} progress {result['eval/progress']:.3f} accuracy {result['eval/accuracy']:.3f}"
        )

    callback = LoopCallback(loop, run_eval, cfg.eval.every, STATE_FILE)
    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(run_dir / "checkpoints"),
        draw=loop.draw,
        task_of=loop.source.task,
        on_rewards=loop.on_rewards,
        episode_cfg=episode_cfg,
        callbacks=[callback],
    )
    callback.trainer = trainer
    install_stop_handler(loop)
    status = "failed"
    try:
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        if loop.stop_requested:
            status = "stopped"
        else:
            run_eval(trainer.state.global_step)
            final = run_dir / "final"
            trainer.save_model(str(final))
            if loop.main:
                tokenizer.save_pretrained(str(final))
                write_card(final, {**read_card(model_dir), "trained_by": run_id})
            status = "finished"
    finally:
        loop.close()
        if loop.main:
            loop.db.update_run(run_id, status=status)
    return run_dir

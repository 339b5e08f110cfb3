"""A run from a config; one training step reads top to bottom.

One step: the RODS step draws the batch and the episodes are played (trainer.RodsGRPOTrainer's rollout
function → rollout.py, rewards from benchmarks/bfcl/checker.py); rank 0 claims the researcher's pending decisions
(`StepCallback.rollout_done`) → TRL computes advantages and updates the policy → `StepCallback.on_step_end`:
the decisions shared to every rank, the RODS hooks (step.py: detector → buffer → synthesis → decisions),
the outcome recorded → `on_log`: the step's row, with TRL's loss → `on_save`: the RODS state beside TRL's
checkpoint (checkpoint.py). Every process of a multi-process run (accelerate) runs the same path on the
same gathered reward matrix; only rank 0 records (a `RunRecorder` its caller opens; recording.py).
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.scratch import run_scratch
from rods_core.benchmarks.task_files import TaskFileError
from rods_core.build import ensure_model
from rods_core.checkpoint import checkpoint_dir, last_checkpoint, load_state, save_state
from rods_core.config import RunConfig, dump_config
from rods_core.config.inputs import DoorError
from rods_core.evaluation import EvalConfig, evaluate_sharded
from rods_core.ids import new_run_id
from rods_core.policy.model_folders import check_model_dir, model_folder
from rods_core.policy.precision import model_init_kwargs
from rods_core.policy.tiny import load_policy, read_card, write_card
from rods_core.policy.weights import whole_weights
from rods_core.ranks import Ranks, launch_refusal
from rods_core.recording import Decision, NullRecorder, OpenRecorder, RunRecorder
from rods_core.rollout import episode_benchmark
from rods_core.step import RodsStep, StepOutcome
from rods_core.tasksets import TaskSetError, eval_tasks, run_benchmark, select_seeds
from rods_core.threads import apply_thread_policy
from rods_core.tracking import StepTracker, tracker_environment
from rods_core.trainer import RodsGRPOTrainer, RolloutReport

# TRL's logged names -> ours (storage/schema.py lists every step metric)
TRL_METRICS = {
    "loss": "train/loss",
    "kl": "train/kl",
    "grad_norm": "train/grad_norm",
    "learning_rate": "train/learning_rate",
    # logged by TRL only when vLLM generates (its importance-sampling correction): kept under TRL's own names
    **{
        name: name
        for name in (
            "sampling/importance_sampling_ratio/min",
            "sampling/importance_sampling_ratio/mean",
            "sampling/importance_sampling_ratio/max",
            "sampling/sampling_logp_difference/mean",
            "sampling/sampling_logp_difference/max",
        )
    },
}


def step_row(step: int, outcome: StepOutcome, timings: dict[str, float], trl_logs: dict[str, Any]) -> dict:
    """The one place a step's row is assembled: the RODS step's metrics, measured timings, TRL's metrics."""
    row = {"step": step, "wall_s": timings["time/step_s"], **outcome.metrics, **timings}
    row.update({ours: float(trl_logs[theirs]) for theirs, ours in TRL_METRICS.items() if theirs in trl_logs})
    # TRL logs "kl" only when beta > 0; with no reference model the KL term is exactly 0.
    row.setdefault("train/kl", 0.0)
    return row


def step_line(row: dict, max_steps: int) -> str:
    """The one line a step prints: progress, signal, pools and where the time went."""
    t = {k: row.get(f"time/{k}_s", 0.0) for k in ("step", "gen", "update", "curriculum")}
    return (
        f"step {row['step']}/{max_steps}: reward {row['reward/mean']:.3f} informative "
        f"{row['boundary/informative_share']:.2f} active {row['buffer/active']:.0f} staged "
        f"{row['buffer/staged']:.0f} | {t['step']:.1f} s (gen {t['gen']:.1f}, update {t['update']:.1f}, "
        f"rods {t['curriculum']:.2f})"
    )


class RunSetupError(ValueError):
    """The run cannot start (seeds, model folder, resume target); nothing was created."""


def _fault(moment: str, step: int) -> None:
    """Fault injection for the resume tests: RODS_FAULT=<moment>:<step> SIGKILLs this process there
    (moments: step_end — after the RODS step, before the step's row; save — after TRL wrote the
    checkpoint, before the RODS state). Unset in every real run."""
    if os.environ.get("RODS_FAULT") == f"{moment}:{step}":
        os.kill(os.getpid(), signal.SIGKILL)


class StepWatcher:
    """Instrumentation (benchmarks): `before_step()` runs before a step's clock starts; `after_step(row,
    drawn)` after its row is written, with the row and the tasks drawn for it, in draw order; `trainer_ready`
    once the trainer exists."""

    def before_step(self) -> None: ...

    def after_step(self, row: dict, drawn: list) -> None: ...

    def trainer_ready(self, trainer) -> None:
        """Called once, when the run's trainer is built (a check may read the trainer's state after the run)."""


@dataclass
class StepInFlight:
    """One step's parts as TRL's hooks hand them over. TRL delivers a step in separate hooks (rollout, update,
    step end, then the log that carries its loss), so what one hook learns waits here for a later one;
    `on_step_begin` starts it and `on_log` consumes it."""

    clock: dict[str, float]
    report: RolloutReport | None = None
    claimed: list[Decision] = field(default_factory=list)  # rank 0's claim; empty on the other ranks
    outcome: StepOutcome | None = None
    timings: dict[str, float] = field(default_factory=dict)


class StepCallback(TrainerCallback):
    """Connects TRL's step cycle to the RODS step and the recorder: one step's path, in call order."""

    def __init__(
        self,
        rods: RodsStep,
        recorder: RunRecorder,
        evaluate,
        eval_every: int,
        ranks: Ranks,
        tracker: StepTracker,
        watcher: StepWatcher | None = None,
        log=print,
    ):
        self.log = log if ranks.main else (lambda *_: None)
        self.rods, self.recorder, self.ranks, self.tracker = rods, recorder, ranks, tracker
        self.evaluate, self.eval_every = evaluate, eval_every
        self.watcher = watcher or StepWatcher()
        self.stop_requested = False
        self._step: StepInFlight | None = None

    # -- wired into the trainer at construction: the rollout hands its report over ------------------
    def rollout_done(self, report: RolloutReport) -> None:
        self._step.report = report
        self._step.clock["rollout_end"] = time.perf_counter()
        # claimed before the update (seconds), so a decision made meanwhile is applied at this step's end
        self._step.claimed = self.recorder.claim_decisions()

    # -- TRL's cycle -------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kw):
        self.tracker.start()  # after TRL's integration callbacks opened the trackers' runs
        if state.global_step == 0:
            self.evaluate(model, 0, kw.get("optimizer"))

    def on_step_begin(self, args, state, control, **kw):
        self.watcher.before_step()
        self._step = StepInFlight(clock={"begin": time.perf_counter()})

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self._step.clock["pre_opt"] = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kw):
        self._step.clock["post_opt"] = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        step, flight = state.global_step, self._step
        report, clock = flight.report, flight.clock
        t0 = time.perf_counter()
        outcome = self.rods.after_step(step, report, self.ranks.share(flight.claimed))
        t1 = time.perf_counter()
        digests = self.ranks.gather([(self.ranks.rank, outcome.digest)])
        outcome.events["state_digest"] = [{"step": step, "rank": r, "digest": d} for r, d in digests]
        self.recorder.record_outcomes(step, outcome.decisions)
        self.recorder.write(outcome.events)
        if outcome.pools is not None:
            self.recorder.write_pools(step, outcome.pools)
        t2 = time.perf_counter()
        _fault("step_end", step)
        flight.outcome = outcome
        flight.timings = {
            **report.timings,
            "time/update_s": clock["pre_opt"] - clock["rollout_end"],
            "time/optimizer_s": clock["post_opt"] - clock["pre_opt"],
            "time/curriculum_s": t1 - t0,
            "time/store_s": t2 - t1,
            "time/step_s": t2 - clock["begin"],
        }
        # every rank stops at the same step: rank 0's request (SIGTERM to it, or the app's Stop) decides
        if self.ranks.share(self.stop_requested):
            control.should_save = True
            control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, model=None, **kw):
        flight = self._step
        if not logs or "loss" not in logs or flight is None or flight.outcome is None:
            return
        self._step = None
        step = state.global_step
        row = step_row(step, flight.outcome, flight.timings, logs)
        self.recorder.write({"step": [row]})
        self.recorder.flush()
        self.tracker.log(row, step, logged_by_trl={f"train/{k}" for k in logs})
        self.recorder.heartbeat(step)
        self.watcher.after_step(row, [self.rods.task(tid) for tid, _ in flight.report.groups])
        self.log(step_line(row, state.max_steps))
        # evaluation runs after the step's row is written, so it never counts as step time
        if self.eval_every and step % self.eval_every == 0 and step < state.max_steps:
            self.evaluate(model, step, kw.get("optimizer"))

    def on_save(self, args, state, control, **kw):
        if not self.ranks.main:
            return
        ckpt = checkpoint_dir(Path(args.output_dir).parent, state.global_step)
        _fault("save", state.global_step)
        save_state(ckpt, state.global_step, self.rods.state_dict())
        self.recorder.write({"checkpoint": [{"step": state.global_step, "path": str(ckpt)}]})
        self.recorder.flush()


def install_stop_handler(callback: StepCallback) -> None:
    """SIGTERM (the app's Stop button) ends the run at the next step boundary, after a checkpoint."""

    def _stop(signum, frame):
        callback.stop_requested = True

    signal.signal(signal.SIGTERM, _stop)


def train(
    cfg: RunConfig,
    *,
    open_recorder: OpenRecorder,
    run_id: str | None = None,
    resume: bool = False,
    log=print,
    watcher: StepWatcher | None = None,
    build_delegate: Callable[[RunConfig, Path], Callable[[], None] | None] | None = None,
    benchmark: Benchmark | None = None,
) -> Path:
    """Run (or resume) one training run; returns its folder. Its processes are the only writers of it.

    The benchmark (`cfg.benchmark`, or `benchmark` given by the caller: any Benchmark) gives the seeds, the
    held-out tasks, the leak guard and synthesizer of the RODS step, and the environments of every episode.

    `build_delegate(cfg, run_dir)`, for a one-process run, may return a builder that makes a missing model in
    processes of its own (build.ensure_model's `delegate`); None builds it in this run's processes.

    The path of a run, in order: inputs checked (nothing created on bad input) -> run folder and its
    recorder (`open_recorder`, rank 0) -> model built if missing -> RODS state restored -> policy loaded ->
    TRL's GRPO trains, each step through StepCallback -> held-out evaluation and the final model. The
    recorder is opened here, not by the caller, because the run's id and folder are settled only once the
    inputs are checked and every rank agrees on them.
    """
    import torch

    apply_thread_policy(cfg.compute.threads)
    torch.manual_seed(cfg.seed)
    ranks = Ranks.for_run(cfg.grpo)
    run_id, run_dir, tasks_bench, seeds = check_run_inputs(cfg, run_id, resume, ranks, benchmark)
    scratch = run_scratch(run_dir)  # episodes and verifications write here: removed with the run folder
    recorder = open_run(cfg, run_dir, run_id, resume, ranks, open_recorder)
    rods = RodsStep(cfg, seeds, ranks, tasks_bench, scratch)
    tracker_environment(cfg.report, run_dir)
    tracker = StepTracker(cfg.report, run_dir, cfg.model_dump(mode="json"), main=ranks.main)
    status = "failed"
    try:
        delegate = build_delegate(cfg, run_dir) if build_delegate is not None and ranks.world == 1 else None
        model_dir = ensure_model(
            cfg, log, ranks=ranks, run_id=run_id, progress=recorder.build_progress, delegate=delegate
        )
        ckpt = restore(run_dir, run_id, recorder, rods, log) if resume else None
        policy = Policy.load(cfg, model_dir)
        # the episodes' benchmark speaks the policy's chat format (a tiny model's card may set it)
        episodes_bench = benchmark or episode_benchmark(policy.episode, cfg.benchmark, options=cfg.benchmark_options)
        # the evaluation plays through the trainer built below (its vLLM engine, or its whole weights): the
        # closure reads `trainer` when an evaluation starts, which is after the trainer exists
        evaluate = HeldOutEval(
            cfg, policy, seeds, recorder, rods, ranks, log, tasks_bench, benchmark,
            generation=lambda: trainer.evaluation_generator(), scratch=scratch,
        )  # fmt: skip
        callback = StepCallback(rods, recorder, evaluate, cfg.eval.every, ranks, tracker, watcher, log)
        trainer = RodsGRPOTrainer(
            model=policy.model, tokenizer=policy.tokenizer, cfg=cfg, out_dir=str(run_dir / "checkpoints"),
            draw=rods.draw, task_of=rods.task, cost_of=rods.expected_tokens, on_rollout=callback.rollout_done,
            episode_cfg=policy.episode, callbacks=[callback], run_name=run_id, ranks=ranks,
            benchmark=episodes_bench, scratch=scratch, record_dir=run_dir if cfg.report.batch_record else None,
        )  # fmt: skip
        install_stop_handler(callback)
        if watcher is not None:
            watcher.trainer_ready(trainer)
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        if ranks.share(callback.stop_requested):
            status = "stopped"
        else:
            with recorder.working():  # the final evaluation and save report no step
                evaluate(trainer.model, trainer.state.global_step, trainer.optimizer)
                policy.save_final(trainer, run_dir / "final", run_id, ranks)
            status = "finished"
    finally:
        tracker.close()
        rods.close()
        recorder.close(status)
    if status != "failed":  # after an exception the other ranks may never reach the barrier
        ranks.close()
    return run_dir


# ----- the stages of train(), in call order -------------------------------------------------------------
def check_run_inputs(
    cfg: RunConfig, run_id: str | None, resume: bool, ranks: Ranks, benchmark: Benchmark | None
) -> tuple[str, Path, Benchmark, list]:
    """(run id, run folder, the run's benchmark, seed tasks); everything that can fail on bad input fails here,
    before anything is created. Every rank uses rank 0's run id (a generated id differs per process). The
    benchmark is `benchmark` when the caller gave one, else the config's, built here once for the whole run (its
    seeds, held-out tasks, leak guard and synthesizer, verifying inside the run's scratch folder)."""

    refusal = launch_refusal(
        os.environ, cfg.grpo.use_cpu, cfg.grpo.bf16, cfg.grpo.shared_prompt, bool(cfg.model.lora and cfg.grpo.use_vllm)
    )
    if refusal:
        raise RunSetupError(refusal)
    run_id = ranks.share(run_id or new_run_id(cfg.name))
    run_dir = Path(cfg.output_dir) / run_id
    try:
        bench = benchmark or run_benchmark(cfg, scratch=run_scratch(run_dir))
        seeds = select_seeds(cfg, bench)
        check_model_source(cfg)
    except (TaskSetError, DoorError, TaskFileError, OSError) as e:
        raise RunSetupError(str(e)) from None
    if resume and not (run_dir / "config.yaml").exists():
        raise RunSetupError(
            f"--resume {run_id}: no run {run_dir} (no config.yaml there); `rods runs list` shows the runs"
        )
    return run_id, run_dir, bench, seeds


def check_model_source(cfg: RunConfig) -> None:
    """Refuse a model folder that is neither a model nor allowed to be built, before the run is created."""

    path = model_folder(cfg.model.path, cfg.model.build_if_missing)
    if cfg.model.build_if_missing and not (path / "config.json").exists():
        return  # built by build.py once the run exists
    check_model_dir(path)


def open_run(
    cfg: RunConfig, run_dir: Path, run_id: str, resume: bool, ranks: Ranks, open_recorder: OpenRecorder
) -> RunRecorder:
    """The run folder, its config.yaml and its recorder (rank 0; a recorder of nothing elsewhere)."""
    if not ranks.main:
        return NullRecorder()
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        (run_dir / "config.yaml").write_text(dump_config(cfg))
    return open_recorder(cfg, run_dir, run_id, resume)


def restore(run_dir: Path, run_id: str, recorder: RunRecorder, rods: RodsStep, log) -> Path | None:
    """Resume: the RODS state from the newest complete checkpoint, the record put back to that step
    (events after it truncated, decisions it had not applied reopened). Returns the checkpoint for TRL,
    None when the run restarts from step 0."""
    ckpt, ckpt_step = last_checkpoint(run_dir), -1
    if ckpt is not None:
        ckpt_step, state = load_state(ckpt)
        rods.load_state_dict(state)
    counts = recorder.resume_to(ckpt_step)
    log(f"resuming {run_id} from {ckpt.name if ckpt else 'step 0 (no complete checkpoint)'}: {counts}")
    return ckpt


class Policy:
    """The model, its tokenizer and the episode settings its prompts are rendered with."""

    def __init__(self, model, tokenizer, episode, model_dir: Path):
        self.model, self.tokenizer, self.episode, self.model_dir = model, tokenizer, episode, model_dir

    @classmethod
    def load(cls, cfg: RunConfig, model_dir: Path) -> Policy:

        # TRL's dtype rule (fp32 master weights unless model.dtype says otherwise), applied here because TRL
        # ignores model_init_kwargs for a model it is handed
        model, tokenizer, card_prompt = load_policy(model_dir, model_init_kwargs(cfg.model, cfg.grpo.trainer_args))
        prompt = card_prompt if read_card(model_dir) else cfg.episode.prompt  # a tiny model keeps its card's format
        episode = cfg.episode.model_copy(
            update={"prompt": prompt, "hints": cfg.episode.hints or cfg.method == "env_augment"}
        )
        return cls(model, tokenizer, episode, Path(model_dir))

    def sft_task_ids(self) -> set[str]:
        """Tasks the warm start trained on (the model card's stages): never held out."""

        return {tid for stage in read_card(self.model_dir).get("stages", []) for tid in stage.get("task_ids", [])}

    def save_final(self, trainer, final: Path, run_id: str, ranks: Ranks) -> None:
        """The trained model, whole, in `final` (from_pretrained loads it). Under FSDP with sharded checkpoints,
        transformers' save_model writes no weights, so the full state dict is gathered here (every rank takes part;
        rank 0 writes it)."""

        if sharded_checkpoints(trainer):
            state = trainer.accelerator.get_state_dict(trainer.model)
            if trainer.args.should_save:
                trainer._save(str(final), state_dict=state)
        else:
            trainer.save_model(str(final))
        if ranks.main:
            self.tokenizer.save_pretrained(str(final))
            write_card(final, {**read_card(self.model_dir), "trained_by": run_id})


def sharded_checkpoints(trainer) -> bool:
    """Whether the trainer saves FSDP checkpoints as shards (accelerate's fsdp_state_dict_type SHARDED_STATE_DICT)."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None) if trainer.is_fsdp_enabled else None
    return plugin is not None and "FULL_STATE_DICT" not in str(plugin.state_dict_type)


class HeldOutEval:
    """Greedy episodes on the held-out tasks, sharded over the ranks; one `eval` event per call (rank 0)."""

    def __init__(
        self,
        cfg: RunConfig,
        policy: Policy,
        seeds: list,
        recorder: RunRecorder,
        rods: RodsStep,
        ranks: Ranks,
        log,
        tasks_bench: Benchmark,
        benchmark: Benchmark | None,
        generation: Callable[[], AbstractContextManager] | None = None,
        scratch: Path | None = None,
    ):
        """`tasks_bench` (the run's) gives the held-out tasks; `benchmark`, when the caller gave one, plays them
        (else `cfg.benchmark` with the greedy episode settings, no hints: built here, once). `generation()` enters
        what plays the episodes (RodsGRPOTrainer.evaluation_generator: the run's vLLM synced to the weights, or None
        inside whole weights); without it the model plays itself inside whole weights. The episodes write inside
        `scratch` (the run's scratch folder)."""

        self.split, self.policy, self.ranks = cfg.eval.split, policy, ranks
        self.recorder, self.rods, self.generation, self.scratch = recorder, rods, generation, scratch
        self.log = log if ranks.main else (lambda *_: None)
        self.tasks = eval_tasks(cfg, seeds, policy.sft_task_ids(), tasks_bench)
        self.start_limit = cfg.eval.start_limit
        sampling = policy.episode.sampling.model_copy(update={"temperature": 0.0})
        episode = policy.episode.model_copy(update={"sampling": sampling, "hints": False})
        self.greedy = EvalConfig(
            episode=episode,
            benchmark=cfg.benchmark,
            benchmark_options=cfg.benchmark_options,
            max_batch=cfg.eval.max_batch,
        )
        g = self.greedy
        self.benchmark = benchmark or episode_benchmark(g.episode, g.benchmark, options=g.benchmark_options)

    def __call__(self, model, step: int, optimizer=None) -> None:
        """Evaluate `model` (the trainer's) at `step`; `optimizer`, the trainer's, lets ZeRO-3 gather as TRL does."""

        tasks = self.tasks[: self.start_limit] if step == 0 and self.start_limit else self.tasks
        if not tasks:
            return
        # FSDP2 / ZeRO-3: each rank's episodes make their own number of forward calls
        playing = self.generation() if self.generation else whole_weights(model, optimizer)
        # the run reports no step while it evaluates: the recorder beats meanwhile, so it never reads stale
        with self.recorder.working(), playing as generator:
            result = evaluate_sharded(
                (model, self.policy.tokenizer),
                tasks,
                self.greedy,
                self.ranks,
                self.benchmark,
                generator,
                scratch=self.scratch,
            )
        per_cat = {k.split("/", 2)[2]: v for k, v in result.items() if k.startswith("eval/progress/")}
        progress = [t["progress"] for t in result["per_task"].values()]
        row = {
            "step": step,
            "split": self.split,
            "accuracy": result["eval/accuracy"],
            "progress": result["eval/progress"],
            "per_category": per_cat,
            "trajectories": self.rods.trajectories,
            "tasks": result["eval/tasks"],
            "progress_sd": statistics.stdev(progress) if len(progress) > 1 else None,
            "per_task": {tid: t["progress"] for tid, t in result["per_task"].items()},
        }
        self.recorder.write({"eval": [row]})
        self.recorder.flush()
        self.log(f"step {step}: eval {self.split} progress {row['progress']:.3f} accuracy {row['accuracy']:.3f}")

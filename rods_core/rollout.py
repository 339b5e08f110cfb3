"""Multi-turn episodes on BFCL tasks: the same code for SFT checks, evaluation and GRPO rollouts.

An episode plays the task's user turns in order. The policy writes an assistant message; if it holds
tool calls they run in the episode's own fresh BfclEnvironment and the results come back as tool
messages; a turn ends when the policy answers without a call or after `max_steps_per_turn` tool-call
messages. After each turn TurnChecker judges it (strict: state + execution results), and the episode's
reward is the progress reward (share of checked turns passed).

Tokens: `prompt_ids` = system + first user turn + the generation prompt, rendered by the tokenizer's own
chat template with the task's tools; `completion_ids` = everything after, the model's tokens as generated
(env_mask 1) interleaved with what the environment and later user turns wrote (env_mask 0), whose tokens
come from the same template (policy/rendering.py: exact for any template, or a clear TemplateError).
Episodes are played through `Generator.stream`: in rounds (one batched message per active episode), or,
with the KV-cached decoder, continuously: an episode's next message starts as soon as its last is played.
Departure from the paper (verl's multi-turn rollout): a message cut by `max_new_tokens` is closed with the
stop token as an environment token, and an episode whose context would outgrow `max_context_tokens` ends
early with its remaining turns scored as failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rods_core.config import EpisodeConfig
from rods_core.envs.bfcl import ERROR_PREFIX, BfclEnvironment
from rods_core.envs.checker import TurnChecker
from rods_core.policy.generation import Completion, Generator
from rods_core.policy.prompting import episode_tools, initial_messages, parse_assistant, tool_message, turn_messages
from rods_core.policy.rendering import ChatRenderer, renderer_for
from rods_core.tasks import Task


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


class _Run:
    """The state machine of one episode, fed one generated message at a time."""

    def __init__(self, task: Task, renderer: ChatRenderer, cfg: EpisodeConfig, hints: bool):
        self.task, self.renderer, self.cfg = task, renderer, cfg
        self.env = BfclEnvironment(task, hints=hints)
        self.tools = episode_tools(self.env)
        self.checker = TurnChecker(task)
        self.turn, self.step, self.made_calls, self.done = 0, 0, False, False
        msgs = initial_messages(task, cfg.prompt)
        self.ep = Episode(task.id, prompt_ids=renderer.prompt_ids(msgs, self.tools), transcript=list(msgs))

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
        parsed = parse_assistant(text)
        ep.n_messages += 1
        ep.valid_messages += parsed.valid
        ep.transcript.append({"role": "assistant", "content": text})
        new_msgs: list[dict] = []
        if parsed.is_tool_call:
            self.step += 1
            new_msgs += self._run_calls(parsed)
            turn_over = self.step >= self.cfg.max_steps_per_turn
        else:
            turn_over = True
        if turn_over:
            self._end_turn()
            if not self.done:
                new_msgs += turn_messages(self.task, self.turn, self.cfg.prompt)
        if not self.done:  # the transcript is the conversation so far, ending with the message just generated
            self._append(self.renderer.appended_ids(ep.transcript, new_msgs, self.tools), 0)
        ep.transcript.extend(new_msgs)
        if not self.done and len(self.context()) + self.cfg.sampling.max_new_tokens > self.cfg.max_context_tokens:
            self._finish_early()

    def _run_calls(self, parsed) -> list[dict]:
        t0 = time.perf_counter()
        if parsed.error:
            self.ep.parse_errors += 1
            results = [ERROR_PREFIX + f"could not parse tool call: {parsed.error}"]
        else:
            obs = [self.env.execute_call(c) for c in parsed.calls]
            self.ep.n_calls += len(obs)
            self.made_calls = True
            results = [o.result for o in obs]
            self.checker.record(results)
        self.ep.env_seconds += time.perf_counter() - t0
        return [tool_message(r, self.cfg.prompt) for r in results]

    def _end_turn(self) -> None:
        t0 = time.perf_counter()
        v = self.checker.check_turn(self.turn, self.env, self.made_calls)
        self.ep.verdicts.append({"turn": v.turn, "checked": v.checked, "passed": v.passed, "reason": v.reason})
        self.ep.check_seconds += time.perf_counter() - t0
        self.turn, self.step, self.made_calls = self.turn + 1, 0, False
        if self.turn >= self.task.n_turns:
            self._close()
        else:
            self.env.start_turn(self.turn)

    def _finish_early(self) -> None:
        """The context is full: judge the current turn as it stands and the rest as turns without calls."""
        self.ep.truncated = True
        while not self.done:
            self._end_turn()

    def _close(self) -> None:
        self.done = True
        score = self.checker.score
        self.ep.reward, self.ep.accuracy = score.progress, score.accuracy


def run_episodes(
    tasks: list[Task],
    generator: Generator,
    cfg: EpisodeConfig,
    *,
    hints: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Episode]:
    """Play every task once (repeat a task G times in `tasks` for a GRPO group); order is kept.

    `generator.tokenizer`'s chat template renders messages; `progress(done, total)` is called after each
    finished episode.
    """
    renderer = renderer_for(generator.tokenizer)
    runs = [_Run(t, renderer, cfg, cfg.hints if hints is None else hints) for t in tasks]
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

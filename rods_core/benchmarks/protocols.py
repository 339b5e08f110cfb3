"""The two small interfaces every benchmark implements: an `Environment` (one episode) and a `Benchmark`
(its tasks, split, leak guard, verifier, synthesizer and app view), plus the plain episode loop over them.

Messages are chat dicts (`{"role": ..., "content": ...}`); an assistant message may also carry `tool_calls`
(OpenAI-style dicts or BFCL call strings). Environments parse calls themselves (rods_core.envs.parsing) and
never execute text. A step may open a new session (`Step.new_session`): the returned messages then replace
the conversation, as BFCL's memory category starts each prerequisite conversation and the question afresh
(`play` and evaluation do so; GRPO rollouts append the session to one sequence: rods_core/rollout.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

Split = Literal["train", "test", "all"]
Message = dict[str, Any]
# A player maps the conversation so far (of the current session) to the next assistant message: a scripted
# reference path, or the trained policy (rods_core.policy) behind a generation call.
Player = Callable[[list[Message]], Message]


@dataclass(frozen=True)
class Step:
    """What the environment answers to one assistant message."""

    messages: list[Message]  # tool results and/or the next user turn, to append (or to start a new session)
    done: bool  # the episode is over; score() is final
    new_session: bool = False  # the messages open a fresh conversation (the model's context is reset)


@dataclass(frozen=True)
class EpisodeScore:
    """An episode's outcome: the reward GRPO uses and the benchmark's own pass/fail."""

    progress: float  # in [0, 1]: the share of checks passed (BFCL multi-turn) or the final-answer check (memory)
    accuracy: bool  # the benchmark's official verdict for the whole episode
    detail: list[dict] = field(default_factory=list)  # per-check verdicts, for the app and debugging


@dataclass(frozen=True)
class Verdict:
    """Whether a task is sound: its ground-truth path, executed, scores full marks."""

    ok: bool
    score: EpisodeScore | None = None
    reason: str = ""


@runtime_checkable
class Environment(Protocol):
    """One episode of one task, with state of its own (no two environments share anything mutable)."""

    def tools(self) -> list[dict]:
        """OpenAI-style tool schemas the policy is shown for the episode (`apply_chat_template(tools=)`)."""
        ...

    def reset(self) -> list[Message]:
        """Start the episode; returns its opening messages (system + first user turn)."""
        ...

    def step(self, message: Message) -> Step:
        """Consume one assistant message: run its tool calls or close the turn; never raises on bad input."""
        ...

    def finish(self) -> None:
        """End the episode now (the context is full); what was not played scores as failed."""
        ...

    def score(self) -> EpisodeScore:
        """The episode's score so far (final once a step returned done or finish() was called)."""
        ...


@runtime_checkable
class Synthesizer(Protocol):
    """Makes structure-matched variants of a task; each variant must pass the benchmark's verifier."""

    def variants(self, task: Any, n: int, seed: int) -> list[Any]:
        """Up to n new tasks with the parent's structure and changed content (ids unique, provenance set)."""
        ...


@runtime_checkable
class Benchmark(Protocol):
    """A task family: its seeds and split, how an episode runs, how a task is verified, shown and grown."""

    name: str  # the config's `benchmark:` value, e.g. "bfcl_multi_turn"
    task_type: type  # the pydantic model of one task (has `id`, `model_validate`, `model_dump`)
    synthesizer: Synthesizer | None  # None: the benchmark trains on its seeds only

    def seeds(self, split: Split) -> list[Any]:
        """The benchmark's seed tasks of a split (fresh copies; train and test never overlap)."""
        ...

    def leak_reason(self, task: Any) -> str | None:
        """Why a task belongs to the held-out test split (by id or content), or None if it may train."""
        ...

    def environment(self, task: Any, workdir: Path) -> Environment:
        """A fresh environment for one episode; anything it writes stays under `workdir`."""
        ...

    def reference_policy(self, task: Any) -> Player:
        """A scripted policy that plays the task's ground-truth path (for verification and demonstrations)."""
        ...

    def verify(self, task: Any, workdir: Path) -> Verdict:
        """Execute the ground-truth path in a fresh environment; ok only with progress 1.0 and accuracy."""
        ...

    def render(self, task: Any) -> str:
        """The task as Markdown for the app (Boundary, Review, Buffer pages)."""
        ...

    def group_of(self, task: Any) -> str:
        """The group evaluation reports by (BFCL's category, memory's scenario)."""
        ...


def _episode(env: Environment, player: Player, max_messages: int) -> tuple[list[Message], EpisodeScore]:
    """Run one episode; (every message of every session in order, the score)."""
    convo = list(env.reset())
    whole = list(convo)
    for _ in range(max_messages):
        msg = player(convo)
        step = env.step(msg)
        convo = list(step.messages) if step.new_session else [*convo, msg, *step.messages]
        whole += [msg, *step.messages]
        if step.done:
            return whole, env.score()
    env.finish()
    return whole, env.score()


def play(env: Environment, player: Player, *, max_messages: int = 10_000) -> EpisodeScore:
    """Run one episode to the end with a player (no tokens: for verification, evaluation and tests).

    The player sees the current session's conversation; after `max_messages` assistant messages the
    episode is finished early, so a player that never stops cannot hang the loop.
    """
    return _episode(env, player, max_messages)[1]


def demonstration(env: Environment, player: Player, *, max_messages: int = 10_000) -> list[Message]:
    """The whole conversation of one episode played by `player` (a benchmark's reference policy: SFT data),
    every session in one list as the rollout lays them out in one sequence; render it with `env.tools()`."""
    return _episode(env, player, max_messages)[0]


def verify_with(bench: Benchmark, task: Any, workdir: Path) -> Verdict:
    """The verifier every benchmark can share: play the reference policy and demand full marks."""
    try:
        score = play(bench.environment(task, workdir), bench.reference_policy(task))
    except Exception as e:  # noqa: BLE001 - a broken task is a failed verification, not a crash
        return Verdict(False, None, f"ground-truth path raised {type(e).__name__}: {e}")
    if score.progress < 1.0 or not score.accuracy:
        failed = [d for d in score.detail if not d.get("passed", True)]
        return Verdict(False, score, f"ground-truth path scored {score.progress:.2f}: {failed[:2]}")
    return Verdict(True, score)


def evaluate(
    bench: Benchmark, make_policy: Callable[[Any], Player], tasks: Sequence[Any], workdir: Path
) -> dict[str, Any]:
    """Play each task once with `make_policy(task)`; accuracy and progress overall and per group, as one
    JSON-ready dict (the paper's out-of-distribution table: any policy on any benchmark)."""
    rows = []
    for task in tasks:
        s = play(bench.environment(task, workdir), make_policy(task))
        rows.append((bench.group_of(task), s.progress, float(s.accuracy)))

    def summary(sel: list[tuple[str, float, float]]) -> dict[str, float]:
        n = len(sel)
        return {"n": n, "accuracy": sum(r[2] for r in sel) / n, "progress": sum(r[1] for r in sel) / n} if n else {}

    groups = sorted({g for g, _, _ in rows})
    return {
        "benchmark": bench.name,
        "overall": summary(rows),
        "by_group": {g: summary([r for r in rows if r[0] == g]) for g in groups},
    }


def scripted_policy(messages: Sequence[Message]) -> Player:
    """A policy that returns the given assistant messages in order, then a plain closing answer forever."""
    queue = list(messages)

    def policy(_convo: list[Message]) -> Message:
        return queue.pop(0) if queue else {"role": "assistant", "content": "Done."}

    return policy

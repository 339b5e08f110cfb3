"""The two small interfaces every benchmark implements: an `Environment` (one episode) and a `Benchmark`
(its tasks, split, leak guard, verifier, synthesizer and app view: rendering, facts, structure, distance),
the task contract every benchmark's task keeps (`TaskRecord`: id, provenance, content key, record), plus the
plain episode loop over them.

Messages are chat dicts (`{"role": ..., "content": ...}`); an assistant message may also carry `tool_calls`
(OpenAI-style dicts or BFCL call strings). Environments parse calls themselves (rods_core.benchmarks.toolcalls.parsing) and
never execute text. A step may open a new session (`Step.new_session`): the returned messages then replace
the conversation, as BFCL's memory category starts each prerequisite conversation and the question afresh
(`play` and evaluation do so; GRPO rollouts append the session to one sequence: rods_core/rollout.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from rods_core.benchmarks.synthesis import SynthResult

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


@dataclass(frozen=True)
class TaskFacts:
    """What the app's tables show of one task beside its rendering (Review's table, the seed catalog): its
    group, and for tasks of API calls the classes it uses, its user turns and ground-truth calls."""

    group: str  # `Benchmark.group_of`: BFCL's category, memory's scenario
    class_combo: str = ""  # the API classes the task involves, "A + B"; "" for tasks without classes
    turns: int = 0  # user turns (0: the benchmark's tasks have none to count)
    calls: int = 0  # ground-truth calls (0: none to count)


@dataclass(frozen=True)
class TaskStructure:
    """What the Boundary and Buffer pages chart of one task: the classes its ground truth uses, the depth of
    its calls' data dependencies (rods_core.benchmarks.bfcl.signature), its turns and calls."""

    class_combo: str
    depth: int
    turns: int
    calls: int


@dataclass(frozen=True)
class Distance:
    """How far a task is from its parent (Review): argument values, calls and turns that differ."""

    values: int
    calls: int
    turns: int


@runtime_checkable
class ProvenanceRecord(Protocol):
    """Where a task came from, as every benchmark's task records it (BFCL multi-turn's `Provenance`)."""

    source: str  # seed | synth | import | edit
    parent_id: str | None  # the task this one was derived from
    created_step: int | None  # the training step at which it was created
    note: str | None  # free text: the synthesis plan, the editor, ...


@runtime_checkable
class TaskRecord(Protocol):
    """The task contract: what the library, storage and the lab may rely on of a benchmark's task, whatever
    its model (`Benchmark.task_type`, a pydantic model). Everything else a task holds is the benchmark's:
    the app shows a task only through `Benchmark.render`, `facts`, `structure` and `distance`, beside its id
    and provenance; the buffer, the store and the exports keep it as its record and read it back with
    `Benchmark.task_type.model_validate`."""

    id: str  # unique in a run; `[A-Za-z0-9_]` for tasks that must survive BFCL's own tooling
    provenance: ProvenanceRecord

    def content_key(self) -> str:
        """A hash of what the agent sees and must do, insensitive to ids (the leak guard's and the pool's
        duplicate check: two tasks with one key are one task)."""
        ...

    def to_record(self) -> dict:
        """The task as one JSON object (JSONL, exports, checkpoints, the store); `task_type.model_validate`
        reads it back to an equal task."""
        ...

    def model_dump(self, **kwargs: Any) -> dict:
        """pydantic's dump (`mode="json"`, `exclude=`): Review's record diff, the edit form."""
        ...

    def model_copy(self, **kwargs: Any) -> TaskRecord:
        """pydantic's copy (`update=`): a new id or provenance on an edited or imported task."""
        ...


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

    def variants(self, task: Any, n: int, seed: int, pool_keys: Collection[str] = ()) -> SynthResult:
        """Up to n new tasks with the parent's structure and changed content (ids unique, provenance set),
        none whose content key is in `pool_keys`: `.accepted`, and every attempt with the verdict of each
        stage it reached (`.attempts`), whose per-stage counts the run logs (`synth/*`, `variant` rows)."""
        ...


@runtime_checkable
class Benchmark(Protocol):
    """A task family: its seeds and split, how an episode runs, how a task is verified, shown and grown."""

    name: str  # the config's `benchmark:` value, e.g. "bfcl_multi_turn"
    task_type: type  # the pydantic model of one task: its instances keep the task contract (TaskRecord)
    synthesizer: Synthesizer | None  # None: the benchmark trains on its seeds only
    # What the app charts of a task (class combination, depth, turns, calls: Boundary, Buffer) and shows turn
    # by turn (Review); None for a benchmark whose tasks have none: its pages show success and pools by
    # group, and a task as `render` shows it.
    structure: Callable[[Any], TaskStructure] | None

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

    def import_problem(self, task: Any, workdir: Path) -> tuple[str, str] | None:
        """(field, reason) when a task read from a file (seed file, catalog import, `--tasks`) fails
        verification by execution, else None: the task-file door's check (`verify_problem` for most)."""
        ...

    def edit_problem(self, task: Any, parent: Any, workdir: Path) -> str | None:
        """Why a hand-edited task (its leak and duplicates already checked) fails verification, or None: BFCL
        multi-turn replays its calls clean and keeps `parent`'s structure; the others run `verify`."""
        ...

    def facts(self, task: Any) -> TaskFacts:
        """The task's group, class combination, turns and calls, as the app's tables list them (cheap)."""
        ...

    def distance(self, parent: Any | None, task: Any) -> Distance:
        """How far `task` is from `parent` (everything counts as changed without one): Review's columns."""
        ...


# ----- what some benchmarks offer beyond the protocol ---------------------------------------------------------
# Optional: a benchmark offers one of these by defining its methods; callers test `isinstance(bench, X)` and say
# plainly when it does not, so the lab's commands and pages never name a benchmark. BFCL multi-turn offers all;
# ToolCatalog also serves the tiny model's tokenizer (policy/tiny.TOKENIZER_BENCHMARK).


@runtime_checkable
class SeedStatistics(Protocol):
    """Statistics of a seed set (`rods seeds stats`, the Seeds page's seed-set tab)."""

    def seed_stats(self, tasks: Sequence[Any]) -> dict:
        """{"tasks": n, "by_<key>": {value: count}, ...}: counts per group and per feature of the tasks."""
        ...

    def seed_rows(self, tasks: Sequence[Any]) -> list[dict]:
        """One flat row per task (id, group, features, its split) for the app's table and charts."""
        ...


@runtime_checkable
class DemoSeeds(Protocol):
    """The few seeds the demo warm start trains on (the entry's `demo_seeds` option; `rods sft --demo`)."""

    def demo_seeds(self) -> list[Any]: ...


@runtime_checkable
class ToolCatalog(Protocol):
    """Every tool the benchmark's environments can offer, as tool schemas (what a tiny model's tokenizer learns)."""

    def tool_catalog(self) -> list[dict]: ...


@runtime_checkable
class AnswerScoring(Protocol):
    """Batch checks outside episodes (`rods env replay|score`): its ground truth replayed, answers files scored."""

    def replay_report(self, tasks: Sequence[Any]) -> dict:
        """Each task's ground truth replayed and checked: {"tasks", "passed", "failed", ...}."""
        ...

    def read_answers(self, path: Path) -> list[dict]:
        """An answers file (JSONL), all or nothing: a DoorError names each bad line."""
        ...

    def score_answers(self, answers: list[dict], tasks: Sequence[Any]) -> dict:
        """Answers (`read_answers`) scored against `tasks`: per task and totals."""
        ...


@runtime_checkable
class SynthCommand(Protocol):
    """Variants of one task written to a file, with each stage's counts (`rods synth`): the command's library."""

    def synth_report(
        self,
        parent_id: str,
        n: int,
        out: Path,
        tasks_file: Path | None,
        *,
        seed: int,
        backend: str,
        config: Path | None,
    ) -> dict:
        """Find the parent (a train seed, or a task of `tasks_file`), synthesize by the settings of `config` and
        the options, write the accepted variants to `out`; the report. ValueError or OSError says what is wrong."""
        ...

    def print_synth_report(self, report: dict) -> None:
        """The report as the command prints it without --json."""
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


def verify_problem(bench: Benchmark, task: Any, workdir: Path) -> tuple[str, str] | None:
    """`Benchmark.import_problem` by the benchmark's verifier: ("(task)", the reason) when it fails."""
    verdict = bench.verify(task, workdir)
    return None if verdict.ok else ("(task)", verdict.reason)


def verify_edit_problem(bench: Benchmark, task: Any, workdir: Path) -> str | None:
    """`Benchmark.edit_problem` by the benchmark's verifier: "verification: <its reason>" when it fails."""
    verdict = bench.verify(task, workdir)
    return None if verdict.ok else f"verification: {verdict.reason}"


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    """A JSON value's scalars by their path ("sessions.0.2")."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{path}.{i}").items()}
    return {path: value}


def record_distance(parent: Any | None, task: Any) -> Distance:
    """`Benchmark.distance` of tasks without calls or turns: the values of the task's record (id and provenance
    aside) that differ from the parent's, path by path; every value without a parent."""
    new = _leaves(task.model_dump(mode="json", exclude={"id", "provenance"}))
    if parent is None:
        return Distance(len(new), 0, 0)
    old = _leaves(parent.model_dump(mode="json", exclude={"id", "provenance"}))
    return Distance(sum(new.get(k) != old.get(k) for k in new.keys() | old.keys()), 0, 0)


class RecordChecks:
    """The task-file door, the edit check, the app's facts and Review's distance of a benchmark whose tasks are
    plain records (no API classes, calls or turns), by its own `verify`, `group_of` and record diff: a base
    class for such benchmarks (memory's; one written in a test)."""

    def import_problem(self, task: Any, workdir: Path) -> tuple[str, str] | None:
        return verify_problem(self, task, workdir)

    def edit_problem(self, task: Any, parent: Any, workdir: Path) -> str | None:
        return verify_edit_problem(self, task, workdir)

    def facts(self, task: Any) -> TaskFacts:
        return TaskFacts(self.group_of(task))

    def distance(self, parent: Any | None, task: Any) -> Distance:
        return record_distance(parent, task)


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

"""BFCL v3 multi-turn behind the Benchmark/Environment protocols: the environment the rollout plays for BFCL
(environment's executor, checker's strict per-turn check, prompting's messages), its seeds and leak
guard, its reference policy (the ground truth as OpenAI-style tool calls: the SFT demonstrations) and the
five-stage synthesis pipeline as its Synthesizer. Progress = share of checked turns passed, accuracy = all pass.
Beyond the protocol it offers seed statistics, demo seeds, its tool catalog, answers scoring and `rods synth`
(protocols.SeedStatistics, DemoSeeds, ToolCatalog, AnswerScoring, SynthCommand).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from pathlib import Path

from rods_core.benchmarks.bfcl.checker import TurnChecker
from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.bfcl.environment import BfclEnvironment, function_docs, named_arguments
from rods_core.benchmarks.bfcl.facts import call_distance, replay_problem, task_facts, task_structure
from rods_core.benchmarks.bfcl.prompting import (
    DONE_ANSWER,
    NOTHING_TO_DO_ANSWER,
    initial_messages,
    tool_schemas,
    turn_messages,
)
from rods_core.benchmarks.bfcl.scoring import read_answers, replay_report, score_answers
from rods_core.benchmarks.bfcl.seed_stats import seed_stats, task_rows
from rods_core.benchmarks.bfcl.seeds import leak_guard, load_seeds, split_of
from rods_core.benchmarks.bfcl.synth.cli_support import find_parent, load_config, render_counts, run
from rods_core.benchmarks.bfcl.synth.pipeline import SynthesisConfig, synthesize
from rods_core.benchmarks.bfcl.synth.verify import verify_task
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.protocols import (
    Distance,
    EpisodeScore,
    Message,
    Player,
    Split,
    Step,
    TaskFacts,
    TaskStructure,
    Verdict,
    scripted_policy,
    verify_with,
)
from rods_core.benchmarks.synthesis import SynthResult
from rods_core.benchmarks.toolcalls.chat import ParsedMessage, tool_message
from rods_core.benchmarks.toolcalls.dispatch import ERROR_PREFIX
from rods_core.benchmarks.toolcalls.messages import read_message
from rods_core.benchmarks.toolcalls.parsing import Call, parse_calls
from rods_core.config import PromptConfig
from rods_core.config.benchmark_entries import benchmark_entry


def call_to_tool_call(call: Call) -> dict:
    """A parsed call as an OpenAI-style tool call with named arguments (positional ones bound by name)."""
    # A copy: the same call is then executed, and some API methods mutate their list arguments in place
    # (TwitterAPI.mention appends to mentioned_usernames), which would rewrite the message after the fact.
    return {"type": "function", "function": {"name": call.name, "arguments": copy.deepcopy(named_arguments(call))}}


def reference_messages(task: Task) -> list[Message]:
    """The ground truth as assistant messages: per turn one message with its calls as OpenAI-style tool calls
    (named arguments, as a demonstration shows them), then the closing answer."""
    msgs: list[Message] = []
    for turn in task.ground_truth:
        calls = [call_to_tool_call(c) for s in turn for c in parse_calls(s)]
        if calls:
            msgs.append({"role": "assistant", "content": "", "tool_calls": calls})
        msgs.append({"role": "assistant", "content": DONE_ANSWER if calls else NOTHING_TO_DO_ANSWER})
    return msgs


class BfclMultiTurnEnvironment:
    """One BFCL multi-turn episode: user turns scripted from the task, calls run in fresh instances."""

    def __init__(self, task: Task, *, prompt: PromptConfig, max_steps_per_turn: int = 4, hints: bool = False):
        self.task, self.prompt, self.max_steps = task, prompt, max_steps_per_turn
        self.env = BfclEnvironment(task, hints=hints)
        self.checker = TurnChecker(task)
        self.turn, self.steps, self.made_calls, self.done = 0, 0, False, False
        self.parse_errors = 0

    def tools(self) -> list[dict]:
        """The functions available at turn 0 (miss_func's later ones arrive in a user note)."""
        return tool_schemas(self.env.available_functions(0))

    def reset(self) -> list[Message]:
        return initial_messages(self.task, self.prompt)

    def step(self, message: Message) -> Step:
        if self.done:
            return Step([], True)
        parsed = read_message(message)
        msgs: list[Message] = []
        if parsed.is_tool_call:
            self.steps += 1
            msgs += self._run_calls(parsed)
            turn_over = self.steps >= self.max_steps
        else:
            turn_over = True
        if turn_over:
            self._end_turn()
            if not self.done:
                msgs += turn_messages(self.task, self.turn, self.prompt)
        return Step(msgs, self.done)

    def _run_calls(self, parsed: ParsedMessage) -> list[Message]:
        if parsed.error:
            self.parse_errors += 1
            results = [ERROR_PREFIX + f"could not parse tool call: {parsed.error}"]
        else:
            results = [self.env.execute_call(c).result for c in parsed.calls]
            self.made_calls = True
            self.checker.record(results)
        return [tool_message(r, self.prompt.result_chars) for r in results]

    def _end_turn(self) -> None:
        self.checker.check_turn(self.turn, self.env, self.made_calls)
        self.turn, self.steps, self.made_calls = self.turn + 1, 0, False
        if self.turn >= self.task.n_turns:
            self.done = True
        else:
            self.env.start_turn(self.turn)

    def finish(self) -> None:
        while not self.done:
            self._end_turn()

    def score(self) -> EpisodeScore:
        s = self.checker.score
        detail = [{"turn": v.turn, "checked": v.checked, "passed": v.passed, "reason": v.reason} for v in s.turns]
        return EpisodeScore(s.progress, bool(s.accuracy), detail)


class BfclPipelineSynthesizer:
    """BFCL's five-stage synthesis (rods_core.benchmarks.bfcl.synth.pipeline: Plan -> Execute -> Rewrite -> Critique -> Augment)
    as a Synthesizer: up to n variants of a train task, each verified by execution inside the pipeline, and
    every attempt with the stage that accepted or rejected it."""

    def __init__(self, cfg=None):
        """`cfg`: the pipeline's SynthesisConfig (its defaults when None); `variants` overrides its seed."""
        self.cfg = cfg

    def variants(self, task: Task, n: int, seed: int, pool_keys: Collection[str] = ()) -> SynthResult:
        cfg = (self.cfg or SynthesisConfig()).model_copy(update={"seed": seed})
        return synthesize(task, n, {task.content_key(), *pool_keys}, cfg)


class BfclMultiTurn:
    """The BFCL v3 multi-turn benchmark: 800 seeds (400 train / 400 test by scenario), the strict checker."""

    name = "bfcl_multi_turn"
    task_type = Task
    options = benchmark_entry(
        name
    ).options  # hints, demo seeds, categories, warm-start variants (the config checks them)

    def __init__(
        self, prompt: PromptConfig | None = None, *, max_steps_per_turn: int = 4, hints: bool = False, synth=None
    ):
        """`synth`: the SynthesisConfig of the five-stage synthesizer (its defaults when None)."""
        self.prompt = prompt or PromptConfig()
        self.max_steps_per_turn, self.hints = max_steps_per_turn, hints
        self.synthesizer = BfclPipelineSynthesizer(synth)

    def seeds(self, split: Split) -> list[Task]:
        return load_seeds(split)

    def demo_seeds(self) -> list[Task]:
        """The demo subset (its entry's `demo_seeds` option): the single-class base train seeds (bfcl/demo.py)."""
        return demo_seeds()

    def tool_catalog(self) -> list[dict]:
        """Every documented tool (all 128) as a tool schema, in BFCL's doc order: what a tokenizer learns."""
        return tool_schemas(list(function_docs()))

    def leak_reason(self, task: Task) -> str | None:
        return leak_guard().reason(task)

    def environment(self, task: Task, workdir: Path) -> BfclMultiTurnEnvironment:
        return BfclMultiTurnEnvironment(
            task, prompt=self.prompt, max_steps_per_turn=self.max_steps_per_turn, hints=self.hints
        )

    def reference_policy(self, task: Task) -> Player:
        return scripted_policy(reference_messages(task))

    def verify(self, task: Task, workdir: Path) -> Verdict:
        return verify_with(self, task, workdir)

    def render(self, task: Task) -> str:
        lines = [f"**{task.id}** · {task.category} · {', '.join(task.involved_classes)}", ""]
        for t, (text, calls) in enumerate(zip(task.user_texts, task.ground_truth, strict=True)):
            lines.append(f"{t + 1}. **User:** {text or '*(no message)*'}")
            arriving = task.missed_function.get(t, [])
            if arriving:
                lines.append(f"   *functions arrive:* `{', '.join(arriving)}`")
            lines.append("   " + (" ".join(f"`{c}`" for c in calls) if calls else "*(no call expected)*"))
        return "\n".join(lines)

    def group_of(self, task: Task) -> str:
        return task.category

    def import_problem(self, task: Task, workdir: Path) -> tuple[str, str] | None:
        return replay_problem(task)  # lighter than `verify`: BFCL's own tasks pass as they are

    def edit_problem(self, task: Task, parent: Task | None, workdir: Path) -> str | None:
        ok, reason = verify_task(task, parent)  # as synthesis's Execute and Critique verify a variant
        return None if ok else reason

    def facts(self, task: Task) -> TaskFacts:
        return task_facts(task)

    def structure(self, task: Task) -> TaskStructure:
        return task_structure(task)

    def distance(self, parent: Task | None, task: Task) -> Distance:
        return call_distance(parent, task)

    # ----- beyond the protocol (protocols.SeedStatistics, DemoSeeds, AnswerScoring, SynthCommand) -----
    def seed_stats(self, tasks: Sequence[Task]) -> dict:
        return seed_stats(tasks)

    def seed_rows(self, tasks: Sequence[Task]) -> list[dict]:
        return [{**row, "split": split_of(t.id)} for row, t in zip(task_rows(tasks), tasks, strict=True)]

    def replay_report(self, tasks: Sequence[Task]) -> dict:
        return replay_report(list(tasks))

    def read_answers(self, path: Path) -> list[dict]:
        return read_answers(path)

    def score_answers(self, answers: list[dict], tasks: Sequence[Task]) -> dict:
        return score_answers(answers, {t.id: t for t in tasks})

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
        parent = find_parent(parent_id, tasks_file)
        return run(parent, load_config(config, seed=seed, backend=backend, n=n), out, tasks_file)

    def print_synth_report(self, report: dict) -> None:
        render_counts(report)

"""A benchmark with an option of its own, whole in this one file: its task model, environment, benchmark class,
its options model and its registration. `echo` asks the policy to say a word `times` times; `times` is its
option (a run's `benchmark_options.times`, validated by EchoOptions, given to the factory as `options`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from rods_core.benchmarks.protocols import EpisodeScore, RecordChecks, Step, scripted_policy, verify_with
from rods_core.benchmarks.provenance import Provenance
from rods_core.config.benchmark_entries import BenchmarkEntry, register_benchmark

NAME = "echo"


class EchoOptions(BaseModel):
    """Echo's own options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    times: int = Field(2, ge=1, le=5, description="how many times a reply must say the word to be right")


class EchoTask(BaseModel):
    """Say a word; the reward grows with the reply's length (variance even for an untrained model)."""

    id: str
    word: str
    provenance: Provenance = Provenance()

    def content_key(self) -> str:
        return self.word

    def to_record(self) -> dict:
        return self.model_dump(mode="json")


class EchoEnv:
    def __init__(self, task: EchoTask, times: int):
        self.task, self.times, self.reply = task, times, ""

    def tools(self) -> list[dict]:
        return []

    def reset(self) -> list[dict]:
        return [{"role": "user", "content": f"Say {self.task.word} {self.times} times."}]

    def step(self, message: dict) -> Step:
        self.reply = message.get("content") or ""
        return Step([], True)

    def finish(self) -> None:
        pass

    def score(self) -> EpisodeScore:
        return EpisodeScore(min(1.0, len(self.reply) / 400), self.reply.count(self.task.word) >= self.times)


class Echo(RecordChecks):
    name, task_type, synthesizer, structure, options = NAME, EchoTask, None, None, frozenset()
    WORDS = ("apple", "river", "stone", "cloud", "ember", "maple")

    def __init__(self, *, options: EchoOptions = EchoOptions()):
        self.times = options.times

    def seeds(self, split: str) -> list[EchoTask]:
        every = [EchoTask(id=f"echo_{i}", word=w) for i, w in enumerate(self.WORDS)]
        return [t for i, t in enumerate(every) if split == "all" or (i >= 4) == (split == "test")]

    def leak_reason(self, task: EchoTask) -> str | None:
        return "a held-out word" if task.word in self.WORDS[4:] else None

    def environment(self, task: EchoTask, workdir: Path) -> EchoEnv:
        return EchoEnv(task, self.times)

    def reference_policy(self, task: EchoTask):
        return scripted_policy([{"role": "assistant", "content": " ".join([task.word] * self.times)}])

    def verify(self, task: EchoTask, workdir: Path):
        return verify_with(self, task, workdir)

    def render(self, task: EchoTask) -> str:
        return f"**{task.id}**: say {task.word} {self.times} times"

    def group_of(self, task: EchoTask) -> str:
        return "all"


def register() -> BenchmarkEntry:
    """Make `echo` a benchmark a config, the CLI and the app can name (as an entry point would)."""
    return register_benchmark(
        NAME, Echo, task_type=EchoTask, options_model=EchoOptions, description="say a word N times"
    )

"""BFCL v4 memory as a Benchmark: kv or rec_sum backend, 155 questions split by scenario, BFCL's answer check,
and the template synthesizer. The pieces live beside it: tasks (tasks, split, leak guard), env
(the episode), answers (the check), synth (variants)."""

from __future__ import annotations

from pathlib import Path

from rods_core.benchmarks.memory.answers import blank_answers
from rods_core.benchmarks.memory.env import (
    Backend,
    MemoryEnvironment,
    backend_class,
    played_sessions,
    reference_policy,
)
from rods_core.benchmarks.memory.options import MemoryOptions, Prereq
from rods_core.benchmarks.memory.synth import MemoryTemplateSynthesizer
from rods_core.benchmarks.memory.tasks import MemoryTask, load_memory_seeds, memory_leak_guard
from rods_core.benchmarks.protocols import (
    Player,
    RecordChecks,
    Split,
    Verdict,
    verify_with,
)
from rods_core.config.benchmark_entries import benchmark_entry


class BfclMemory(RecordChecks):  # no API classes: its sessions are shown as rendered
    """BFCL v4 memory with the kv or rec_sum backend: 155 questions, split by scenario (80 train / 75 test)."""

    task_type = MemoryTask
    structure = None  # no API classes or calls to chart: the app shows memory tasks by scenario, as rendered

    def __init__(
        self,
        backend: Backend = "kv",
        *,
        max_steps_per_turn: int = 4,
        prereq: Prereq = "all",
        synth_workdir: Path | None = None,
    ):
        """`prereq`: the prerequisite conversations an episode plays ("all" as BFCL, or "fact": only the one
        that states the answer); `synth_workdir`: the folder inside which the synthesizer's verification episodes
        write snapshots, in a fresh folder removed after each call (a run's scratch folder; the system's
        temporary folder when None)."""
        backend_class(backend)  # fail now, not at the first episode
        played_sessions(self.seeds("train")[0], prereq)  # refuse a bad value now
        self.backend, self.max_steps_per_turn, self.prereq = backend, max_steps_per_turn, prereq
        self.name = f"bfcl_memory_{backend}"
        self.options = benchmark_entry(self.name).options  # prereq (the config checks it)
        self.synthesizer = MemoryTemplateSynthesizer(backend, self.leak_reason, synth_workdir)

    def seeds(self, split: Split) -> list[MemoryTask]:
        return load_memory_seeds(split)

    def leak_reason(self, task: MemoryTask) -> str | None:
        return memory_leak_guard().reason(task)

    def environment(self, task: MemoryTask, workdir: Path) -> MemoryEnvironment:
        return MemoryEnvironment(
            task, self.backend, workdir, max_steps_per_turn=self.max_steps_per_turn, prereq=self.prereq
        )

    def reference_policy(self, task: MemoryTask) -> Player:
        return reference_policy(task, self.backend)

    def verify(self, task: MemoryTask, workdir: Path) -> Verdict:
        blank = blank_answers(task.answers)
        if blank:
            return Verdict(False, None, blank)
        return verify_with(self, task, workdir)

    def render(self, task: MemoryTask) -> str:
        turns = sum(len(s) for s in task.sessions)
        lines = [
            f"**{task.id}** · memory ({self.backend}) · scenario {task.scenario}",
            f"*{len(task.sessions)} prerequisite conversations, {turns} user turns*",
            "",
            f"**Question:** {task.question}",
            f"**Accepted answers:** {', '.join(f'`{a}`' for a in task.answers)}",
        ]
        if task.source:
            lines.append(f"**Where the conversation says it:** {task.source}")
        return "\n\n".join(line for line in lines if line)  # one paragraph each: Markdown joins single lines

    def group_of(self, task: MemoryTask) -> str:
        return task.scenario


def kv_memory(
    *, options: MemoryOptions = MemoryOptions(), max_steps_per_turn: int = 4, scratch: Path | None = None
) -> BfclMemory:
    """The registry's bfcl_memory_kv (rods_core/config/benchmark_entries.py): `options` its validated options;
    `scratch`: its synthesizer's workdir."""
    return BfclMemory("kv", max_steps_per_turn=max_steps_per_turn, prereq=options.prereq, synth_workdir=scratch)


def rec_sum_memory(
    *, options: MemoryOptions = MemoryOptions(), max_steps_per_turn: int = 4, scratch: Path | None = None
) -> BfclMemory:
    """The registry's bfcl_memory_rec_sum (rods_core/config/benchmark_entries.py): `options` its validated options;
    `scratch`: its synthesizer's workdir."""
    return BfclMemory("rec_sum", max_steps_per_turn=max_steps_per_turn, prereq=options.prereq, synth_workdir=scratch)

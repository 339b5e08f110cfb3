"""BFCL v4 memory tasks: one question with the prerequisite conversations it asks about, the 155 seeds from
bfcl-eval's data, their split by scenario, and the leak guard."""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from importlib import resources
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rods_core.benchmarks.memory.answers import answer_matches
from rods_core.benchmarks.protocols import Split
from rods_core.benchmarks.provenance import Provenance
from rods_core.ids import check_task_id

SCENARIOS: tuple[str, ...] = ("customer", "finance", "healthcare", "notetaker", "student")
# Split by scenario, not by question: the questions of a scenario share its prerequisite conversations, so a
# test question's facts would reach training through any train question of the same scenario.
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
TEST_SCENARIOS = frozenset({"healthcare", "student"})  # 75 test questions; customer, finance, notetaker: 80 train
# BFCL's scenarios have at most 10; each session writes snapshot files when played, so an edit or imported
# task of thousands of one-line sessions would hold the step boundary for its verification (~3 ms a session)
MAX_SESSIONS = 100


class MemoryTask(BaseModel):
    """One BFCL v4 memory question with the prerequisite conversations whose facts it asks about."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="letters, digits and _ only (BFCL's `memory_3-customer-3` becomes memory_3_customer_3)")
    scenario: str = Field(description="one of BFCL's five: customer, finance, healthcare, notetaker, student")
    question: str = Field(min_length=1, description="the question asked in the final session")
    answers: list[str] = Field(min_length=1, description="accepted answers; any one found in the reply passes")
    source: str = Field("", description="BFCL's excerpt of the conversation that holds the answer")
    sessions: list[Annotated[list[str], Field(min_length=1)]] = Field(
        min_length=1,
        max_length=MAX_SESSIONS,
        description="the prerequisite conversations: user turns each (at least one a conversation)",
    )
    provenance: Provenance = Field(default_factory=Provenance)

    @field_validator("id", mode="before")
    @classmethod
    def _id_rule(cls, v: Any) -> Any:
        return check_task_id(v) if isinstance(v, str) else v

    @field_validator("scenario")
    @classmethod
    def _known_scenario(cls, v: str) -> str:
        if v not in SCENARIOS:
            raise ValueError(f"unknown scenario {v!r}; known: {list(SCENARIOS)} (BFCL's memory system prompts)")
        return v

    # ----- what the training path asks of any task (the buffer, the store) ----------------------------
    def content_key(self) -> str:
        """A hash of what the agent sees and must answer, insensitive to id, case and whitespace (the buffer
        and the synthesis door recognise the same task under another id by it)."""
        sessions = [[_norm(u) for u in s] for s in self.sessions]
        return _key({"q": _norm(self.question), "a": sorted(_norm(a) for a in self.answers), "s": sessions})

    def to_record(self) -> dict:
        """The task as JSON-ready data (`MemoryTask.model_validate` reads it back)."""
        return self.model_dump(mode="json")


# ----- seeds and split -------------------------------------------------------------------------------
def _jsonl(*parts: str) -> list[dict]:
    text = resources.files("bfcl_eval").joinpath("data", *parts).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def _all_seeds() -> tuple[MemoryTask, ...]:
    answers = {a["id"]: a for a in _jsonl("possible_answer", "BFCL_v4_memory.json")}
    sessions = {
        s: [[m["content"] for turn in e["question"] for m in turn if m["role"] == "user"] for e in entries]
        for s in SCENARIOS
        for entries in [_jsonl("memory_prereq_conversation", f"memory_{s}.json")]
    }
    tasks = []
    for q in _jsonl("BFCL_v4_memory.json"):
        a = answers[q["id"]]
        text = "\n".join(m["content"] for turn in q["question"] for m in turn if m["role"] == "user")
        tasks.append(
            MemoryTask(
                id=q["id"].replace("-", "_"),
                scenario=q["scenario"],
                question=text,
                answers=a["ground_truth"],
                source=a.get("source", ""),
                sessions=sessions[q["scenario"]],
            )
        )
    return tuple(tasks)


def split_of(task: MemoryTask) -> str:
    return "test" if task.scenario in TEST_SCENARIOS else "train"


def load_memory_seeds(split: Split = "train") -> list[MemoryTask]:
    """BFCL v4 memory questions of a split (copies: callers may change them)."""
    return [t.model_copy(deep=True) for t in _all_seeds() if split == "all" or split_of(t) == split]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:32]


class MemoryLeakGuard:
    """A task belongs to the test split if its id, scenario, question or any prerequisite conversation is a
    test scenario's (a copied test task is caught under any id or scenario name)."""

    def __init__(self) -> None:
        test = load_memory_seeds("test")
        self.ids = {t.id for t in test}
        self.questions = {_key(_norm(t.question)) for t in test}
        self.sessions = {_key([_norm(u) for u in s]) for t in test for s in t.sessions}

    def reason(self, task: MemoryTask) -> str | None:
        if task.id in self.ids:
            return f"id {task.id} is in the test split"
        if task.scenario in TEST_SCENARIOS:
            return f"scenario {task.scenario} is held out for testing"
        if _key(_norm(task.question)) in self.questions:
            return "same question as a test-split task"
        if any(_key([_norm(u) for u in s]) in self.sessions for s in task.sessions):
            return "a prerequisite conversation of a test scenario"
        return None


@cache
def memory_leak_guard() -> MemoryLeakGuard:
    return MemoryLeakGuard()


def grounded_fact(task: MemoryTask) -> tuple[int, str] | None:
    """(prerequisite user-turn index, the sentence) where the conversation first states an accepted answer."""
    turns = [u for s in task.sessions for u in s]
    for i, text in enumerate(turns):
        for sentence in _SENTENCE.split(text):
            if answer_matches(sentence, task.answers):
                return i, sentence[:1900]  # kv's archival entries hold 2,000 characters
    return None


def fact_session(task: MemoryTask) -> int | None:
    """The prerequisite conversation that first states an accepted answer (None if none says it verbatim)."""
    found = grounded_fact(task)
    if found is None:
        return None
    sizes = [len(s) for s in task.sessions]
    return next(i for i in range(len(sizes)) if sum(sizes[: i + 1]) > found[0])

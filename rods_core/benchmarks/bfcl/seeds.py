"""The 800 BFCL v3 multi-turn seed tasks, their deterministic train/test split, and the leak guard.

Split: the four categories are built from the same 200 scenarios (multi_turn_miss_param_17 is
multi_turn_base_17 with a value withheld), so the split is made on the scenario index, not per task:
an index goes to train in every category or to test in every category, and no test scenario leaks into
training through a sibling category. The 100 train indices are the 100 smallest by
sha256("rods-split-v1:<index>"), giving 100 train + 100 test tasks per category, 400 + 400 in all.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources

from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.protocols import Split
from rods_core.config import CATEGORIES

SPLIT_SALT = "rods-split-v1"
N_SCENARIOS = 200


def _data(name: str):
    return resources.files("bfcl_eval").joinpath("data", name)


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@cache
def _all_seeds() -> tuple[Task, ...]:
    tasks = []
    for cat in CATEGORIES:
        fname = f"BFCL_v4_multi_turn_{cat}.json"
        answers = {a["id"]: a for a in _jsonl(_data("possible_answer").joinpath(fname))}
        for q in _jsonl(_data(fname)):
            tasks.append(Task.from_bfcl(q, answers[q["id"]]))
    return tuple(tasks)


def scenario_index(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


@cache
def train_indices() -> frozenset[int]:
    ranked = sorted(range(N_SCENARIOS), key=lambda i: hashlib.sha256(f"{SPLIT_SALT}:{i}".encode()).hexdigest())
    return frozenset(ranked[: N_SCENARIOS // 2])


def split_of(task_id: str) -> str:
    """'train' or 'test' for a BFCL seed id."""
    return "train" if scenario_index(task_id) in train_indices() else "test"


def load_seeds(split: Split = "train", categories: tuple[str, ...] | None = None) -> list[Task]:
    """BFCL seeds of a split (copies: callers may change them freely)."""
    cats = set(categories or CATEGORIES)
    return [
        t.model_copy(deep=True)
        for t in _all_seeds()
        if t.category in cats and (split == "all" or split_of(t.id) == split)
    ]


def _question_key(task: Task) -> str:
    text = " ".join(" ".join(u.lower().split()) for u in task.user_texts if u)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class LeakGuard:
    """Answers whether a task belongs to the held-out test split, by id or by normalised content.

    Content means either the whole task (user turns + ground truth + initial state) or the user turns
    alone, so a test task re-imported under another id, or with its calls rewritten, is still caught.
    """

    def __init__(self) -> None:
        test = load_seeds("test")
        self.ids = {t.id for t in test}
        self.content = {t.content_key() for t in test}
        self.questions = {_question_key(t) for t in test}

    def is_test(self, task: Task) -> bool:
        return self.reason(task) is not None

    def reason(self, task: Task) -> str | None:
        if task.id in self.ids:
            return f"id {task.id} is in the test split"
        if task.content_key() in self.content:
            return "same content as a test-split task"
        if _question_key(task) in self.questions:
            return "same user turns as a test-split task"
        return None


@cache
def leak_guard() -> LeakGuard:
    return LeakGuard()


def _exact_key(task: Task) -> str:
    rec = task.model_dump(mode="json", exclude={"id", "provenance"})
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()


@cache
def _bfcl_keys() -> frozenset[str]:
    return frozenset(_exact_key(t) for t in _all_seeds())


def is_bfcl_task(task: Task) -> bool:
    """True when every field but the id and provenance equals one of BFCL's own 800 tasks."""
    return _exact_key(task) in _bfcl_keys()

"""BFCL multi-turn's task model, and its JSONL form (read and written by rods_core.benchmarks.task_files).

A task is one BFCL-style multi-turn episode: user turns, the initial state of the API classes, the
ground-truth calls per turn and the functions held back (miss_func). Provenance records where it came
from (a BFCL seed, a synthesized variant, an import or a researcher's edit). The JSONL form is BFCL's
question record with the answer's `ground_truth` and our `provenance` merged in, so a BFCL question +
answer pair round-trips and a file can be read back by `datasets.load_dataset("json", ...)`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rods_core.benchmarks.provenance import Provenance, Source
from rods_core.config import CATEGORIES, Category
from rods_core.ids import check_task_id

# The eight BFCL multi-turn API classes (the memory and web-search classes belong to other suites).
API_CLASSES: tuple[str, ...] = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "system"] = "user"
    content: str


class Task(BaseModel):
    """One multi-turn tool-use task (a BFCL v3 multi-turn entry, or a variant of one)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="letters, digits and _ only (rods_core.ids): bfcl-eval builds Python names from it")
    category: Category
    question: list[list[Message]] = Field(
        description="user turns; each a list of messages (empty where a miss_func function arrives)"
    )
    initial_config: dict[str, Any] = Field(default_factory=dict)
    involved_classes: list[str] = Field(min_length=1)
    ground_truth: list[list[str]] = Field(description="the expected call strings, one list per turn")
    missed_function: dict[int, list[str]] = Field(
        default_factory=dict, description="turn index -> functions that become available at that turn"
    )
    excluded_function: list[str] = Field(default_factory=list)
    path: list[str] = Field(default_factory=list, description="BFCL's annotated call path")
    provenance: Provenance = Field(default_factory=Provenance)

    @field_validator("id", mode="before")
    @classmethod
    def _id_rule(cls, v: Any) -> Any:
        return check_task_id(v) if isinstance(v, str) else v  # a non-string is pydantic's to name

    @model_validator(mode="before")
    @classmethod
    def _category_from_id(cls, rec: Any) -> Any:
        """BFCL's own records carry no category: it is read from the id (left missing for pydantic to name)."""
        if isinstance(rec, dict) and "category" not in rec and isinstance(rec.get("id"), str):
            try:
                return {**rec, "category": category_of(rec["id"])}
            except ValueError:
                pass
        return rec

    @field_validator("involved_classes")
    @classmethod
    def _known_classes(cls, v: list[str]) -> list[str]:
        unknown = [c for c in v if c not in API_CLASSES]
        if unknown:
            raise ValueError(f"unknown API class(es) {unknown}; known: {list(API_CLASSES)}")
        return v

    @field_validator("missed_function", mode="before")
    @classmethod
    def _int_keys(cls, v: Any) -> Any:
        # BFCL writes turn indices as JSON object keys, i.e. strings.
        if isinstance(v, dict):
            try:
                return {int(k): fns for k, fns in v.items()}
            except (TypeError, ValueError) as e:
                raise ValueError("turn indices must be integers") from e
        return v

    @model_validator(mode="after")
    def _turns_agree(self) -> Task:
        if len(self.question) != len(self.ground_truth):
            raise ValueError(f"question has {len(self.question)} turns but ground_truth has {len(self.ground_truth)}")
        bad = [t for t in self.missed_function if not 0 <= t < len(self.question)]
        if bad:
            raise ValueError(f"missed_function turn(s) {bad} out of range 0..{len(self.question) - 1}")
        return self

    # ----- derived views -----------------------------------------------------------------------
    @property
    def n_turns(self) -> int:
        return len(self.question)

    @property
    def user_texts(self) -> list[str]:
        """The user's words per turn ("" for a turn without a message)."""
        return ["\n".join(m.content for m in turn if m.role == "user") for turn in self.question]

    @property
    def n_calls(self) -> int:
        return sum(len(t) for t in self.ground_truth)

    def held_back_until(self) -> dict[str, int]:
        """Function name -> the turn at which it becomes available."""
        return {fn: turn for turn, fns in self.missed_function.items() for fn in fns}

    def content_key(self) -> str:
        """A hash of what the agent sees and must do, insensitive to ids, case and whitespace.

        Used by the leak guard and the synthesis critic to recognise the same task under another id.
        """
        norm = {
            "q": [" ".join(t.lower().split()) for t in self.user_texts],
            "gt": [[c.replace(" ", "") for c in turn] for turn in self.ground_truth],
            "cfg": self.initial_config,
        }
        blob = json.dumps(norm, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    # ----- BFCL interchange ---------------------------------------------------------------------
    @classmethod
    def from_bfcl(cls, question: dict, answer: dict, source: Source = "seed") -> Task:
        """Build from a BFCL question record and its possible_answer record."""
        if question.get("id") != answer.get("id"):
            raise ValueError(f"question id {question.get('id')!r} != answer id {answer.get('id')!r}")
        rec = {k: v for k, v in question.items() if k in cls.model_fields}
        rec.setdefault("category", category_of(question["id"]))
        rec["ground_truth"] = answer["ground_truth"]
        rec.setdefault("provenance", {"source": source})
        return cls.model_validate(rec)

    def to_bfcl(self) -> tuple[dict, dict]:
        """The (question, answer) records BFCL itself reads."""
        q = self.to_record()
        for k in ("ground_truth", "provenance", "category"):
            q.pop(k)
        for optional in ("missed_function", "excluded_function"):  # BFCL omits them when empty
            if not q[optional]:
                q.pop(optional)
        return q, {"id": self.id, "ground_truth": self.ground_truth}

    def to_record(self) -> dict:
        rec = self.model_dump(mode="json")
        rec["missed_function"] = {str(k): v for k, v in self.missed_function.items()}
        return rec


def category_of(task_id: str) -> str:
    """'multi_turn_miss_param_12' -> 'miss_param'."""
    stem = task_id.removeprefix("multi_turn_").rsplit("_", 1)[0]
    if stem not in CATEGORIES:
        raise ValueError(f"cannot infer a category from id {task_id!r}; give 'category' explicitly")
    return stem

"""A BFCL v4 memory episode as an Environment: the policy plays the prerequisite conversations (storing
facts with memory tools), then answers the question in a fresh session; the answer is checked as BFCL does.

An episode is a chain of sessions, as BFCL runs a scenario: each prerequisite conversation, then the
question, each opened by BFCL's memory system prompt with the memory's current content (the core memory
for kv, the whole memory for rec_sum). State carries between sessions in this episode's own backend
instance; BFCL's snapshot files are written after each prerequisite session, under the caller's folder.
Backends: kv (MemoryAPI_kv, BM25 key search via rank_bm25) and rec_sum (MemoryAPI_rec_sum); not vector
(MemoryAPI_vector needs a sentence-transformers model and faiss, which cannot be fetched here).
Departures from BFCL: a tool-call message that does not parse is an error observation (BFCL's decoder
would take its text as the final answer); progress equals accuracy (one final-answer check per episode).
"""

from __future__ import annotations

import importlib
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Literal

from bfcl_eval.constants.default_prompts import (
    MEMORY_AGENT_SETTINGS,
    MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL,
    MEMORY_BACKEND_INSTRUCTION_UNIFIED,
)
from bfcl_eval.utils import ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT as AGENTIC_FORMAT

from rods_core.benchmarks.memory.answers import answer_matches
from rods_core.benchmarks.memory.options import Prereq
from rods_core.benchmarks.memory.tasks import MemoryTask, fact_session
from rods_core.benchmarks.protocols import EpisodeScore, Message, Player, Step
from rods_core.benchmarks.toolcalls.chat import ParsedMessage, tool_message
from rods_core.benchmarks.toolcalls.dispatch import ERROR_PREFIX, ToolDoc, execute, load_docs, tool_schema
from rods_core.benchmarks.toolcalls.messages import read_message
from rods_core.config import PromptConfig

Backend = Literal["kv", "rec_sum"]
_BACKENDS = {"kv": ("memory_kv", "MemoryAPI_kv"), "rec_sum": ("memory_rec_sum", "MemoryAPI_rec_sum")}
_SOURCE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
REFERENCE_KEY = "answer_fact"  # the key the reference policy stores the answer under (kv)


@cache
def backend_docs(backend: Backend) -> dict[str, ToolDoc]:
    """The documented memory tools of a backend (BFCL's multi_turn_func_doc/memory_<backend>.json)."""
    return load_docs(f"memory_{backend}.json")


def backend_class(backend: Backend) -> type:
    if backend not in _BACKENDS:
        raise ValueError(f"unknown memory backend {backend!r}; choose one of {sorted(_BACKENDS)}")
    module, cls = _BACKENDS[backend]
    return getattr(importlib.import_module(f"{_SOURCE}.{module}"), cls)


def system_prompt(backend: Backend, scenario: str, memory_content: str, question: bool) -> str:
    """BFCL's memory system prompt (model_handler.utils.add_memory_instruction_system_prompt), with the
    agentic answer format appended for the question session."""
    template = MEMORY_BACKEND_INSTRUCTION_UNIFIED if backend == "rec_sum" else MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL
    text = template.format(scenario_setting=MEMORY_AGENT_SETTINGS[scenario], memory_content=memory_content)
    return f"{text}\n\n{AGENTIC_FORMAT}" if question else text


def played_sessions(task: MemoryTask, prereq: Prereq) -> list[list[str]]:
    """The prerequisite conversations an episode plays: all (BFCL), or only the one that states the answer
    (a shorter episode for small models; all of them when no conversation states it verbatim)."""
    if prereq not in ("all", "fact"):
        raise ValueError(f"prereq must be 'all' or 'fact', got {prereq!r}")
    at = fact_session(task) if prereq == "fact" else None
    return task.sessions if at is None else [task.sessions[at]]


class MemoryEnvironment:
    """One memory episode: the prerequisite sessions, then the question, on this episode's own backend."""

    def __init__(
        self, task: MemoryTask, backend: Backend, workdir: Path, *, max_steps_per_turn: int = 4, prereq: Prereq = "all"
    ):
        self.task, self.backend, self.max_steps = task, backend, max_steps_per_turn
        self.sessions = played_sessions(task, prereq)
        self.prompt = PromptConfig(result_chars=None)  # BFCL shows tool results whole
        self.docs = backend_docs(backend)
        self.memory = backend_class(backend)()
        self.folder = self._snapshot_root(Path(workdir))
        self.memory._load_scenario(self._config(0))
        if not Path(self.memory.snapshot_folder).resolve().is_relative_to(self.folder):
            raise RuntimeError(f"memory snapshots would be written outside {self.folder}")
        self.session, self.turn, self.steps = 0, 0, 0
        self.answer: str | None = None
        self.done = False

    def _snapshot_root(self, workdir: Path) -> Path:
        """A folder of this episode's own under `workdir` (BFCL names snapshot files by scenario, so two
        episodes of one scenario must not share a folder)."""
        workdir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{self.task.id}_", dir=workdir)).resolve()

    def _config(self, session: int) -> dict:
        """BFCL's initial config for a prerequisite entry (utils.populate_initial_settings_for_memory_test_cases)."""
        test_id = f"memory_{self.backend}_prereq_{session}-{self.task.scenario}-{session}"
        return {"model_result_dir": self.folder, "test_id": test_id, "scenario": self.task.scenario}

    # ----- the protocol ------------------------------------------------------------------------
    def tools(self) -> list[dict]:
        return [tool_schema(d) for d in self.docs.values()]

    def reset(self) -> list[Message]:
        return self._open_session()

    def step(self, message: Message) -> Step:
        if self.done:
            return Step([], True)
        parsed = read_message(message)
        if parsed.is_tool_call:
            self.steps += 1
            msgs = self._run_calls(parsed)
            if self.steps < self.max_steps:
                return Step(msgs, False)
        else:
            msgs = []
            if self._in_question():
                self.answer = parsed.text
        return self._end_turn(msgs)

    def finish(self) -> None:
        self.done = True

    def score(self) -> EpisodeScore:
        ok = self.answer is not None and answer_matches(self.answer, self.task.answers)
        reason = "no final answer" if self.answer is None else ("" if ok else "no accepted answer in the reply")
        return EpisodeScore(float(ok), ok, [{"check": "answer", "checked": True, "passed": ok, "reason": reason}])

    # ----- sessions and turns ------------------------------------------------------------------
    def _in_question(self) -> bool:
        return self.session == len(self.sessions)

    def _user_text(self) -> str:
        return self.task.question if self._in_question() else self.sessions[self.session][self.turn]

    def _open_session(self) -> list[Message]:
        content = self.memory._dump_core_memory_to_context()
        prompt = system_prompt(self.backend, self.task.scenario, content, self._in_question())
        return [{"role": "system", "content": prompt}, {"role": "user", "content": self._user_text()}]

    def _end_turn(self, msgs: list[Message]) -> Step:
        self.turn, self.steps = self.turn + 1, 0
        if self._in_question():
            self.done = True
            return Step(msgs, True)
        if self.turn < len(self.sessions[self.session]):
            return Step([*msgs, {"role": "user", "content": self._user_text()}], False)
        self._flush()
        self.session, self.turn = self.session + 1, 0
        return Step(self._open_session(), False, new_session=True)

    def _flush(self) -> None:
        """Write BFCL's snapshot files for the session just ended, inside this episode's folder."""
        self.memory.test_id = self._config(self.session)["test_id"]
        self.memory._flush_memory_to_local_file()

    def _run_calls(self, parsed: ParsedMessage) -> list[Message]:
        if parsed.error:
            results = [ERROR_PREFIX + f"could not parse tool call: {parsed.error}"]
        else:
            results = [execute(self.memory, self.docs, c)[0] for c in parsed.calls]
        return [tool_message(r, self.prompt.result_chars) for r in results]


# ----- the reference path ----------------------------------------------------------------------------
def _tool_call(name: str, **arguments: str) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _reference_calls(backend: Backend, answer: str) -> tuple[dict, dict]:
    """(store call, retrieve call) of the reference path as OpenAI-style tool calls (so a demonstration
    renders in any chat template): the answer kept in long-term memory, read back."""
    if backend == "kv":
        return (
            _tool_call("archival_memory_add", key=REFERENCE_KEY, value=answer),
            _tool_call("archival_memory_retrieve", key=REFERENCE_KEY),
        )
    return _tool_call("memory_append", text=answer), _tool_call("memory_retrieve")


def reference_policy(task: MemoryTask, backend: Backend, *, fact: str | None = None, at: int = 0) -> Player:
    """Stores `fact` (the first accepted answer by default) at the `at`-th prerequisite user turn, says
    "Noted." to every other turn, and at the question retrieves it and answers in BFCL's format with what
    the memory returned (so the reply depends on state carried across sessions)."""
    store, retrieve = _reference_calls(backend, task.answers[0] if fact is None else fact)
    turns_seen = 0

    def policy(convo: list[Message]) -> Message:
        nonlocal turns_seen
        last, question = convo[-1], AGENTIC_FORMAT in convo[0]["content"]
        if last["role"] == "tool" and question:
            value = next(iter(json.loads(last["content"]).values()))
            return {"role": "assistant", "content": str({"answer": value, "context": "from my memory"})}
        if last["role"] == "user":
            turns_seen += not question
            if question or turns_seen - 1 == at:
                return {"role": "assistant", "content": "", "tool_calls": [retrieve if question else store]}
        return {"role": "assistant", "content": "Noted."}

    return policy

"""Structure-matched template variants of memory tasks: the same scenario, conversation topology (sessions and
turns) and question, with the asked fact changed consistently in every session, the question and the answers.

Two templates: a number (`35` and its spelled form `thirty five` become another number everywhere), and a
proper name (`Michael` becomes an invented name everywhere). A variant is kept only if it is grounded (the
new answer is said in the conversation, the old one nowhere) and passes by execution: the reference path
and a grounded path (storing the very sentence of the conversation that states the fact, reading it back
at the question) both score full marks. Departure from the paper's five-stage LLM pipeline: no LLM; the
template changes one fact, so the variant's structure is the parent's by construction.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from rods_core.benchmarks.memory.env import Backend, MemoryEnvironment, reference_policy
from rods_core.benchmarks.memory.tasks import MemoryTask, grounded_fact
from rods_core.benchmarks.protocols import Verdict, play
from rods_core.benchmarks.provenance import Provenance
from rods_core.benchmarks.scratch import scratch_folder
from rods_core.benchmarks.synthesis import SynthResult, listed_result

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
_ONES += "seventeen eighteen nineteen"
ONES = _ONES.split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SYLLABLES = "ka lo mi ra ve to su ne da ri po fe li an or el is um".split()


def number_words(n: int) -> str:
    """0..9999 in words as BFCL's answers spell them: 35 -> "thirty five", 130 -> "one hundred thirty"."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else f" {ONES[n % 10]}")
    if n < 1000:
        return f"{ONES[n // 100]} hundred" + ("" if n % 100 == 0 else f" {number_words(n % 100)}")
    return f"{number_words(n // 1000)} thousand" + ("" if n % 1000 == 0 else f" {number_words(n % 1000)}")


def _pattern(value: str) -> re.Pattern:
    """`value` as a whole token: not inside a word, nor a digit group (35 in 3.5, 350 or 1,035)."""
    return re.compile(rf"(?<![\w])(?<![\d][.,]){re.escape(value)}(?![\w])(?![.,]\d)", re.I)


def _in(text: str, value: str) -> bool:
    return bool(_pattern(value).search(text))


def _same_case(new: str, like: str) -> str:
    return new[:1].upper() + new[1:] if like[:1].isupper() else new


@dataclass(frozen=True)
class Substitution:
    """One fact changed: each old form and its replacement (applied everywhere), and the new answers."""

    forms: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]
    note: str


def _all_text(task: MemoryTask) -> str:
    return "\n".join([*(u for s in task.sessions for u in s), task.question])


def number_plan(task: MemoryTask, rng: random.Random) -> Substitution | None:
    """A numeric fact: every accepted answer is the number or its words; it is said in the conversation."""
    # ASCII digits, at most four: `isdigit` alone admits "²" (int() refuses it) and int() refuses 4,300+ digits
    digits = [a.strip() for a in task.answers if a.strip().isascii() and a.strip().isdigit()]
    if not digits or len(digits[0]) > 4:
        return None
    n = int(digits[0])
    if any(a.strip() != str(n) and a.strip().lower() != number_words(n) for a in task.answers):
        return None
    text = _all_text(task)
    if not _in(text, str(n)):
        return None
    pool = [m for m in range(max(2, n // 2), 2 * n + 6) if m != n and not _in(text, str(m))]
    pool = [m for m in pool if not _in(text, number_words(m))]
    if not pool:
        return None
    m = rng.choice(pool)
    answers = tuple(str(m) if a.strip().isdigit() else _same_case(number_words(m), a) for a in task.answers)
    return Substitution(((str(n), str(m)), (number_words(n), number_words(m))), answers, f"number {n} -> {m}")


def _invented_name(rng: random.Random, words: int) -> str:
    return " ".join(
        "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize() for _ in range(words)
    )


def name_plan(task: MemoryTask, rng: random.Random) -> Substitution | None:
    """A proper name (every word capitalized, letters only) that is the only accepted answer and is said."""
    if len(task.answers) != 1:
        return None
    old = task.answers[0].strip()
    words = old.split()
    if not words or not all(w[:1].isupper() and w.isalpha() for w in words):
        return None
    text = _all_text(task)
    if not _in(text, old):
        return None
    for _ in range(20):
        new = _invented_name(rng, len(words))
        if not _in(text, new):
            return Substitution(((old, new),), (new,), f"name {old} -> {new}")
    return None


PLANS: tuple[Callable[[MemoryTask, random.Random], Substitution | None], ...] = (number_plan, name_plan)


def apply(task: MemoryTask, sub: Substitution, variant_id: str) -> MemoryTask:
    """The task with every form replaced in the sessions, the question and the source; new answers."""

    def swap(text: str) -> str:
        for old, new in sub.forms:
            text = _pattern(old).sub(lambda m, new=new: _same_case(new, m.group()), text)
        return text

    return task.model_copy(
        update={
            "id": variant_id,
            "sessions": [[swap(u) for u in s] for s in task.sessions],
            "question": swap(task.question),
            "source": swap(task.source),
            "answers": list(sub.answers),
            "provenance": Provenance(source="synth", parent_id=task.id, note=f"template: {sub.note}"),
        },
        deep=True,
    )


def check_variant(
    parent: MemoryTask, variant: MemoryTask, sub: Substitution, backend: Backend, workdir: Path
) -> Verdict:
    """Structure kept, fact changed consistently, and both execution paths score full marks."""
    if [len(s) for s in variant.sessions] != [len(s) for s in parent.sessions] or variant.scenario != parent.scenario:
        return Verdict(False, None, "conversation topology changed")
    text = _all_text(variant)
    stale = [old for old, _ in sub.forms if _in(text, old) or any(_in(a, old) for a in variant.answers)]
    if stale:
        return Verdict(False, None, f"old value(s) {stale} still in the task")
    grounded = grounded_fact(variant)
    if grounded is None:
        return Verdict(False, None, "no accepted answer is said in the conversation")
    at, sentence = grounded
    for policy in (reference_policy(variant, backend), reference_policy(variant, backend, fact=sentence, at=at)):
        score = play(MemoryEnvironment(variant, backend, workdir), policy)
        if not score.accuracy:
            return Verdict(False, score, f"an execution path failed: {score.detail}")
    return Verdict(True, score)


class MemoryTemplateSynthesizer:
    """Variants of a memory task by the number and name templates, each checked by `check_variant` in a fresh
    folder made inside `workdir` (a run's scratch folder; the system's temporary folder when None), removed
    after each call."""

    def __init__(self, backend: Backend, leak_reason: Callable[[MemoryTask], str | None], workdir: Path | None = None):
        self.backend, self.leak_reason, self.workdir = backend, leak_reason, workdir

    def variants(self, task: MemoryTask, n: int, seed: int, pool_keys: Collection[str] = ()) -> SynthResult:
        return listed_result(task.id, self.verified(task, n, seed), n, pool_keys)

    def verified(self, task: MemoryTask, n: int, seed: int) -> list[MemoryTask]:
        """Up to n template variants of the task that pass `check_variant` and the leak guard."""
        why = self.leak_reason(task)
        if why:
            raise ValueError(f"{task.id}: not a synthesis parent: {why}")
        rng = random.Random(f"{task.id}:{seed}")
        with scratch_folder(self.workdir, "rods_memory_verify_") as workdir:
            out: list[MemoryTask] = []
            for attempt in range(3 * n):
                sub = next((s for plan in PLANS if (s := plan(task, rng))), None)
                if sub is None or len(out) >= n:
                    break
                variant = apply(task, sub, f"{task.id}_s{seed}_{attempt}")
                if any(v.answers == variant.answers for v in out):
                    continue
                if check_variant(task, variant, sub, self.backend, workdir).ok and not self.leak_reason(variant):
                    out.append(variant)
        return out

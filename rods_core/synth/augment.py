"""Stage 5, Augment: give a verified base-form variant its parent's category, as BFCL builds them.

BFCL derives each miss_param / miss_func / long_context task from a base task (checked on all 200
scenarios): miss_param asks without a value, adds an empty-ground-truth turn where the agent must ask,
and a user turn that supplies it; miss_func holds a function back, the request's calls move to an
inserted turn with no user message at which the function arrives (`missed_function`); long_context is
the same task loaded with `long_context=True`, which enlarges the classes' state. Here the same edits
are redone at the position the parent had them; long_context may also get distractor files. The
result is checked again: the parent's signature, a clean replay, and the leak guard.
"""

from __future__ import annotations

import random

from rods_core.seeds import leak_guard
from rods_core.signature import Signature
from rods_core.synth.critique import replays_clean, same_structure
from rods_core.synth.plan import AugmentSpec
from rods_core.synth.samplers import WORDS
from rods_core.synth.stages import StageError
from rods_core.tasks import Message, Task


def _turn(text: str) -> list[Message]:
    return [Message(content=text)] if text else []


def apply_category(base: Task, segments: list[list[str]], spec: AugmentSpec) -> Task:
    """The base-form variant turned into the parent's category (no checks)."""
    question = [_turn(" ".join(s)) for s in segments]
    gt = [list(g) for g in base.ground_truth]
    missed: dict[int, list[str]] = {}
    t = spec.turn
    if spec.category == "miss_param":
        if t is None or len(segments[t]) != 2 or not all(x.strip() for x in segments[t]):
            raise StageError("augment", "miss_param needs the request split into an ask and a supply part")
        question[t : t + 1] = [_turn(segments[t][0]), _turn(segments[t][1])]
        gt[t : t + 1] = [[], gt[t]]
    elif spec.category == "miss_func":
        if t is None or not spec.functions:
            raise StageError("augment", "miss_func needs a turn and the functions to hold back")
        question[t : t + 1] = [_turn(" ".join(segments[t])), []]
        gt[t : t + 1] = [[], gt[t]]
        missed = {t + 1: list(spec.functions)}
    return base.model_copy(
        update={"category": spec.category, "question": question, "ground_truth": gt, "missed_function": missed},
        deep=True,
    )


def add_distractors(task: Task, n: int, rng: random.Random) -> Task:
    """Add `n` unrelated files across the file system's directories (long_context only)."""
    fs = task.initial_config.get("GorillaFileSystem", {}).get("root")
    if n <= 0 or not isinstance(fs, dict):
        return task
    cfg = task.model_copy(deep=True).initial_config
    dirs, stack = [], [cfg["GorillaFileSystem"]["root"]]
    while stack:
        for entry in stack.pop().values():
            if isinstance(entry, dict) and entry.get("type") == "directory":
                dirs.append(entry.setdefault("contents", {}))
                stack.append(entry["contents"])
    for _ in range(n if dirs else 0):
        contents = rng.choice(dirs)
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{rng.randint(1, 999)}.log"
        contents.setdefault(name, {"type": "file", "content": f"{rng.choice(WORDS)} {rng.choice(WORDS)} log entry."})
    return task.model_copy(update={"initial_config": cfg})


def augment(
    base: Task,
    segments: list[list[str]],
    spec: AugmentSpec,
    parent_sig: Signature,
    *,
    distractors: int = 0,
    rng: random.Random | None = None,
) -> Task:
    """The final variant in the parent's category, re-verified; raises StageError('augment', why)."""
    task = apply_category(base, segments, spec)
    if spec.category == "long_context" and distractors:
        task = add_distractors(task, distractors, rng or random.Random(0))
    if task.model_dump(exclude={"category"}) == base.model_dump(exclude={"category"}) and (
        task.category == base.category
    ):
        return task  # nothing changed since Critique checked this very task
    same_structure(task, parent_sig, stage="augment")
    replays_clean(task, stage="augment")
    leak = leak_guard().reason(task)
    if leak:
        raise StageError("augment", f"test-split collision: {leak}")
    return task

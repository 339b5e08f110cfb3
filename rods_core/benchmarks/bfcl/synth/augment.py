"""Stage 5, Augment: the verified base-form variant gets its parent's category and a perturbed state.

Category, as BFCL builds it from a base task (checked on all 200 scenarios): miss_param asks without a
value, adds an empty-ground-truth turn where the agent must ask, and a user turn that supplies it;
miss_func holds a function back, the request's calls move to an inserted turn with no user message at
which the function arrives (`missed_function`); long_context is the same task loaded with
`long_context=True` (the category does that), plus optional distractor files here. Base has no edit.
State, every category: files no call and no word uses are renamed, and TradingBot / TravelAPI balances
the user does not state rise a little, so `ls`, `find` and account reads return something the parent's
did not while the request stays the same. (Plan adds files and folders: samplers draw from them.) Other classes'
state (vehicle, messages, tickets, tweets) is left alone: each of its fields is something a task names
or acts on, so changing it changes the task, which is Plan's business.
Then the candidate is checked again: the plan is executed anew on the new state and must give the same
ground truth (a renamed file that moves a value the task reads from a listing rejects it); a category
edit must keep the parent's signature and replay cleanly; the leak guard.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from rods_core.benchmarks.bfcl.seeds import leak_guard
from rods_core.benchmarks.bfcl.signature import Signature
from rods_core.benchmarks.bfcl.synth.critique import replays_clean, same_structure
from rods_core.benchmarks.bfcl.synth.execute import Execution, execute
from rods_core.benchmarks.bfcl.synth.plan import AugmentSpec, Plan
from rods_core.benchmarks.bfcl.synth.samplers import WORDS
from rods_core.benchmarks.bfcl.synth.values import is_mentioned
from rods_core.benchmarks.bfcl.tasks import Message, Task
from rods_core.benchmarks.synthesis import StageError


# ----- category ---------------------------------------------------------------------------------------
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


# ----- state ------------------------------------------------------------------------------------------
def _directories(cfg: dict) -> list[dict]:
    """The `contents` of every folder of a file-system config (changed in place by the callers)."""
    root = cfg.get("GorillaFileSystem", {}).get("root")
    out, stack = [], [root] if isinstance(root, dict) else []
    while stack:
        for entry in stack.pop().values():
            if isinstance(entry, dict) and entry.get("type") == "directory":
                out.append(entry.setdefault("contents", {}))
                stack.append(entry["contents"])
    return out


def perturb_state(cfg: dict, rng: random.Random, protected: Callable[[Any], bool]) -> dict:
    """A copy of `cfg` with files no call or word uses renamed and balances the user does not state raised."""
    cfg = copy.deepcopy(cfg)
    for contents in _directories(cfg):
        for name in list(contents):
            entry = contents[name]
            if entry.get("type") == "file" and not name.startswith(".") and not protected(name) and rng.random() < 0.4:
                stem = "_".join(rng.sample(WORDS, 2))
                ext = "." + name.rsplit(".", 1)[1] if "." in name else ""
                if stem + ext not in contents:
                    contents[stem + ext] = contents.pop(name)
    for cls in ("TradingBot", "TravelAPI"):
        _scale_balances(cfg.get(cls), rng, protected)
    return cfg


def _scale_balances(state: Any, rng: random.Random, protected: Callable[[Any], bool]) -> None:
    if not isinstance(state, dict):
        return
    for key, val in state.items():
        if isinstance(val, dict):
            _scale_balances(val, rng, protected)
        elif key == "balance" and isinstance(val, float) and not protected(val):
            state[key] = round(val * rng.uniform(1.0, 1.5), 2)


def add_distractors(cfg: dict, n: int, rng: random.Random) -> dict:
    """A copy of `cfg` with `n` unrelated log files across the file system's folders (long_context)."""
    cfg = copy.deepcopy(cfg)
    dirs = _directories(cfg)
    for _ in range(n if dirs else 0):
        contents = rng.choice(dirs)
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{rng.randint(1, 999)}.log"
        contents.setdefault(name, {"type": "file", "content": f"{rng.choice(WORDS)} {rng.choice(WORDS)} log entry."})
    return cfg


# ----- the stage --------------------------------------------------------------------------------------
class Augmenter:
    """Augment for one parent: its signature, and whether (and how much) to perturb the state."""

    def __init__(self, parent_sig: Signature, *, perturb: bool = True, distractors: int = 0):
        self.parent_sig, self.perturb, self.distractors = parent_sig, perturb, distractors

    def augment(
        self, base: Task, segments: list[list[str]], plan: Plan, execution: Execution, rng: random.Random
    ) -> Task:
        """The final variant in the parent's category on its new state; raises StageError('augment', why)."""
        cfg = self._state(base, segments, execution, rng)
        new_state = cfg != base.initial_config
        if new_state:
            try:
                again = execute(plan, cfg)
            except StageError as e:
                raise StageError("augment", f"the new state breaks the task: {e.reason}") from None
            if again.ground_truth != execution.ground_truth:
                turn = next(
                    t for t, (a, b) in enumerate(zip(again.ground_truth, execution.ground_truth, strict=True)) if a != b
                )
                raise StageError("augment", f"the new state changes a value turn {turn} reads from a result")
            base = base.model_copy(update={"initial_config": cfg})
        task = apply_category(base, segments, plan.base.spec)
        if task.category not in ("base", "long_context"):
            # The turns changed shape since Critique: the structure and the replay are checked again.
            same_structure(task, self.parent_sig, stage="augment")
            replays_clean(task, stage="augment")
        if new_state or task.category != base.category:
            leak = leak_guard().reason(task)
            if leak:
                raise StageError("augment", f"test-split collision: {leak}")
        return task

    def _state(self, base: Task, segments: list[list[str]], execution: Execution, rng: random.Random) -> dict:
        cfg = base.initial_config
        if self.perturb:
            used = {
                str(x) for c in execution.calls for v in c.kwargs.values() for x in (v if isinstance(v, list) else [v])
            }
            words = " ".join(s for segs in segments for s in segs)
            cfg = perturb_state(cfg, rng, lambda v: str(v) in used or is_mentioned(words, v))
        if base.category == "long_context" and self.distractors:
            cfg = add_distractors(cfg, self.distractors, rng)
        return cfg

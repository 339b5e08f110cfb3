"""Stage 1, Plan: which argument values of the parent change, and to what, drawn from the live state.

The parent is first brought to its *base form* (BFCL builds miss_param / miss_func tasks from a base task
by inserting one empty turn; the base form undoes that and remembers where, so Augment can redo it).
Then the parent's ground truth is walked call by call in a scratch environment: each value the user
states is resampled once (samplers.py) and replaced consistently wherever it recurs; each value that
came from an earlier result is re-read at the same place in the new result (a rounded number is
rounded again); a sentence built from such values ("The distance from A to B is X.") follows its
parts; the rest is kept. A failing call first redraws its own new values, then falls back to the
parent's; if the culprit was drawn earlier (a new folder, then a file not in it), the walk restarts
with that value pinned. With `compose` (the rewrite will write the turns from the tool docs) values
the parent only implied may change too, and a call that feeds no later call may swap to a function
of the same class, skill and required arguments (cat -> tail). How many values change is the distance
knob: each changeable value is drawn anew with probability `draw_prob`, and one always is (near: one
value; far: every value, composed turns). Plan dry-runs each call in a scratch environment only to draw
from the state earlier calls leave and to steer away from calls that error; it hands Execute calls,
not results: Execute runs them from scratch and is the stage that judges the execution.
Departure from the paper: planning is a seeded, execution-guided resampling of a real task, not an
LLM proposal.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from rods_core.benchmarks.bfcl.environment import BfclEnvironment, function_docs
from rods_core.benchmarks.bfcl.signature import skill_of
from rods_core.benchmarks.bfcl.synth.samplers import WORDLIKE_CHOICES, WORDS, SampleContext, sample_value
from rods_core.benchmarks.bfcl.synth.values import (
    CallInfo,
    Piece,
    classify,
    is_mentioned,
    leaf_changes,
    looks_failed,
    parse_result,
    pieces_of,
    resolve_dep,
    substitute,
)
from rods_core.benchmarks.bfcl.tasks import Message, Task
from rods_core.benchmarks.synthesis import StageError
from rods_core.benchmarks.toolcalls.parsing import Call


# ----- base form --------------------------------------------------------------------------------------
@dataclass
class AugmentSpec:
    """How the parent's category departs from its base form (redone by Augment)."""

    category: str
    turn: int | None = None  # base-form turn whose request gets split
    functions: list[str] = field(default_factory=list)  # miss_func: held back until the inserted turn
    withheld: list[Any] = field(default_factory=list)  # miss_param: values given only in the supply turn


@dataclass
class BaseForm:
    """A task without its inserted empty turn; a turn's text kept in segments (ask, supply)."""

    task: Task
    segments: list[list[str]]
    spec: AugmentSpec


def base_form(parent: Task) -> BaseForm:
    """Undo BFCL's miss_param / miss_func construction (one empty turn inserted at t)."""
    texts, gt = parent.user_texts, parent.ground_truth
    empty = [t for t, calls in enumerate(gt) if not calls]
    spec = AugmentSpec(parent.category)
    segments = [[x] for x in texts]
    if parent.category in ("miss_param", "miss_func"):
        if len(empty) != 1 or empty[0] + 1 >= len(gt):
            raise StageError("plan", f"{parent.category} parent with {len(empty)} empty turns is not supported")
        t = empty[0]
        if parent.category == "miss_param":
            segments = segments[:t] + [[texts[t], texts[t + 1]]] + segments[t + 2 :]
        else:
            held = parent.missed_function.get(t + 1)
            if not held or texts[t + 1]:
                raise StageError("plan", "miss_func parent without a held function at the turn after its empty turn")
            segments = segments[:t] + [[texts[t]]] + segments[t + 2 :]
            spec.functions = list(held)
        spec.turn = t
        gt = gt[:t] + gt[t + 1 :]
    elif empty:
        raise StageError("plan", f"{parent.category} parent has empty turns {empty}; cannot plan it")
    category = "long_context" if parent.category == "long_context" else "base"
    task = parent.model_copy(
        update={
            "category": category,
            "question": [[Message(content=" ".join(s))] for s in segments],
            "ground_truth": [list(x) for x in gt],
            "missed_function": {},
        },
        deep=True,
    )
    return BaseForm(task, segments, spec)


def replay(task: Task) -> list[CallInfo]:
    """Run a task's ground truth and record each argument value's provenance (said / dep / fixed)."""
    env, infos, results, said = BfclEnvironment(task), [], [], ""
    for turn, calls in enumerate(task.ground_truth):
        env.start_turn(turn)
        said += " " + task.user_texts[turn].lower()
        for text in calls:
            before = copy.deepcopy(env.public_state())
            for obs in env.execute(text):
                if obs.call is None:
                    raise StageError("plan", f"parent ground truth does not parse: {text[:80]}")
                info = CallInfo(len(infos), turn, obs.call.name, dict(_bound(obs.call)), obs.result)
                info.changed_state = env.public_state() != before
                for param, value in info.kwargs.items():
                    for idx, v in pieces_of(param, value):
                        kind, prod, path = classify(v, said, results)
                        info.pieces.append(Piece(param, idx, v, kind, prod, path))
                infos.append(info)
                results.append(obs.result)
    return infos


def _bound(call: Call) -> dict[str, Any]:
    """Keyword form of a call (BFCL ground truth is keyword-only, but be safe with positionals)."""
    if not call.args:
        return call.kwargs
    params = list(function_docs()[call.name].params)
    return {**dict(zip(params, call.args, strict=False)), **call.kwargs}


# ----- swaps ------------------------------------------------------------------------------------------
@cache
def swap_group(function: str) -> tuple[str, ...]:
    """Functions of the same class and skill taking the same required arguments (cat, tail, wc, sort)."""
    docs = function_docs()
    me = docs[function]
    return tuple(
        n
        for n, d in docs.items()
        if d.cls == me.cls and skill_of(n) == skill_of(function) and sorted(d.required) == sorted(me.required)
    )


# ----- the plan ---------------------------------------------------------------------------------------
@dataclass
class PlannedCall:
    """One call of the new task; `deps` maps (param, element) -> (producer, path) for Execute to re-check."""

    index: int
    turn: int
    call: Call
    parent: CallInfo
    deps: dict[tuple[str, int | None], tuple[int, Any]] = field(default_factory=dict)


@dataclass
class Plan:
    parent: Task
    base: BaseForm
    initial_config: dict
    calls: list[PlannedCall]
    value_map: list[tuple[Any, Any]]  # (old, new) for every value the user states
    compose: bool
    swaps: list[tuple[str, str]] = field(default_factory=list)
    changes: list[tuple[Any, Any]] = field(default_factory=list)  # stated values and result leaves that changed

    @property
    def n_turns(self) -> int:
        return len(self.base.segments)

    @property
    def distance(self) -> int:
        """How far the plan moved from its parent: changed stated values + swapped calls + composed turns."""
        return sum(o != n for o, n in self.value_map) + len(self.swaps) + (self.n_turns if self.compose else 0)

    def summary(self) -> str:
        changed = [f"{o!r}->{n!r}" for o, n in self.value_map if o != n]
        sw = f"; swaps {self.swaps}" if self.swaps else ""
        mode = "compose" if self.compose else "substitute"
        return f"distance={self.distance}; values {', '.join(changed) or 'none'}{sw}; rewrite={mode}"


def _set(kwargs: dict, piece: Piece, value: Any) -> None:
    if piece.index is None:
        kwargs[piece.param] = value
    else:
        kwargs[piece.param][piece.index] = value


def _key(v: Any) -> tuple[str, str]:
    return (type(v).__name__, repr(v))


MAX_LOCAL_RETRIES = 2  # redraws of one call's new values before falling back to the parent's
MAX_BACKTRACKS = 3  # walks restarted with one more earlier value pinned to the parent's


class _Failed(Exception):
    """A call of the walk failed; `suspects` are the values drawn anew before it, oldest first."""

    def __init__(self, reason: str, suspects: list):
        super().__init__(reason)
        self.reason, self.suspects = reason, suspects


class _Walk:
    """The value map of one planning walk: each stated value is resampled once, where first used.

    A value is drawn anew with probability `draw_prob`, and the `forced` one always (so even the
    nearest plan changes something).
    """

    def __init__(self, rng: random.Random, draw_prob: float, compose: bool, taken: set, pinned: set, forced=None):
        self.rng, self.draw_prob, self.compose, self.pinned, self.forced = rng, draw_prob, compose, pinned, forced
        self.mapping: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.taken = set(taken)
        self.result_changes: list[tuple[Any, Any]] = []

    def changed_keys(self) -> list[tuple[str, str]]:
        """Keys of the values drawn anew so far, in the order they were drawn."""
        return [k for k, (o, n) in self.mapping.items() if o != n]

    def changes(self) -> list[tuple[Any, Any]]:
        return [(o, n) for o, n in self.mapping.values() if o != n] + self.result_changes

    def _draw(self, info: CallInfo, piece: Piece, env: BfclEnvironment) -> Any | None:
        ctx = SampleContext(env, info.name, piece.param, piece.value, self.rng, self.taken, list(self.mapping.values()))
        return sample_value(ctx)

    def _record(self, piece: Piece, new: Any | None) -> None:
        self.mapping[_key(piece.value)] = (piece.value, piece.value if new is None else new)
        if new is not None:
            self.taken.add(new)

    def introduce(self, info: CallInfo, env: BfclEnvironment, said_so_far: str) -> list[Piece]:
        """Map the values this call uses first; returns those that got a newly drawn value."""
        fresh = []
        for piece in info.pieces:
            if piece.kind == "dep" or _key(piece.value) in self.mapping:
                continue
            new, key = None, _key(piece.value)
            if (
                key not in self.pinned
                and resamplable(info.name, piece, said_so_far, self.compose)
                and (key == self.forced or self.rng.random() < self.draw_prob)
            ):
                new = self._draw(info, piece, env)
            self._record(piece, new)
            if new is not None:
                fresh.append(piece)
        return fresh

    def redraw(self, fresh: list[Piece], info: CallInfo, env: BfclEnvironment, revert: bool) -> None:
        """Draw the call's new values again (`revert`: go back to the parent's values)."""
        for piece in fresh:
            self._record(piece, None if revert else self._draw(info, piece, env))


def _is_default(function: str, piece: Piece) -> bool:
    spec = function_docs()[function].params.get(piece.param, {})
    return "default" in spec and str(spec["default"]) == str(piece.value)


def resamplable(function: str, piece: Piece, said_so_far: str, compose: bool) -> bool:
    """Whether a value may be drawn anew: one the user states in the parent's words (substitute), or
    with composed turns, which state every value, also one the parent only implied."""
    if compose:
        return piece.kind == "said" or (piece.kind == "fixed" and not _is_default(function, piece))
    if piece.kind == "said":
        return (function, piece.param) not in WORDLIKE_CHOICES and is_mentioned(said_so_far, piece.value, exact=True)
    return False


class Planner:
    """Plans variants of one parent; the parent's replay is computed once and reused per attempt."""

    def __init__(self, parent: Task, *, perturb: bool = True):
        self.parent = parent
        self.base = base_form(parent)
        self.infos = replay(self.base.task)
        self.perturb = perturb
        self.producers = {p.producer for i in self.infos for p in i.pieces if p.kind == "dep"}
        self.held = set(self.base.spec.functions)
        self.full_text = " ".join(self.base.task.user_texts)
        self._used: set[str] | None = None
        spec = self.base.spec
        if spec.category == "miss_param":
            ask, supply = self.base.segments[spec.turn]
            said = [p.value for i in self.infos if i.turn == spec.turn for p in i.pieces if p.kind == "said"]
            spec.withheld = [v for v in dict.fromkeys(said) if is_mentioned(supply, v) and not is_mentioned(ask, v)]
        # Composed turns must be able to withhold the miss_param value; otherwise keep the parent's words.
        self.can_compose = spec.category != "miss_param" or bool(spec.withheld)
        self._changeable = {c: self._changeable_keys(c) for c in (False, True)}

    def _changeable_keys(self, compose: bool) -> list[tuple[str, str]]:
        """The values a walk may draw anew, each where it is first used (as `_Walk.introduce` meets them)."""
        seen, out, texts = set(), [], self.base.task.user_texts
        for info in self.infos:
            said_so_far = " ".join(texts[: info.turn + 1])
            for piece in info.pieces:
                key = _key(piece.value)
                if piece.kind == "dep" or key in seen:
                    continue
                seen.add(key)
                if resamplable(info.name, piece, said_so_far, compose):
                    out.append(key)
        return out

    def plan(
        self, rng: random.Random, *, compose: bool = False, draw_prob: float = 0.85, swap_prob: float = 0.3
    ) -> Plan:
        """One candidate; raises StageError('plan', why) when no valid call sequence was found.

        Each changeable value is drawn anew with probability `draw_prob`, one chosen value always;
        with `compose`, a call that feeds no other may swap to a same-skill function with `swap_prob`.
        When a call fails because of a value drawn at an earlier call (a new folder, then a file that
        is not in it), the walk starts over with the latest such value pinned to the parent's.
        """
        compose = compose and self.can_compose
        cfg = copy.deepcopy(self.parent.initial_config)
        if self.perturb:
            make_room(cfg, rng, self._protected)
        changeable = self._changeable[compose]
        forced = rng.choice(changeable) if changeable else None
        pinned: set = set()
        for tries in range(MAX_BACKTRACKS + 1):
            try:
                return self._walk(rng, cfg, compose, draw_prob, swap_prob, pinned, forced)
            except _Failed as e:
                if tries == MAX_BACKTRACKS or not e.suspects:
                    raise StageError("plan", e.reason) from None
                pinned.add(e.suspects[-1])
        raise AssertionError("unreachable")

    def _walk(self, rng, cfg: dict, compose: bool, draw: float, swap: float, pinned: set, forced) -> Plan:
        env = BfclEnvironment(self.base.task.model_copy(update={"initial_config": cfg}))
        walk = _Walk(rng, draw, compose, {p.value for i in self.infos for p in i.pieces}, pinned, forced)
        texts = self.base.task.user_texts
        calls, results, swaps = [], [], []
        for info in self.infos:
            env.start_turn(info.turn)
            said_so_far = " ".join(texts[: info.turn + 1])
            name = self._maybe_swap(info, rng, swap) if compose else info.name
            planned = PlannedCall(info.index, info.turn, Call(name), info)
            earlier = walk.changed_keys()
            fresh = walk.introduce(info, env, said_so_far)
            for attempt in range(MAX_LOCAL_RETRIES + 2):
                try:
                    kwargs = self._kwargs(info, planned, results, walk)
                except StageError as e:
                    raise _Failed(e.reason, earlier) from None
                if name != info.name:
                    kwargs = {k: v for k, v in kwargs.items() if k in function_docs()[name].params}
                planned.call = Call(name, (), kwargs)
                obs = env.execute_call(planned.call)
                failed = (None if obs.ok else obs.result) or looks_failed(obs.result)
                if not failed:
                    break
                if name != info.name:
                    name = info.name  # the swapped-in function does not work here; use the parent's
                    continue
                if not fresh or attempt > MAX_LOCAL_RETRIES:
                    raise _Failed(f"call {info.index} {name}() failed: {failed[:100]}", earlier)
                # Draw this call's new values again; the last try keeps the parent's values.
                walk.redraw(fresh, info, env, revert=attempt == MAX_LOCAL_RETRIES)
            if name != info.name:
                swaps.append((info.name, name))
            walk.result_changes += leaf_changes(parse_result(info.result), parse_result(obs.result))
            results.append(obs.result)
            calls.append(planned)
        value_map = list(walk.mapping.values())
        if all(o == n for o, n in value_map) and not swaps:
            raise StageError("plan", "no value could be changed")
        return Plan(self.parent, self.base, cfg, calls, value_map, compose, swaps, walk.changes())

    def _kwargs(self, info: CallInfo, planned: PlannedCall, results: list[str], walk: _Walk) -> dict:
        """The parent call's arguments with this walk's values: new stated values, re-read dependencies,
        and composed strings whose parts changed."""
        kwargs = copy.deepcopy(info.kwargs)
        for piece in info.pieces:
            mapped = walk.mapping.get(_key(piece.value))
            if piece.kind == "dep":
                _set(kwargs, piece, self._dep_value(piece, results, walk))
                planned.deps[(piece.param, piece.index)] = (piece.producer, piece.path)
            elif mapped is not None and mapped[1] != piece.value:
                _set(kwargs, piece, mapped[1])
            elif piece.kind == "fixed" and isinstance(piece.value, str):
                # A composed value ("The distance from A to B is X miles.") follows its parts.
                _set(kwargs, piece, substitute(piece.value, walk.changes())[0])
        return kwargs

    def _dep_value(self, piece: Piece, results: list[str], walk: _Walk) -> Any:
        ok, value = resolve_dep(self.infos[piece.producer].result, results[piece.producer], piece.value, piece.path)
        if not ok:
            raise StageError("plan", f"result of call {piece.producer} changed; {piece.param} has no counterpart")
        if value == piece.value and isinstance(value, str):
            # A kept result value that holds a replaced stated value ("the line with 'server error'")
            # no longer answers the reworded request.
            low = value.lower()
            for old, new in walk.mapping.values():
                if old != new and isinstance(old, str) and len(old) >= 3 and old.lower() in low:
                    raise StageError("plan", f"{piece.param} read from a result still carries a replaced value")
        return value

    def _maybe_swap(self, info: CallInfo, rng: random.Random, swap_prob: float) -> str:
        consumer = any(p.kind == "dep" or p.value in self.base.spec.withheld for p in info.pieces)
        if info.index in self.producers or consumer or info.name in self.held or rng.random() >= swap_prob:
            return info.name
        excluded = set(self.parent.excluded_function) | self.held
        group = [n for n in swap_group(info.name) if n not in excluded]
        return rng.choice(group) if group else info.name

    def _protected(self, value: Any) -> bool:
        """Whether the config perturbation must leave a name or amount alone: a call uses it or the user says it."""
        if self._used is None:
            self._used = {
                str(x) for info in self.infos for v in info.kwargs.values() for x in (v if isinstance(v, list) else [v])
            }
        return str(value) in self._used or is_mentioned(self.full_text, value)


# ----- room for new values ----------------------------------------------------------------------------
def make_room(cfg: dict, rng: random.Random, protected: Callable[[Any], bool]) -> None:
    """Now and then add a file to a folder, and give a folder the task uses an empty sibling, so a
    resampled file or destination has somewhere to come from ("copy it into <another folder>"; the
    samplers pick among existing entries). The rest of the state is Augment's."""
    fs = cfg.get("GorillaFileSystem", {}).get("root")
    dirs = [fs] if isinstance(fs, dict) else []
    while dirs:
        d = dirs.pop()
        for entry in d.values():
            if isinstance(entry, dict) and entry.get("type") == "directory":
                contents = entry.setdefault("contents", {})
                if rng.random() < 0.3:
                    extra = f"{rng.choice(WORDS)}_{rng.randint(1, 99)}.txt"
                    if extra not in contents and not protected(extra):
                        contents[extra] = {"type": "file", "content": f"{rng.choice(WORDS).capitalize()} notes."}
                used = [n for n, e in contents.items() if e.get("type") == "directory" and protected(n)]
                if used and rng.random() < 0.5:
                    sibling = rng.choice(WORDS) + ("_" + rng.choice(WORDS) if rng.random() < 0.5 else "")
                    if sibling not in contents and not protected(sibling):
                        contents[sibling] = {"type": "directory", "contents": {}}
                dirs.append(contents)

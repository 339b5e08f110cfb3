"""Stage 3, Rewrite: the user turns of a planned task, in natural language, behind a small interface.

Two backends. `TemplateRewriter` (default, no LLM) writes a turn one of two ways: *substitute* keeps
the parent's own words and swaps each stated value for its new value (the variant reads like a BFCL
seed), *compose* writes one request per call naming the values the user gives (phrases.py for the
common functions, the tool doc otherwise), joined with some variety. `LlmRewriter` asks an
OpenAI-compatible endpoint for the turns (prompts/rewrite_*.md). Whatever the backend, a value the agent must take from an
earlier result is never written into the user's words ("rewrite: leaks ..."), and words adapted from
the parent's may not still state a value the plan replaced ("rewrite: still states ...").
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from rods_core.benchmarks.bfcl.environment import function_docs
from rods_core.benchmarks.bfcl.synth.execute import Execution
from rods_core.benchmarks.bfcl.synth.llm import ChatEndpoint, LlmError, extract_json
from rods_core.benchmarks.bfcl.synth.phrases import fill, phrasings
from rods_core.benchmarks.bfcl.synth.plan import Plan
from rods_core.benchmarks.bfcl.synth.values import is_mentioned, substitute
from rods_core.benchmarks.synthesis import StageError
from rods_core.config.prompt_files import Prompts


@dataclass
class CallView:
    """What the user must say for one call: the stated values, and the parameters fed by earlier results."""

    function: str
    stated: dict[str, Any]
    from_results: list[str]
    dep_values: list[Any]


@dataclass
class Rewrite:
    segments: list[list[str]]  # per base-form turn: one text, or [ask, supply] for a miss_param turn
    modes: list[str] = field(default_factory=list)  # per turn: substitute | compose | llm


class Rewriter(Protocol):
    def rewrite(self, plan: Plan, execution: Execution, rng: random.Random) -> Rewrite: ...


# ----- what each turn must say ---------------------------------------------------------------------
def call_views(plan: Plan, execution: Execution) -> list[list[CallView]]:
    docs = function_docs()
    views: list[list[CallView]] = [[] for _ in range(plan.n_turns)]
    for pc, call in zip(plan.calls, execution.calls, strict=True):
        dep_params = {p for p, _ in pc.deps}
        stated, deps = {}, []
        for param, value in call.kwargs.items():
            if param in dep_params:
                deps.append(value)
                continue
            spec = docs[call.name].params.get(param, {})
            if "default" in spec and str(spec["default"]) == str(value):
                continue
            stated[param] = value
        views[pc.turn].append(CallView(call.name, stated, sorted(dep_params), deps))
    return views


def withheld_values(plan: Plan) -> list[Any]:
    new = {repr(o): n for o, n in plan.value_map}
    return [new.get(repr(v), v) for v in plan.base.spec.withheld]


def check_no_leak(plan: Plan, segments: list[list[str]], views: list[list[CallView]]) -> None:
    """No value the agent must read from a result may appear in the user's words up to its turn."""
    said = ""
    for turn, segs in enumerate(segments):
        said += " " + " ".join(segs).lower()
        for view in views[turn]:
            for v in view.dep_values:
                for x in v if isinstance(v, list) else [v]:
                    s = str(x).strip().lower()
                    if len(s) >= 2 and s in said:
                        raise StageError("rewrite", f"leaks dependency value {str(x)[:40]!r} in turn {turn}")


def check_no_stale(plan: Plan, segments: list[list[str]]) -> None:
    """Words adapted from the parent's must not still state a value the plan replaced (they would ask
    for both). Not applied to composed turns: they are written from the new calls alone."""
    text = " ".join(s for segs in segments for s in segs)
    for old, new in plan.value_map:
        if old != new and is_mentioned(text, old) and not is_mentioned(str(new), old):
            raise StageError("rewrite", f"still states the replaced value {str(old)[:40]!r}")


# ----- template backend -------------------------------------------------------------------------------
OPENERS = ("", "Please ", "Could you ", "I'd like you to ", "Now ", "Next, ", "Go ahead and ", "Kindly ")
JOINERS = (", then ", ". After that, ", ", and then ", ". Also, ", ". Once done, ")


def _human(param: str) -> str:
    out = "".join(" " + c.lower() if c.isupper() else c for c in param).replace("_", " ").strip()
    return out.replace(" id", " ID")


def _render(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return ", ".join(_render(v) for v in value) if value else "none"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _action(function: str) -> str:
    desc = function_docs()[function].doc.get("description", "")
    desc = desc.split("Tool description:", 1)[-1].strip()
    first = desc.split(". ")[0].rstrip(".").strip() or function.replace("_", " ")
    word, _, rest = first.partition(" ")
    if word.endswith(("sses", "shes", "ches", "xes")):
        word = word[:-2]  # "Presses the pedal" -> "Press the pedal"
    elif word.endswith("s") and not word.endswith("ss") and word.lower() not in ("this", "is"):
        word = word[:-1]  # "Starts the engine" -> "Start the engine"
    return (word[:1].lower() + word[1:] + (" " + rest if rest else "")).strip()


def phrase(view: CallView, rng: random.Random, withheld: set[str] = frozenset()) -> str:
    """One call as a request naming its stated values: a phrasing from phrases.py when one fits,
    else one built from the tool doc ("copy a file ... with source 'a' and destination 'b'")."""
    holding = any(repr(v) in withheld for v in view.stated.values())
    fitting = [] if holding else phrasings(view.function, view.stated)
    dep = " and ".join(_human(p) for p in view.from_results)
    if fitting:
        text = fill(rng.choice(fitting), {p: _render(v) for p, v in view.stated.items()})
        return text + (rng.choice((" using the ", " with the ")) + dep + " from before" if dep else "")
    parts = []
    for param, value in view.stated.items():
        if repr(value) in withheld:
            parts.append(f"a {_human(param)} I will give you")
        elif isinstance(value, bool):
            parts.append(f"{_human(param)} set to {value}")
        else:
            parts.append(f"{_human(param)} {_render(value)}")
    if dep:
        parts.append(dep + " taken from the earlier results")
    text = _action(view.function)
    if parts:
        joined = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        text += rng.choice((" with ", " using ", ", ")) + joined
    return text


def compose_turn(views: list[CallView], rng: random.Random, withheld: list[Any] | None = None) -> list[str]:
    """A turn from the docs; with `withheld`, the request omits those values and a supply line gives them."""
    hold = {repr(v) for v in withheld or []}
    phrases = [phrase(v, rng, hold) for v in views]
    text = phrases[0] if phrases else "check the current state"
    for p in phrases[1:]:
        text += rng.choice(JOINERS) + p
    opener = rng.choice(OPENERS)
    text = opener + text
    text = text[:1].upper() + text[1:] + ("?" if opener.startswith("Could") else ".")
    if not hold:
        return [text]
    supply = []
    for view in views:
        supply += [f"The {_human(p)} is {_render(v)}." for p, v in view.stated.items() if repr(v) in hold]
    if not supply:
        raise StageError("rewrite", "the value to withhold is not among the turn's stated values")
    return [text, " ".join(dict.fromkeys(supply))]


class TemplateRewriter:
    """No-LLM rewriting: the parent's words with new values, or (with `plan.compose`) docs templates."""

    def rewrite(self, plan: Plan, execution: Execution, rng: random.Random) -> Rewrite:
        views = call_views(plan, execution)
        spec_turn, held = plan.base.spec.turn, withheld_values(plan)
        segments, modes = [], []
        for turn, parent_segs in enumerate(plan.base.segments):
            if plan.compose:
                segs = compose_turn(views[turn], rng, held if turn == spec_turn and held else None)
                modes.append("compose")
            else:
                segs = [substitute(s, plan.value_map)[0] for s in parent_segs]
                modes.append("substitute")
            segments.append(segs)
        check_no_leak(plan, segments, views)
        if not plan.compose:
            check_no_stale(plan, segments)
        return Rewrite(segments, modes)


# ----- LLM backend ------------------------------------------------------------------------------------
MAX_TURN_CHARS = 2000  # a user turn longer than this is not a user turn


class LlmRewriter:
    """Rewriting by an OpenAI-compatible chat endpoint, with the prompts of prompts/rewrite_*.md.

    The answer is hostile input: it must be JSON with one non-empty string per turn (two for a SPLIT
    turn), and then pass the same leak and stale-value checks as the template backend's words.
    """

    def __init__(self, endpoint: ChatEndpoint, prompts: Prompts | None = None):
        self.endpoint, self.prompts = endpoint, prompts or Prompts()

    def prompt(self, plan: Plan, views: list[list[CallView]]) -> list[dict]:
        held = withheld_values(plan)
        lines = []
        for turn, vs in enumerate(views):
            split = turn == plan.base.spec.turn and held
            lines.append(f"Turn {turn + 1}{' (SPLIT; withheld: ' + _render(held) + ')' if split else ''}:")
            lines.append(f"  example wording of a similar request: {' '.join(plan.base.segments[turn])[:400]}")
            for v in vs:
                stated = ", ".join(f"{_human(p)}={_render(x)}" for p, x in v.stated.items()) or "no values"
                dep = f"; from earlier results: {', '.join(v.from_results)}" if v.from_results else ""
                lines.append(f"  - {v.function}: {stated}{dep}")
        return self.prompts.messages("rewrite", turns="\n".join(lines), n_turns=plan.n_turns)

    def rewrite(self, plan: Plan, execution: Execution, rng: random.Random) -> Rewrite:
        views = call_views(plan, execution)
        try:
            answer = extract_json(self.endpoint.complete(self.prompt(plan, views), seed=rng.randrange(2**31)))
        except LlmError as e:
            raise StageError("rewrite", f"llm: {e}") from None
        turns = answer.get("turns") if isinstance(answer, dict) else answer
        if not isinstance(turns, list) or len(turns) != plan.n_turns:
            got = f"{len(turns)} turns" if isinstance(turns, list) else type(turns).__name__
            raise StageError("rewrite", f"llm: expected {plan.n_turns} turns, got {got}")
        segments = []
        for turn, t in enumerate(turns):
            segs = [t] if isinstance(t, str) else t
            want = len(plan.base.segments[turn]) if turn == plan.base.spec.turn else 1
            if (
                not isinstance(segs, list)
                or len(segs) != want
                or not all(isinstance(s, str) and s.strip() and len(s) <= MAX_TURN_CHARS for s in segs)
            ):
                raise StageError("rewrite", f"llm: turn {turn} should be {want} non-empty string(s) of a user's length")
            segments.append([s.strip() for s in segs])
        check_no_leak(plan, segments, views)
        check_no_stale(plan, segments)
        return Rewrite(segments, ["llm"] * plan.n_turns)

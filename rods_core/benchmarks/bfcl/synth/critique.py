"""Stage 4, Critique: accept a variant only if it is structurally the parent's, correct, useful and new.

Checks, each a rejection reason of its own: the signature (topology hash and depth) equals the
parent's; the ground truth replays without an error and passes the checker (accuracy 1); the task
changes state or returns information; every argument value is stated in the user's words so far, found
in an earlier result, a documented default / choice / boolean, or (in a turn that keeps the parent's
wording) a value the parent also left to inference, unless it is a computed amount whose call changed
its other arguments; the task is in neither the pool nor the test split.
An optional LLM critic reads the turns against the calls. Departure from the paper: its critic is an
LLM; here the deterministic checks are the critic and the LLM is an optional extra.
"""

from __future__ import annotations

import copy
from typing import Any

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.environment import BfclEnvironment, function_docs
from rods_core.benchmarks.bfcl.seeds import leak_guard
from rods_core.benchmarks.bfcl.signature import Signature, signature, skill_of
from rods_core.benchmarks.bfcl.synth.llm import ChatEndpoint, LlmError, extract_json
from rods_core.benchmarks.bfcl.synth.samplers import documented_choices
from rods_core.benchmarks.bfcl.synth.values import (
    INFORMATIVE_SKILLS,
    CallInfo,
    is_mentioned,
    looks_failed,
    parse_result,
    pieces_of,
    substitute,
)
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.synthesis import StageError
from rods_core.config.prompt_files import Prompts


def same_structure(variant: Task, parent_sig: Signature, stage: str = "critique") -> Signature:
    sig = signature(variant)
    if sig.topology_hash != parent_sig.topology_hash or sig.depth != parent_sig.depth:
        diff = []
        if sig.calls_per_turn != parent_sig.calls_per_turn:
            diff.append(f"calls per turn {list(sig.calls_per_turn)} vs {list(parent_sig.calls_per_turn)}")
        if sig.skills != parent_sig.skills:
            diff.append("skills")
        if sig.edges != parent_sig.edges:
            diff.append(f"edges {list(sig.edges)} vs {list(parent_sig.edges)}")
        if sig.depth != parent_sig.depth:
            diff.append(f"depth {sig.depth} vs {parent_sig.depth}")
        raise StageError(stage, "signature differs: " + ("; ".join(diff) or "classes"))
    return sig


def replays_clean(task: Task, stage: str = "critique") -> list[tuple[Any, str]]:
    """Replay the ground truth: no call may fail and the checker must give accuracy 1.

    Returns (call, result) pairs in order, for the checks that need results.
    """
    env, out = BfclEnvironment(task), []
    before = copy.deepcopy(env.public_state())  # calls mutate the instances' objects in place
    for turn, calls in enumerate(task.ground_truth):
        env.start_turn(turn)
        for text in calls:
            for obs in env.execute(text):
                bad = (None if obs.ok else obs.result) or looks_failed(obs.result)
                if bad:
                    raise StageError(stage, f"ground truth call fails on replay: {bad[:80]}")
                out.append((obs.call, obs.result))
    score = score_calls(task, task.ground_truth)
    if score.accuracy != 1.0:
        failed = [v.reason for v in score.turns if v.checked and not v.passed]
        raise StageError(stage, f"ground truth does not pass the checker: {failed[:1]}")
    useful = env.public_state() != before or any(
        skill_of(c.name) in INFORMATIVE_SKILLS and r.strip() not in ("", "None", "{}", "[]") for c, r in out
    )
    if not useful:
        raise StageError(stage, "task neither changes state nor returns information")
    return out


def _in_results(value: Any, results: list[str]) -> bool:
    s = str(value)
    for r in results:
        if len(s) >= 4 and s in r:
            return True
        if _leaf_equal(parse_result(r), s):
            return True
    return False


def _leaf_equal(data: Any, s: str) -> bool:
    if isinstance(data, dict):
        return any(str(k) == s or _leaf_equal(v, s) for k, v in data.items())
    if isinstance(data, (list, tuple)):
        return any(_leaf_equal(v, s) for v in data)
    return str(data) == s


def _leaves(param: str, value: Any) -> list[Any]:
    """The values to account for in one argument: list elements, dict values, or the value itself."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(param, v)]
    return [v for _, v in pieces_of(param, value)] or [value]


def _documented(function: str, param: str, value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return True
    spec = function_docs()[function].params.get(param, {})
    if "default" in spec and str(spec["default"]) == str(value):
        return True
    return str(value) in documented_choices(function, param)


def unstated_values(
    task: Task,
    calls: list[tuple[Any, str]],
    parent_infos: list[CallInfo] | None,
    inherit_turns: set[int],
    changes: list | None = None,
) -> list[str]:
    """Argument values the agent could not know: not said, not in a result, not documented, not inherited."""
    missing, said, results, k, changes = [], "", [], 0, changes or []
    turn_of = [t for t, cs in enumerate(task.ground_truth) for _ in cs]
    texts = task.user_texts
    for i, (call, result) in enumerate(calls):
        turn = turn_of[i] if i < len(turn_of) else turn_of[-1]
        while k <= turn:
            said += " " + texts[k]
            k += 1
        for param, value in call.kwargs.items():
            for v in _leaves(param, value):
                ok = (
                    is_mentioned(said, v)
                    or str(v).lower() in said.lower()
                    or _documented(call.name, param, v)
                    or _in_results(v, results)
                    or _inherited(parent_infos, i, param, v, turn in inherit_turns, changes, call)
                )
                if not ok:
                    missing.append(f"{call.name}.{param}={str(v)[:30]!r}")
        results.append(result)
    return missing


def _inherited(
    parent_infos: list[CallInfo] | None, i: int, param: str, value: Any, kept_wording: bool, changes: list, call
) -> bool:
    """The parent asked for this value (or its parts, changed as the words were) in the same words.

    An inferred fractional number (a computed amount) is inherited only if the call's other stated
    arguments are the parent's too: "buy at the current price" stops meaning 310.23 once the symbol
    changed. Names, codes and small integers inferred from words ('Buy', 'LAX', priority 5) stay.
    """
    if not kept_wording or not parent_infos or i >= len(parent_infos):
        return False
    info = parent_infos[i]
    pv = info.kwargs.get(param)
    dep_params = {p.param for p in info.pieces if p.kind == "dep"}
    computed = isinstance(value, float) and not value.is_integer()  # 310.23, not a priority of 5
    others_kept = not computed or (
        all(call.kwargs.get(q) == v for q, v in info.kwargs.items() if q != param and q not in dep_params)
        and call.name == info.name
    )
    for old in pv if isinstance(pv, list) else [pv]:
        if old == value and others_kept and not _in_results(value, [x.result for x in parent_infos[:i]]):
            return True
        if isinstance(old, str) and old != value and substitute(old, changes)[0] == value:
            return True
    return False


class Critic:
    """The critique stage for one parent: its signature, the pool's keys, and the optional LLM critic."""

    def __init__(
        self,
        parent_sig: Signature,
        parent_infos: list[CallInfo],
        pool_keys: set[str],
        llm: ChatEndpoint | None = None,
        prompts: Prompts | None = None,
    ):
        self.parent_sig, self.parent_infos, self.pool_keys = parent_sig, parent_infos, pool_keys
        self.llm, self.prompts = llm, (prompts or Prompts()) if llm is not None else None

    def check(self, variant: Task, inherit_turns: set[int], changes: list | None = None) -> None:
        """Raise StageError('critique', why) unless the variant passes every check.

        `inherit_turns`: turns that keep the parent's words; `changes`: the plan's (old, new) values.
        """
        same_structure(variant, self.parent_sig)
        calls = replays_clean(variant)
        missing = unstated_values(variant, calls, self.parent_infos, inherit_turns, changes)
        if missing:
            raise StageError("critique", f"values the user never gives: {', '.join(missing[:3])}")
        if variant.content_key() in self.pool_keys:
            raise StageError("critique", "duplicates a task in the pool")
        leak = leak_guard().reason(variant)
        if leak:
            raise StageError("critique", f"test-split collision: {leak}")
        if self.llm is not None:
            self._llm_verdict(variant)

    def _llm_verdict(self, variant: Task) -> None:
        """The endpoint's judgement (prompts/critique_*.md): only an explicit {"accept": true} passes."""
        turns = "\n".join(
            f"Turn {i + 1}: user: {u or '(no message)'}\n  calls: {gt}"
            for i, (u, gt) in enumerate(zip(variant.user_texts, variant.ground_truth, strict=True))
        )
        try:
            verdict = extract_json(self.llm.complete(self.prompts.messages("critique", turns=turns)))
        except LlmError as e:
            raise StageError("critique", f"llm critic: {e}") from None
        if not isinstance(verdict, dict) or verdict.get("accept") is not True:
            reason = verdict.get("reason", "") if isinstance(verdict, dict) else ""
            raise StageError("critique", f"llm critic rejects: {str(reason)[:80]}")

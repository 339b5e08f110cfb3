"""BFCL multi-turn tasks as the app and the task-file door read them: their facts (category, class combination,
turns, calls), their charted structure (signature depth), the distance of a variant from its parent (calls
aligned by turn and position), and the door's replay of a task file's ground truth."""

from __future__ import annotations

import ast
import functools
import json
from collections import Counter

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.environment import BfclEnvironment
from rods_core.benchmarks.bfcl.seeds import is_bfcl_task
from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.protocols import Distance, TaskFacts, TaskStructure


def task_facts(task: Task) -> TaskFacts:
    """Category, the involved classes joined " + ", user turns and ground-truth calls."""
    return TaskFacts(task.category, " + ".join(sorted(task.involved_classes)), task.n_turns, task.n_calls)


def task_structure(task: Task) -> TaskStructure:
    """The classes the ground truth uses and its dependency depth (replays the task: ~1 ms), turns and calls."""
    s = signature(task).summary()
    return TaskStructure(s["class_combo"], int(s["depth"]), task.n_turns, task.n_calls)


# ----- distance from the parent ------------------------------------------------------------------------
@functools.lru_cache(maxsize=65_536)  # variants repeat their parents' calls: parse each string once
def _call_parts(call: str) -> tuple[str, tuple[str, ...]]:
    """(function name, argument values as source text); an unparsable call is its own name, no values."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return call, ()
    if not isinstance(node, ast.Call):
        return call, ()
    values = (*(ast.dump(a) for a in node.args), *(f"{k.arg}={ast.dump(k.value)}" for k in node.keywords))
    return ast.dump(node.func), values


def call_distance(parent: Task | None, task: Task) -> Distance:
    """Calls are aligned by turn and position: a call whose function differs (or that one side lacks) is a
    changed call; a call to the same function counts each differing argument value. A turn changed when its
    user words or calls differ. Without a parent, everything counts as changed."""
    if parent is None:
        return Distance(sum(len(_call_parts(c)[1]) for t in task.ground_truth for c in t), task.n_calls, task.n_turns)
    if parent.ground_truth == task.ground_truth and parent.user_texts == task.user_texts:
        return Distance(0, 0, 0)
    values = calls = turns = 0
    for i in range(max(task.n_turns, parent.n_turns)):
        new = task.ground_truth[i] if i < task.n_turns else []
        old = parent.ground_truth[i] if i < parent.n_turns else []
        said = task.user_texts[i] if i < task.n_turns else None
        was = parent.user_texts[i] if i < parent.n_turns else None
        turns += new != old or said != was
        for j in range(max(len(new), len(old))):
            if j >= len(new) or j >= len(old):
                calls += 1
                continue
            if new[j] == old[j]:
                continue
            (fn_new, args_new), (fn_old, args_old) = _call_parts(new[j]), _call_parts(old[j])
            if fn_new != fn_old:
                calls += 1
            else:
                values += max(1, sum((Counter(args_new) - Counter(args_old)).values()))
    return Distance(values, calls, turns)


# ----- the task-file door ------------------------------------------------------------------------------
def _reports_error(result: str) -> bool:
    """A call that returned normally but says it failed: the API classes answer {"error": "..."}."""
    if not result.startswith("{"):
        return False
    try:
        doc = json.loads(result)
    except ValueError:
        return False
    return isinstance(doc, dict) and any("error" in str(k).lower() and v for k, v in doc.items())


def replay_problem(task: Task) -> tuple[str, str] | None:
    """(field, reason) when the task's initial state does not load or a ground-truth call fails on replay
    (raises, or answers {"error": ...}).

    BFCL's own 800 tasks are the reference and pass as they are (5 test-split ones hold a call our typed
    environment refuses). Departure from synth.verify.verify_task: no "useful" or failure-looking-result
    heuristics, which refuse 8 BFCL train seeds; only what breaks a run is refused.
    """
    if is_bfcl_task(task):
        return None
    try:
        env = BfclEnvironment(task)
    except Exception as e:  # noqa: BLE001 - the API classes raise anything on a malformed scenario
        return "initial_config", f"the API classes cannot load it ({type(e).__name__}: {str(e)[:160]})"
    for turn, calls in enumerate(task.ground_truth):
        env.start_turn(turn)
        for k, text in enumerate(calls):
            failed = next((o.result for o in env.execute(text) if not o.ok or _reports_error(o.result)), None)
            if failed is not None:
                return f"ground_truth.{turn}.{k}", f"{text[:80]!r} fails on replay: {failed[:160]}"
    try:
        score = score_calls(task, task.ground_truth)
    except Exception as e:  # noqa: BLE001 - a checker crash on this task is a reason to refuse it
        return "ground_truth", f"the checker fails on it ({type(e).__name__}: {str(e)[:160]})"
    if score.accuracy < 1:
        return "ground_truth", "does not pass the checker when replayed"
    return None

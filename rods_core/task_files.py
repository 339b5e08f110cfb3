"""The task-file door: a JSONL file of tasks passes the schema, then verification by execution (its initial
state loads and its ground truth replays), then the leak guard against the test split; all or nothing.
A benchmark other than BFCL multi-turn brings its own schema (`task_type`), verifier and leak guard."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rods_core.benchmarks.protocols import Benchmark
from rods_core.envs.bfcl import BfclEnvironment
from rods_core.envs.checker import score_calls
from rods_core.inputs import read_bytes
from rods_core.seeds import is_bfcl_task, refuse_test_tasks
from rods_core.tasks import Task, TaskFileError, parse_task_lines, record_parser


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


def parse_task_bytes(
    data: bytes, source: str, where: str, *, verify: bool = True, guard: bool = True, benchmark: Benchmark | None = None
) -> list:
    """The tasks of a JSONL file's bytes, all or nothing: schema (TaskFileError naming file:line:field),
    then verification by execution, then (guard=True) the leak guard naming `where`; a `benchmark` other
    than BFCL multi-turn gives the schema, the verifier (`Benchmark.verify`) and the guard."""
    other = benchmark if benchmark is not None and benchmark.name != "bfcl_multi_turn" else None
    lines = parse_task_lines(data, source, record_parser(other.task_type) if other else None)
    if verify:
        problem = replay_problem if other is None else _verifier(other)
        problems = [(ln, *why) for ln, task in lines if (why := problem(task))]
        if problems:
            raise TaskFileError(source, problems, "task(s) failing verification by execution")
    tasks = [t for _, t in lines]
    if guard:
        refuse_test_tasks(tasks, f"{where} ({source})", other.leak_reason if other else None)
    return tasks


def _verifier(benchmark: Benchmark):
    """`replay_problem` for another benchmark: its verifier, run in a folder removed afterwards."""

    def problem(task) -> tuple[str, str] | None:
        with tempfile.TemporaryDirectory(prefix="verify_") as tmp:
            verdict = benchmark.verify(task, Path(tmp))
        return None if verdict.ok else ("(task)", verdict.reason)

    return problem


def load_task_file(
    path: str | Path, where: str, *, verify: bool = True, guard: bool = True, benchmark: Benchmark | None = None
) -> list:
    """parse_task_bytes on a file (DoorError when it cannot be read)."""
    data = read_bytes(path, "task file")
    return parse_task_bytes(data, str(path), where, verify=verify, guard=guard, benchmark=benchmark)

"""The task-file door: a JSONL file of tasks passes the schema, then verification by execution, then the leak
guard against the test split; all or nothing. The benchmark gives all three (`task_type`, `import_problem`,
`leak_reason`): BFCL multi-turn replays the ground truth call by call, the others play their verifier."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rods_core.benchmarks.bfcl.tasks import TaskFileError, parse_task_lines, record_parser
from rods_core.benchmarks.leaks import refuse_test_tasks
from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.registry import make_benchmark
from rods_core.inputs import read_bytes


def parse_task_bytes(
    data: bytes, source: str, where: str, *, verify: bool = True, guard: bool = True, benchmark: Benchmark | None = None
) -> list:
    """The tasks of a JSONL file's bytes, all or nothing: schema (TaskFileError naming file:line:field),
    then verification by execution (`Benchmark.import_problem`), then (guard=True) the leak guard naming
    `where`; `benchmark` gives the three (BFCL multi-turn when not given)."""
    bench = benchmark or make_benchmark()
    lines = parse_task_lines(data, source, record_parser(bench.task_type))
    if verify:
        problems = [(ln, *why) for ln, task in lines if (why := _problem(bench, task))]
        if problems:
            raise TaskFileError(source, problems, "task(s) failing verification by execution")
    tasks = [t for _, t in lines]
    if guard:
        refuse_test_tasks(tasks, f"{where} ({source})", bench.leak_reason)
    return tasks


def _problem(bench: Benchmark, task) -> tuple[str, str] | None:
    """The benchmark's import check, in a folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="verify_") as tmp:
        return bench.import_problem(task, Path(tmp))


def load_task_file(
    path: str | Path, where: str, *, verify: bool = True, guard: bool = True, benchmark: Benchmark | None = None
) -> list:
    """parse_task_bytes on a file (DoorError when it cannot be read)."""
    data = read_bytes(path, "task file")
    return parse_task_bytes(data, str(path), where, verify=verify, guard=guard, benchmark=benchmark)

"""Task files: any benchmark's tasks as JSONL (each task's `to_record`, read back by its task model), and the
task-file door: a JSONL file of tasks passes the schema, then verification by execution, then the leak guard
against the test split; all or nothing. The benchmark gives all three (`task_type`, `import_problem`,
`leak_reason`): BFCL multi-turn replays the ground truth call by call, the others play their verifier."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rods_core.benchmarks.leaks import refuse_test_tasks
from rods_core.benchmarks.protocols import Benchmark
from rods_core.config.inputs import Bad, DoorError, jsonl_lines, read_bytes

# ----- JSONL of any benchmark's tasks --------------------------------------------------------------------
# Fields an export adds beside the task (statistics, the pool it was in); ignored when read back.
EXPORT_ONLY_FIELDS = ("stats", "pool")


class TaskFileError(DoorError):
    """A task file holds invalid records; `problems` lists (line, field, reason) for each."""

    def __init__(self, path: str | Path, problems: list[tuple[int, str, str]], what: str = "invalid record(s)"):
        self.path = str(path)
        self.problems = problems
        shown = "\n".join(f"  {self.path}:{ln}: {fld}: {why}" for ln, fld, why in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} {what} in {self.path}; nothing was read:\n{shown}{more}")


def _problems(err: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in e["loc"]) or "(record)", e["msg"]) for e in err.errors()]


def record_parser(task_type: type) -> Callable[[Any], Any]:
    """A reader of one record of a benchmark's task model: a JSON object, the export-only fields dropped (so
    an export of a run's pool imports back), validated by `task_type`."""

    def parse(rec: Any) -> Any:
        if not isinstance(rec, dict):
            raise ValueError("a record must be a JSON object")
        return task_type.model_validate({k: v for k, v in rec.items() if k not in EXPORT_ONLY_FIELDS})

    return parse


def parse_task_lines(data: bytes, source: str, parse: Callable[[Any], Any]) -> list[tuple[int, Any]]:
    """(line, task) for each record of a JSONL file's bytes, all or nothing: any invalid line (not UTF-8,
    not JSON, too deep, a bad field, a repeated id) raises TaskFileError naming them all. `parse` reads one
    record (`record_parser` of a benchmark's task model)."""
    out, problems, seen = [], [], {}
    for ln, rec in jsonl_lines(data, source):
        if isinstance(rec, Bad):
            problems.append((ln, rec.field, rec.reason))
            continue
        try:
            task = parse(rec)
        except ValidationError as e:
            problems.extend((ln, fld, why) for fld, why in _problems(e))
            continue
        except ValueError as e:
            problems.append((ln, "(record)", str(e)))
            continue
        if task.id in seen:
            problems.append((ln, "id", f"duplicate id {task.id!r} (first on line {seen[task.id]})"))
            continue
        seen[task.id] = ln
        out.append((ln, task))
    if problems:
        raise TaskFileError(source, problems)
    return out


def read_tasks(path: str | Path, task_type: type) -> list:
    """Read a JSONL file of `task_type` tasks by the schema alone (DoorError if unreadable, TaskFileError per
    line). Doors into training also verify by execution: `load_task_file`."""
    return [t for _, t in parse_task_lines(read_bytes(path, "task file"), str(path), record_parser(task_type))]


def iter_records(tasks: Iterable, extra: dict[str, dict] | None = None) -> Iterator[dict]:
    for t in tasks:
        rec = t.to_record()
        if extra and t.id in extra:
            rec.update(extra[t.id])
        yield rec


def write_tasks(path: str | Path, tasks: Iterable, extra: dict[str, dict] | None = None) -> int:
    """Write tasks as JSONL atomically (temp file + rename); `extra` adds per-task fields (stats)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for rec in iter_records(tasks, extra):
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


# ----- the door -----------------------------------------------------------------------------------
def parse_task_bytes(
    data: bytes, source: str, where: str, *, benchmark: Benchmark, verify: bool = True, guard: bool = True
) -> list:
    """The tasks of a JSONL file's bytes, all or nothing: schema (TaskFileError naming file:line:field),
    then verification by execution (`Benchmark.import_problem`), then (guard=True) the leak guard naming
    `where`; `benchmark` gives the three."""
    lines = parse_task_lines(data, source, record_parser(benchmark.task_type))
    if verify:
        problems = [(ln, *why) for ln, task in lines if (why := _problem(benchmark, task))]
        if problems:
            raise TaskFileError(source, problems, "task(s) failing verification by execution")
    tasks = [t for _, t in lines]
    if guard:
        refuse_test_tasks(tasks, f"{where} ({source})", benchmark.leak_reason)
    return tasks


def _problem(bench: Benchmark, task) -> tuple[str, str] | None:
    """The benchmark's import check, in a folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="verify_") as tmp:
        return bench.import_problem(task, Path(tmp))


def load_task_file(
    path: str | Path, where: str, *, benchmark: Benchmark, verify: bool = True, guard: bool = True
) -> list:
    """parse_task_bytes on a file (DoorError when it cannot be read)."""
    data = read_bytes(path, "task file")
    return parse_task_bytes(data, str(path), where, verify=verify, guard=guard, benchmark=benchmark)

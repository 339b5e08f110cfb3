"""Batch scoring: ground-truth replay over a task set, and answers files (`rods env replay|score`)."""

from __future__ import annotations

import time
from pathlib import Path

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.config.inputs import Bad, DoorError, jsonl_lines, read_bytes


class AnswerFileError(DoorError):
    """An answers file is malformed or names unknown tasks; the message lists file:line problems."""


def replay_report(tasks: list[Task]) -> dict:
    """Replay each task's ground truth and check it; returns counts, failures and throughput."""
    t0 = time.perf_counter()
    failed, calls = [], 0
    for t in tasks:
        calls += t.n_calls
        if score_calls(t, t.ground_truth).accuracy < 1:
            failed.append(t.id)
    dt = time.perf_counter() - t0
    n = len(tasks)
    return {
        "tasks": n,
        "passed": n - len(failed),
        "failed": failed,
        "calls": calls,
        # each call runs twice (model side and ground-truth side of the checker)
        "calls_per_s": 2 * calls / dt if dt else 0.0,
        "ms_per_task": 1000 * dt / n if n else 0.0,
    }


def read_answers(path: str | Path) -> list[dict]:
    """Read and validate an answers JSONL, all or nothing: one {"id": str, "turns": [[str, ...], ...]} per
    line, each id once; an unreadable, malformed or empty file raises DoorError naming file:line."""
    out, problems, seen = [], [], {}
    for ln, rec in jsonl_lines(read_bytes(path, "answers file"), str(path)):
        if isinstance(rec, Bad):
            problems.append(f"{path}:{ln}: {rec.field}: {rec.reason}")
        elif not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            problems.append(f"{path}:{ln}: id: a record needs a string 'id'")
        elif not isinstance(turns := rec.get("turns"), list) or not all(
            isinstance(t, list) and all(isinstance(c, str) for c in t) for t in turns
        ):
            problems.append(f"{path}:{ln}: turns: must be a list of lists of call strings")
        elif rec["id"] in seen:
            problems.append(f"{path}:{ln}: id: {rec['id']!r} answered twice (first on line {seen[rec['id']]})")
        else:
            seen[rec["id"]] = ln
            out.append({"id": rec["id"], "turns": turns, "line": ln})
    if problems:
        raise AnswerFileError(f"{len(problems)} malformed record(s):\n" + "\n".join(problems[:20]))
    if not out:
        raise AnswerFileError(f"{path}: no answers in the file; nothing to score")
    return out


def score_answers(answers: list[dict], tasks: dict[str, Task]) -> dict:
    unknown = [f"line {a['line']}: unknown task id {a['id']!r}" for a in answers if a["id"] not in tasks]
    wrong = [
        f"line {a['line']}: {a['id']} has {len(a['turns'])} turns, the task has {tasks[a['id']].n_turns}"
        for a in answers
        if a["id"] in tasks and len(a["turns"]) != tasks[a["id"]].n_turns
    ]
    if unknown or wrong:
        raise AnswerFileError("answers do not match the tasks:\n" + "\n".join((unknown + wrong)[:20]))
    rows = []
    for a in answers:
        s = score_calls(tasks[a["id"]], a["turns"])
        rows.append({"id": a["id"], "accuracy": s.accuracy, "progress": s.progress})
    n = len(rows)
    return {
        "n": n,
        "accuracy": sum(r["accuracy"] for r in rows) / n if n else 0.0,
        "progress": sum(r["progress"] for r in rows) / n if n else 0.0,
        "tasks": rows,
    }

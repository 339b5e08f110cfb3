"""`rods env ...`: replay and score through the project's own BFCL environment and checker (the default
benchmark's `protocols.AnswerScoring`)."""

from __future__ import annotations

from pathlib import Path

import typer

from rods_core.benchmarks.protocols import AnswerScoring
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_core.benchmarks.task_files import load_task_file
from rods_lab.cli._common import Split, clean_errors, emit_json, fail


def _scoring() -> AnswerScoring:
    """The benchmark these commands check (the default one), if it offers replay and answers scoring."""
    bench = make_benchmark(DEFAULT_BENCHMARK)
    if not isinstance(bench, AnswerScoring):
        fail(f"benchmark {DEFAULT_BENCHMARK} offers no ground-truth replay or answers scoring")
    return bench


app = typer.Typer(no_args_is_help=True, help="The BFCL multi-turn environment: replay ground truth, score answers.")


@app.command("replay")
def replay(
    split: Split = typer.Option(Split.all.value, help="which seeds"),
    json_out: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Replay every task's ground truth through the environment and checker.

    Example: rods env replay --split all --json
    """
    bench = _scoring()
    report = bench.replay_report(bench.seeds(split.value))
    if json_out:
        emit_json(report)
    else:
        typer.echo(
            f"{report['tasks']} tasks, {report['passed']} passed, {report['calls']} calls, "
            f"{report['calls_per_s']:.0f} calls/s, {report['ms_per_task']:.2f} ms per task"
        )
        for tid in report["failed"]:
            typer.echo(f"FAILED {tid}")
    if report["passed"] != report["tasks"]:
        raise typer.Exit(1)


@app.command("score")
def score(
    answers: Path = typer.Option(..., help='JSONL: {"id": ..., "turns": [[call, ...], ...]}'),
    tasks_file: Path = typer.Option(None, "--tasks", help="task JSONL, verified by replay (default: BFCL seeds)"),
    json_out: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Score an answers file: per-task accuracy and progress reward, and the totals.

    Example: rods env score --answers answers.jsonl --json
    """
    bench = _scoring()
    with clean_errors():
        given = bench.read_answers(answers)
        # scoring is evaluation, not training: test-split tasks are allowed here
        pool = (
            load_task_file(tasks_file, "rods env score --tasks", guard=False, benchmark=bench)
            if tasks_file
            else bench.seeds("all")
        )
        report = bench.score_answers(given, pool)
    if json_out:
        emit_json(report)
        return
    for r in report["tasks"]:
        typer.echo(f"{r['id']}\taccuracy={r['accuracy']:.0f}\tprogress={r['progress']:.3f}")
    typer.echo(f"{report['n']} tasks: accuracy {report['accuracy']:.4f}, progress {report['progress']:.4f}")

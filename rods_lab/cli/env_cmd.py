"""`rods env ...`: replay and score through the project's own BFCL environment and checker."""

from __future__ import annotations

from pathlib import Path

import typer

from rods_lab.cli._common import Split, clean_errors, emit_json, seeds_of_split

app = typer.Typer(no_args_is_help=True, help="The BFCL multi-turn environment: replay ground truth, score answers.")


@app.command("replay")
def replay(
    split: Split = typer.Option(Split.all.value, help="which seeds"),
    json_out: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Replay every task's ground truth through the environment and checker.

    Example: rods env replay --split all --json
    """
    from rods_core.benchmarks.bfcl.scoring import replay_report

    report = replay_report(seeds_of_split(split))
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
    from rods_core.benchmarks.bfcl.scoring import read_answers, score_answers
    from rods_core.benchmarks.bfcl.seeds import load_seeds
    from rods_core.benchmarks.registry import make_benchmark
    from rods_core.task_files import load_task_file

    with clean_errors():
        given = read_answers(answers)
        # scoring is evaluation, not training: test-split tasks are allowed here
        where, bench = "rods env score --tasks", make_benchmark("bfcl_multi_turn")
        pool = load_task_file(tasks_file, where, benchmark=bench, guard=False) if tasks_file else load_seeds("all")
        report = score_answers(given, {t.id: t for t in pool})
    if json_out:
        emit_json(report)
        return
    for r in report["tasks"]:
        typer.echo(f"{r['id']}\taccuracy={r['accuracy']:.0f}\tprogress={r['progress']:.3f}")
    typer.echo(f"{report['n']} tasks: accuracy {report['accuracy']:.4f}, progress {report['progress']:.4f}")

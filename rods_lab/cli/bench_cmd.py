"""`rods bench ...`: the lab's experiments (rods_lab.experiments) and the benchmarks that print figures; those are
scripts under bench/, run as `python -m bench.<script>` (nothing imports bench), so their figures are never
asserted in tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

from rods_core.config import ConfigError, parse_overrides
from rods_lab.cli._common import emit_json, fail
from rods_lab.experiments.heldout import parse_spec

app = typer.Typer(no_args_is_help=True, help="Benchmarks: environment, store, synthesis, buffer, training.")


def run_script(script: str, *args: str) -> str:
    """Run the benchmark script bench/<script>.py (`python -m bench.<script> ARGS`) and return what it printed on
    stdout; its stderr (progress, libraries' chatter) passes through. Its exit code is this command's on failure."""
    done = subprocess.run([sys.executable, "-m", f"bench.{script}", *args], stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        fail(f"`python -m bench.{script}` exited with code {done.returncode} (its output is above)", done.returncode)
    return done.stdout


@app.command("env")
def env(repeats: int = typer.Option(3, min=1, help="take the best of this many passes")) -> None:
    """Tool calls per second on one core and ms per task for replay + check.

    Example: rods bench env
    """
    emit_json(json.loads(run_script("env_bench", "--repeats", str(repeats))))


@app.command("curriculum")
def curriculum(
    budget: int = typer.Option(..., min=1, help="trajectories per run (max_steps = budget // (tasks x rollouts))"),
    methods: str = typer.Option("rods,static,dapo_filter,uniform_synth,env_augment", help="comma-separated methods"),
    repeats: int = typer.Option(1, min=1, help="random seeds per method (K); intervals need K >= 2"),
    config: Path = typer.Option(Path("configs/demo-cpu.yaml"), "--config", "-c", help="the base run config"),
    evals: int = typer.Option(4, min=1, help="held-out evaluations per run (plus step 0)"),
    sets: list[str] = typer.Option([], "--set", help="override a field of every run, e.g. --set eval.limit=8"),
    out: Path = typer.Option(None, help="output folder (default bench/results/curriculum/<timestamp>)"),
    timeout: float = typer.Option(None, help="seconds allowed per run (default: no limit)"),
) -> None:
    """Every method on the same model, seeds and trajectory budget; curves, intervals, goal checks.

    Example: rods bench curriculum --budget 360 --methods rods,static --repeats 2
    """
    from rods_lab.experiments.runner import parse_methods, run

    try:
        folder = run(
            budget, parse_methods(methods), repeats, config, evals, parse_overrides(sets), out, timeout, log=typer.echo
        )
    except (ValueError, ConfigError) as e:
        fail(str(e))
    typer.echo((folder / "summary.md").read_text())


@app.command("demo")
def demo(
    repeats: int = typer.Option(4, min=2, help="run seeds (K); both arms run on each"),
    seed: int = typer.Option(3000, help="the first run seed (repeat k runs seed + k): pick seeds no doc quotes"),
    config: Path = typer.Option(Path("configs/demo-cpu.yaml"), "--config", "-c", help="the demo config"),
    sets: list[str] = typer.Option([], "--set", help="override a field of every run, e.g. --set model.path=models/x"),
    out: Path = typer.Option(None, help="output folder (default bench/results/curriculum/<timestamp>)"),
    report_only: Path = typer.Option(None, "--report", help="only read the headline off this finished folder"),
) -> None:
    """The demo's headline on fresh run seeds: rods / static informative share, held-out gain, collapses.

    Example: rods bench demo --repeats 4 --seed 3000
    """
    from rods_lab.experiments.demo import report, run

    try:
        if report_only is not None:
            report(report_only, log=typer.echo)
        else:
            run(repeats, seed, config, parse_overrides(sets), out, log=typer.echo)
    except (ValueError, ConfigError) as e:
        fail(str(e))


@app.command("curriculum-report")
def curriculum_report(folder: Path = typer.Argument(..., help="a bench/results/curriculum/<timestamp> folder")) -> None:
    """Rewrite an experiment's summary and figures from its runs (e.g. after a newer `rods bench systems`).

    Example: rods bench curriculum-report bench/results/curriculum/20260101-120000
    """
    from rods_lab.experiments.runner import report_again

    try:
        report_again(folder, log=typer.echo)
    except ValueError as e:
        fail(str(e))
    typer.echo((folder / "summary.md").read_text())


@app.command("curriculum-pool")
def curriculum_pool(
    sources: list[str] = typer.Argument(
        ...,
        help="two or more experiment folders of one design, other seeds; FOLDER:method,... takes only those "
        "methods' runs from a folder",
    ),
    out: Path = typer.Option(None, help="output folder (default bench/results/curriculum/pooled-<timestamp>)"),
) -> None:
    """Pool experiments of one design (run with different seeds) into one report with K = their repeats.

    Example: rods bench curriculum-pool bench/results/curriculum/A bench/results/curriculum/B

    Reuse one method's runs while the others are rerun under changed settings (the report lists every
    setting that differs between methods): rods bench curriculum-pool NEW OLD:static
    """
    from rods_lab.experiments.runner import pool

    try:
        folder = pool(sources, out, log=typer.echo)
    except ValueError as e:
        fail(str(e))
    typer.echo((folder / "summary.md").read_text())


@app.command("paper")
def paper(
    budget: int = typer.Option(..., min=1, help="trajectories per run (max_steps = budget // (tasks x rollouts))"),
    arms: str = typer.Option(
        "rods,static,uniform_parents,direct_injection,single_layer,no_budget,paper_streaks",
        help="comma-separated arms: methods, and ablations of rods (rods_lab/experiments/arms.py ABLATIONS)",
    ),
    repeats: int = typer.Option(4, min=1, help="random seeds per arm (K); repeat k of every arm uses seed base+k"),
    config: Path = typer.Option(Path("configs/demo-cpu.yaml"), "--config", "-c", help="the base run config"),
    evals: int = typer.Option(6, min=1, help="held-out evaluations per run (plus step 0)"),
    sets: list[str] = typer.Option([], "--set", help="override a field of every run, e.g. --set eval.limit=100"),
    out: Path = typer.Option(
        None, help="output folder; the same folder again resumes each unfinished run from its last checkpoint"
    ),
    timeout: float = typer.Option(None, help="seconds allowed per run (default: no limit)"),
    heldout: str = typer.Option(
        "h1=8,h2=16x4,h3=100",
        help="held-out sets made once and shared by every run (of a repeat, with --pool-seed-base): H1 variants per "
        "pool seed, H2 seeds x variants outside the pool (h1b=16x4: only parents the warm start scores above 0), "
        "H3 test-split tasks (rods_lab/experiments/heldout.py); none = the config's eval",
    ),
    only: str = typer.Option(
        None, help="comma-separated run ids of the plan (e.g. static_r1) to run now; the others are left as they are"
    ),
    pool_seed_base: int = typer.Option(
        None,
        help="replicates with pools of their own: repeat k of every arm draws its pool with seeds.random.seed = "
        "this + k (give seeds.random.n by --set) and gets held-out sets made for that pool",
    ),
    summaries: Path = typer.Option(
        None, help="write each finished run's JSON summary here; a run whose valid summary is here is skipped"
    ),
    offline_large_ratio: int = typer.Option(
        None, min=1, help="offline_large's M = this x rods' M of the same repeat (default: 50 variants per seed)"
    ),
) -> None:
    """The paper's comparison: arms x K repeats on one budget, with a time estimate; restartable per run.

    Example: rods bench paper --budget 1440 --arms rods,static,single_layer --repeats 4 --out bench/results/paper/a

    Replicates with pools of their own, summaries kept: rods bench paper --budget 1440 --arms rods,static
    --repeats 16 --pool-seed-base 1000 --set seeds.ids=null --set seeds.random.n=16 --summaries runs/
    """
    from rods_lab.experiments.arms import parse_arms, run
    from rods_lab.experiments.report import write

    try:
        spec = parse_spec(heldout)
        runs = [r.strip() for r in only.split(",") if r.strip()] if only else None
        overrides = parse_overrides(sets)
        folder = run(
            budget, parse_arms(arms), repeats, config, evals, overrides, out, timeout, typer.echo, spec, runs,
            pool_seed_base, summaries, offline_large_ratio,
        )  # fmt: skip
        write(folder, folder / "report", log=typer.echo)
    except (ValueError, ConfigError) as e:
        fail(str(e))
    typer.echo((folder / "report" / "summary.md").read_text())


@app.command("pool-criteria")
def pool_criteria(
    summaries: list[Path] = typer.Argument(
        ...,
        help="folders of run summaries (`rods bench paper --summaries`), one a platform, the first counting first",
    ),
    look: str = typer.Option(None, help="interim or final (default: the look the replicate count makes)"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON instead of Markdown"),
) -> None:
    """The pool-replicates design's P1-P3 on the H1 progress area, from run summaries alone.

    Example: rods bench pool-criteria docs/experiments/pool-replicates/runs docs/experiments/pool-replicates/runs-avx2
    """
    from rods_lab.experiments.pool_criteria import far_task_diffs, far_task_markdown, from_summaries, markdown

    try:
        result, read = from_summaries(summaries, look)
    except ValueError as e:
        fail(str(e))
    if as_json:
        emit_json({**result.as_dict(), "far_tasks": far_task_diffs(read)})
    else:
        typer.echo("\n".join([*markdown(result), *far_task_markdown(read)]))


@app.command("pool-report")
def pool_report(
    summaries: list[Path] = typer.Argument(
        ...,
        help="the design's run summaries (`rods bench paper --summaries`), a folder a platform, the first counting first",
    ),
    out: Path = typer.Option(None, help="where report.md and figures/ go (default: the first folder's parent)"),
    per_step: int = typer.Option(48, min=1, help="trajectories a training step (the design's 2,880 over 60 steps)"),
    png: bool = typer.Option(True, help="export PNGs beside the figures' JSON (kaleido)"),
    look: str = typer.Option(None, help="interim or final (default: the look the complete replicates make)"),
) -> None:
    """The pool-replicates design's report: set sizes, P1-P3, the audit, the secondary outcomes, figures, over the
    replicates the look reads.

    Example: rods bench pool-report docs/experiments/pool-replicates/runs docs/experiments/pool-replicates/runs-avx2
    """
    import os

    from rods_lab.experiments.pool_criteria import read_summaries
    from rods_lab.experiments.pool_report import write

    out = out or summaries[0].resolve().parent
    folders = [os.path.relpath(f.resolve(), out.resolve()) for f in summaries]
    try:
        found = read_summaries(*summaries)
        if not found:
            raise ValueError(f"{', '.join(map(str, summaries))}: no run summaries (<run id>.json) to read")
        path = write(found, out, per_step, png, log=typer.echo, folders=folders, look=look)
    except ValueError as e:
        fail(str(e))
    typer.echo(path.read_text())


@app.command("pilot-length")
def pilot_length(
    summaries: Path = typer.Argument(..., help="the depletion pilot's run summaries (`rods bench paper --summaries`)"),
    runs: Path = typer.Option(
        None, help="the pilot's run folders (`<out>/runs`): each run's collapse check (`rods bench demo`'s) is added"
    ),
) -> None:
    """The pool-replicates design's run length L from its depletion pilot: static's informative share.

    Example: rods bench pilot-length docs/experiments/pool-replicates/pilot-runs --runs bench/results/paper/p/runs
    """
    from rods_lab.experiments.demo import run_collapses
    from rods_lab.experiments.pool_criteria import length_from_summaries

    try:
        found = length_from_summaries(summaries)
        if runs is not None:
            if not runs.is_dir():
                raise ValueError(f"{runs}: no such folder of run folders")
            found["collapses"] = {r: run_collapses(runs / r) for r in found["runs_all"] if (runs / r).is_dir()}
        emit_json(found)
    except ValueError as e:
        fail(str(e))


@app.command("paper-report")
def paper_report(
    folder: Path = typer.Argument(..., help="a `rods bench paper` or `rods bench curriculum` folder"),
    out: Path = typer.Option(None, help="where the figures go (default docs/experiments/<folder name>)"),
    png: bool = typer.Option(True, help="export PNGs through kaleido (~30 s); --no-png writes the JSON only"),
) -> None:
    """The figures a paper prints (PNG + the JSON behind them) and summary.md, from one experiment folder.

    Example: rods bench paper-report bench/results/paper/a --out docs/experiments/cpu-paper
    """
    from rods_lab.experiments.report import write

    try:
        target = write(folder, out or Path("docs/experiments") / Path(folder).name, png=png, log=typer.echo)
    except ValueError as e:
        fail(str(e))
    typer.echo((target / "summary.md").read_text())


@app.command("systems")
def systems(
    as_json: bool = typer.Option(False, "--json", help="print the JSON report instead of Markdown"),
    config: Path = typer.Option(
        Path("configs/demo-cpu.yaml"), "--config", "-c", help="the run config of the step timing"
    ),
    steps: int = typer.Option(6, min=2, help="timed training steps per arm (after one warm-up step)"),
    model: Path = typer.Option(None, help="model folder for the step timing (default: the config's)"),
    quick: bool = typer.Option(False, help="smaller store and synthesis workloads (for tests)"),
) -> None:
    """System figures: environment, replay, synthesis, detector/buffer, store, generation, step breakdown,
    and the overhead of a rods step over a plain TRL GRPO step.

    Example: rods bench systems --json
    """
    args = ["--config", str(config), "--steps", str(steps), *(["--model", str(model)] if model else [])]
    out = run_script("systems_bench", *args, *(["--quick"] if quick else []), *(["--json"] if as_json else []))
    emit_json(json.loads(out)) if as_json else typer.echo(out, nl=False)


@app.command("store")
def bench_store(
    rows: int = typer.Option(1_000_000, min=1000, help="task_stats rows to write"),
    tasks_per_step: int = typer.Option(512, min=1, help="rows per step (tasks with statistics per step)"),
    step_s: float = typer.Option(30.0, min=0.001, help="step time the write share is measured against"),
    out: Path = typer.Option(Path("bench/results/store"), help="scratch run folder (deleted first)"),
) -> None:
    """Write `rows` task statistics as a run would; print write share of a step and query p95.

    Example: rods bench store --rows 1000000
    """
    args = ["--rows", str(rows), "--tasks-per-step", str(tasks_per_step), "--step-s", str(step_s), "--out", str(out)]
    emit_json(json.loads(run_script("store_bench", *args)))

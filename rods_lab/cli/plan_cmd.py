"""`rods plan`: the pre-flight memory estimate of a run on N GPUs (rods_core.memory_plan), and the same check
`rods train` makes before a multi-GPU run loads its model."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import typer

from rods_core.memory_plan import STRATEGIES, GiB, parse_size, plan_run, render, strategy_from_env
from rods_lab.cli._common import choices, clean_errors, fail, load_run_config

StrategyChoice = choices("StrategyChoice", STRATEGIES)
GPU_MEMORY_ENV = "RODS_GPU_MEMORY"  # e.g. 80GB: what `rods train` plans for when nvidia-smi is not there


def plan(
    config: Path = typer.Option(..., "--config", "-c", help="YAML run config (see configs/)"),
    gpus: int = typer.Option(..., "--gpus", min=1, help="training GPUs (one process each)"),
    gpu_memory: str = typer.Option(
        ..., "--gpu-memory", help="memory of one GPU, e.g. 80GB (GB = GiB, as GPUs are labelled)"
    ),
    strategy: StrategyChoice = typer.Option(
        "fsdp2", help="ddp (configs/accelerate/8gpu.yaml), fsdp2 (fsdp.yaml), zero3"
    ),
    sets: list[str] = typer.Option([], "--set", help="override a field, e.g. --set grpo.micro_batch=2"),
    runs: int = typer.Option(1, "--runs", min=1, help="runs of this size a lab keeps (the disk line's multiplier)"),
) -> None:
    """Estimate one GPU's memory for a run; exit 2, naming the setting to change, when it cannot fit.

    Example: rods plan --config configs/paper-qwen3-4b.yaml --gpus 8 --gpu-memory 80GB
    """
    cfg = load_run_config(config, sets)
    with clean_errors():
        p = plan_run(cfg, gpus, parse_size(gpu_memory), strategy.value)
    typer.echo(render(p, f"{config}: {gpus} x {p.memory / GiB:.0f} GiB, {strategy.value}", refusals=False))
    disk = p.checkpoint * p.kept
    typer.echo(f"disk: {disk / GiB:.1f} GiB of checkpoints per run x {runs} run(s) = {disk * runs / GiB:.1f} GiB")
    if not p.fits:
        fail("; ".join(p.refusals))


def detected_gpu_memory(environ=os.environ) -> int | None:
    """One GPU's memory: $RODS_GPU_MEMORY, else the smallest GPU nvidia-smi lists, else None (unknown)."""
    if environ.get(GPU_MEMORY_ENV):
        return parse_size(environ[GPU_MEMORY_ENV], GPU_MEMORY_ENV)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return min(int(x) for x in out.split()) * 1024**2  # MiB
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def train_preflight(cfg, gpus: int, environ=os.environ) -> None:
    """Before a multi-GPU `rods train` loads its model: the plan for `gpus` GPUs of the detected memory, with
    the launcher's sharding; exit 2 with the refusal when it cannot fit. Skipped on CPU, on one GPU, when the
    GPU memory is unknown, and for a model still to be built."""
    if cfg.grpo.use_cpu or gpus < 2 or cfg.model.build_if_missing:
        return
    memory = detected_gpu_memory(environ)
    if memory is None:
        return
    with clean_errors():
        p = plan_run(cfg, gpus, memory, strategy_from_env(environ))
    if not p.fits:
        if environ.get("RANK", "0") == "0":
            title = f"pre-flight: {gpus} x {memory / GiB:.0f} GiB, {strategy_from_env(environ)}"
            typer.echo(render(p, title, refusals=False))
            fail("; ".join(p.refusals) + " (rods plan prints this table; --skip-plan starts anyway)")
        raise typer.Exit(2)

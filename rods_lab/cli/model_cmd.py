"""`rods model ...`: build local policies (the tiny model for CPU runs and CI)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import typer

from rods_core.build import ModelFolderError, ensure_model
from rods_core.config import ConfigError, TinyModelConfig, load_config
from rods_core.config.inputs import DoorError, check_output_dir
from rods_core.policy.tiny import init_tiny
from rods_core.ranks import Ranks, under_launcher
from rods_core.threads import apply_thread_policy
from rods_lab.cli._common import BenchmarkChoice, choices, emit_json, fail
from rods_lab.cli.handoff import handoff_to_accelerate
from storage.build_progress import write_build_progress

app = typer.Typer(no_args_is_help=True, help="Build local policy models.")
_D = TinyModelConfig()
Arch = choices("Arch", get_args(TinyModelConfig.model_fields["arch"].annotation))


@app.command("init-tiny")
def init_tiny_cmd(
    out: Path = typer.Option(..., help="folder to write the model, tokenizer and rods_model.json to"),
    arch: Arch = typer.Option(_D.arch, help="architecture family"),
    hidden: int = typer.Option(_D.hidden, help="hidden size"),
    layers: int = typer.Option(_D.layers, help="decoder layers"),
    heads: int = typer.Option(_D.heads, help="attention heads"),
    kv_heads: int = typer.Option(_D.kv_heads, help="key/value heads"),
    ffn: int = typer.Option(_D.ffn, help="MLP intermediate size"),
    vocab: int = typer.Option(_D.vocab, help="BPE vocabulary size"),
    max_positions: int = typer.Option(_D.max_positions, help="maximum sequence length"),
    seed: int = typer.Option(_D.seed, help="initialisation seed"),
    json_out: bool = typer.Option(False, "--json", help="print the model card as JSON"),
) -> None:
    """Train a tokenizer on tool docs + train seeds and build a tiny Qwen-architecture model.

    Example: rods model init-tiny --out models/tiny
    """
    from pydantic import ValidationError
    from rich.progress import Progress

    try:
        cfg = TinyModelConfig(
            arch=arch.value,
            hidden=hidden,
            layers=layers,
            heads=heads,
            kv_heads=kv_heads,
            ffn=ffn,
            vocab=vocab,
            max_positions=max_positions,
            seed=seed,
        )
    except ValidationError as e:
        fail("; ".join(f"--{'-'.join(map(str, x['loc'])).replace('_', '-')}: {x['msg']}" for x in e.errors()))
    if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads:
        fail("--hidden must be a multiple of --heads, and --heads a multiple of --kv-heads")

    try:
        check_output_dir(out, "--out folder")
    except DoorError as e:
        fail(str(e))
    with Progress(transient=True) as bar:
        job = bar.add_task("building", total=3)

        def step(name: str) -> None:
            bar.update(job, description=f"init-tiny: {name}", advance=0 if name == "tokenizer" else 1)

        card = init_tiny(cfg, out, progress=step)
        bar.update(job, completed=3)
    if json_out:
        emit_json(card)
    else:
        typer.echo(f"{out}: {card['arch']} {card['params'] / 1e6:.2f}M parameters, vocab {card['tokenizer']['vocab']}")


@app.command("demo")
def demo_cmd(
    config: Path = typer.Option(
        Path("configs/demo-cpu.yaml"), "--config", "-c", help="the run config naming the model"
    ),
    processes: int = typer.Option(
        None, "--processes", min=1, help="SFT processes (default: the config's compute.processes)"
    ),
    for_run: Path = typer.Option(
        None,
        "--for-run",
        help="build on behalf of this run folder (its build.json shows the phases; the build lock names the run); "
        "`rods train` passes it when it hands its build to every core",
        hidden=True,
    ),
    benchmark: BenchmarkChoice = typer.Option(
        None,
        "--benchmark",
        help="warm-start on this benchmark's demonstrations: BFCL multi-turn's demo seeds by default (the model "
        "`rods train` builds), another's the config's seeds and benchmark options (a config of that benchmark)",
        show_default=False,
    ),
    out: Path = typer.Option(None, "--out", help="build into this folder (default: the config's model.path)"),
) -> None:
    """Build the config's tiny model and warm-start it (init-tiny + SFT on the demo seeds and their variants),
    exactly as `rods train` does when model.build_if_missing is set; nothing happens if the folder holds a model.

    Example: rods model demo
    Memory: rods model demo --config configs/memory-cpu.yaml --benchmark bfcl_memory_kv --out models/tiny-memory
    """
    import sys

    try:
        overrides: dict = {"compute.processes": processes} if processes else {}
        if out:
            overrides["model.path"] = str(out)
        cfg = load_config(config, overrides)
        n = cfg.compute.processes
        if n > 1 and not under_launcher() and not (Path(cfg.model.path) / "config.json").exists():
            handoff_to_accelerate(n, sys.argv[1:], cpu=cfg.grpo.use_cpu)
        apply_thread_policy(cfg.compute.threads)
        ranks = Ranks.for_run(cfg.grpo) if under_launcher() else None
        main = ranks is None or ranks.main
        progress = None
        if for_run is not None and main:

            def progress(phase: str, **fields) -> None:
                write_build_progress(for_run, phase, **fields)

        path = ensure_model(
            cfg,
            log=typer.echo if main else lambda *_: None,
            ranks=ranks,
            run_id=for_run.name if for_run is not None else None,
            progress=progress,
            benchmark=benchmark.value if benchmark else None,
        )
        if ranks is not None:
            ranks.close()
        if main:
            typer.echo(f"model ready: {path}")
    except (ConfigError, ModelFolderError) as e:
        fail(str(e))

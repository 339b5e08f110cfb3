"""The embedded default's model build: a tiny model initialised locally and warm-started on demonstrations.

`ensure_model(cfg)` returns the config's model folder, building it first when it is missing and the
config allows (`model.build_if_missing`): init-tiny (tokenizer + weights), verified variants of the demo
seeds for diversity, then the SFT warm start (policy/sft.py), reporting each phase to `progress`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rods_core.config import RunConfig
from rods_core.doors import model_folder
from rods_core.policy.tiny import ModelFolderError


def ensure_model(
    cfg: RunConfig, log: Callable[[str], None] = print, *, ranks=None, run_dir: Path | None = None
) -> Path:
    """The policy folder; builds the tiny model and warm-starts it when allowed and missing.

    With several processes every rank takes part in the SFT (data-parallel); rank 0 alone builds the
    untrained model first and writes the result. The build's phases go to `run_dir`/build.json. A hub id
    is resolved from the local Hugging Face cache (doors.model_folder)."""
    path = model_folder(cfg.model.path, cfg.model.build_if_missing)
    if (path / "config.json").exists():
        return path
    if not cfg.model.build_if_missing:
        raise ModelFolderError(
            f"model.path {path} holds no model; point it at a local model folder, run `rods model init-tiny` "
            "and `rods sft`, or set model.build_if_missing: true"
        )
    progress = None
    if run_dir is not None and (ranks is None or ranks.main):
        from storage.build_progress import write_build_progress

        def progress(phase: str, **fields) -> None:
            write_build_progress(run_dir, phase, **fields)

    try:
        build_demo_model(cfg, log, ranks=ranks, progress=progress)
    except BaseException as e:
        if progress is not None:
            progress("failed", detail=f"{type(e).__name__}: {e}"[:2000])
        raise
    if progress is not None:
        progress("done")
    return path


def build_demo_model(cfg: RunConfig, log: Callable[[str], None] = print, *, ranks=None, progress=None) -> dict:
    """init-tiny + verified variants + SFT warm start into cfg.model.path; returns the SFT figures."""
    from rods_core.policy.demo import demo_seeds
    from rods_core.policy.sft import run_sft
    from rods_core.policy.tiny import init_tiny
    from rods_core.tasksets import fresh_variants

    report = progress or (lambda phase, **fields: None)
    path = Path(cfg.model.path)
    raw = path.with_name(path.name + "-init")
    log(f"building the tiny model in {raw} …")
    report("tokenizer")
    if ranks is None or ranks.main:
        init_tiny(cfg.model.tiny, raw)
    if ranks is not None:
        ranks.share(None)  # a barrier: the other ranks read the untrained model rank 0 wrote
    seeds = demo_seeds()
    per_seed = cfg.model.sft_variants_per_seed
    report("variants", done=0, total=per_seed * len(seeds))
    variants = fresh_variants(seeds, per_seed, cfg, "warm-start") if per_seed else []
    report("variants", done=len(variants), total=per_seed * len(seeds))
    log(
        f"warm-starting on {len(seeds)} demo seeds + {len(variants)} variants (stops at loss {cfg.model.sft.loss_target}) …"
    )
    figures = run_sft(raw, path, seeds + variants, cfg.model.sft, progress=report, report_to=cfg.report.report_to())
    log(f"warm start done: {json.dumps({k: v for k, v in figures.items() if k != 'sft/loss_curve'})}")
    return figures

"""A step's generation batch as the update saw it, written for replaying that update offline.

With `report.batch_record` on, every process writes `<run folder>/batches/step-<N>-rank<r>.pt` after TRL has
scored its rollouts: the token ids and masks, the advantages TRL computed from the whole batch's rewards, TRL's
token normaliser, and each row's task and progress reward. `bench/step_replay.py` loads a step's files with the
checkpoint of the step before it and re-runs the update, whole or with groups left out, to show what it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

# TRL's per-row tensors the update reads (the rest of its output is multimodal or KL-only)
ROW_KEYS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask", "advantages")


def batch_file(run_dir: Path, step: int, rank: int) -> Path:
    return Path(run_dir) / "batches" / f"step-{step}-rank{rank}.pt"


def write_batch(run_dir: Path, step: int, rank: int, output: dict, rows: list[tuple[str, float]]) -> Path:
    """Save one process's share of step `step`'s generation batch; `rows` are (task id, reward) per rollout,
    in the batch's row order. Written to a temporary name and renamed, so a reader never sees half a file."""
    path = batch_file(run_dir, step, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {k: output[k].detach().cpu() for k in ROW_KEYS if isinstance(output.get(k), torch.Tensor)}
    record["num_items_in_batch"] = float(output["num_items_in_batch"])
    record["task_ids"] = [r[0] for r in rows]
    record["rewards"] = [float(r[1]) for r in rows]
    tmp = path.with_suffix(".tmp")
    torch.save(record, tmp)
    tmp.replace(path)
    return path


@dataclass
class RecordedBatch:
    """Every process's rows of one step, concatenated in rank order (one process's view of the whole batch)."""

    step: int
    tensors: dict[str, torch.Tensor]  # per row; prompts left-padded, completions right-padded to a common width
    task_ids: list[str]
    rewards: list[float]
    num_items_in_batch: float  # TRL's token normaliser: model tokens of the whole generation batch
    ranks: int


def _pad_to(x: torch.Tensor, width: int, left: bool) -> torch.Tensor:
    pad = width - x.size(1)
    return torch.nn.functional.pad(x, (pad, 0) if left else (0, pad)) if pad > 0 else x


def read_batch(run_dir: Path, step: int) -> RecordedBatch:
    """Step `step`'s rows from every process that wrote one; FileNotFoundError naming the file when none did."""
    files = sorted(Path(run_dir, "batches").glob(f"step-{step}-rank*.pt"), key=lambda p: int(p.stem.rsplit("rank")[1]))
    if not files:
        raise FileNotFoundError(f"{batch_file(run_dir, step, 0)}: no recorded batch (was report.batch_record on?)")
    parts = [torch.load(f, weights_only=True) for f in files]
    tensors = {}
    for key in ROW_KEYS:
        xs = [p[key] for p in parts if key in p]
        if not xs:
            continue
        if xs[0].dim() == 1:
            tensors[key] = torch.cat(xs)
            continue
        width = max(x.size(1) for x in xs)
        tensors[key] = torch.cat([_pad_to(x, width, left=key.startswith("prompt")) for x in xs])
    return RecordedBatch(
        step=step,
        tensors=tensors,
        task_ids=[t for p in parts for t in p["task_ids"]],
        rewards=[r for p in parts for r in p["rewards"]],
        num_items_in_batch=parts[0]["num_items_in_batch"],
        ranks=len(parts),
    )

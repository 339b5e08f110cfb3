"""Replay one recorded GRPO update offline and show what it did: `python -m bench.step_replay RUN_DIR --step N`.

The run must have recorded its batches (`report.batch_record: true`) and kept the checkpoint of step N-1. From
that checkpoint (weights, AdamW state, learning rate) the update of step N is run again through the run's own
trainer (TRL's loss, the shared-prompt log-probs, gradient clipping, AdamW), in one process over every
process's rows (the same gradient as the run's all-reduce: TRL's DAPO loss divides by the whole batch's
tokens). It prints
- the batch: each group's task, its kind (seed or synthesized), rewards, advantages, model tokens, and the share
  of the update's weight it carries (sum of |advantage| x tokens over the batch's);
- each group's own gradient: its norm and its cosine with the whole batch's gradient;
- counterfactual updates from the same start (the whole batch, seeds only, synthesized tasks only, the batch
  without its heaviest group) and, for each, the sampled progress of the target tasks afterwards (the same
  random numbers for every arm) and the mean log-prob of the target's own successful rollouts;
- the check that the whole-batch replay lands on the run's checkpoint of step N (max |weight difference|).
"""

from __future__ import annotations

import argparse
import copy
import math
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

from rods_core.batch_record import RecordedBatch, read_batch
from rods_core.config import load_config
from rods_core.ids import lineage_of
from rods_core.loop import Policy
from rods_core.policy.backends import choose_generator
from rods_core.ranks import Ranks
from rods_core.rollout import episode_benchmark, run_episodes
from rods_core.tasksets import run_benchmark, select_seeds
from rods_core.trainer import RodsGRPOTrainer, trim_padding


def group_rows(batch: RecordedBatch, g: int) -> list[tuple[str, list[int]]]:
    """(task id, row indices) per GRPO group: G contiguous rows of one task."""
    return [(batch.task_ids[i], list(range(i, i + g))) for i in range(0, len(batch.task_ids), g)]


def model_tokens(batch: RecordedBatch) -> torch.Tensor:
    t = batch.tensors
    mask = t["completion_mask"] * t["tool_mask"] if "tool_mask" in t else t["completion_mask"]
    return mask.sum(1)


def inputs_for(batch: RecordedBatch, rows: list[int]) -> dict:
    """TRL's loss inputs for a subset of rows, keeping the whole batch's token normaliser (as a group's share of
    the real update, not a re-normalised update of its own)."""
    out = {k: v[rows] for k, v in batch.tensors.items()}
    out["num_items_in_batch"] = torch.tensor(batch.num_items_in_batch)
    return out


class Replayer:
    """The run's trainer rebuilt on the checkpoint of step N-1, able to rerun step N's update on any rows."""

    def __init__(self, run_dir: Path, step: int):
        self.run_dir, self.step = Path(run_dir), step
        self.cfg = load_config(self.run_dir / "config.yaml")
        # step 1 starts from the model folder with AdamW's state empty; a later step from the checkpoint before it
        self.ckpt = self.run_dir / "checkpoints" / f"checkpoint-{step - 1}" if step > 1 else None
        if self.ckpt is not None and not self.ckpt.is_dir():
            raise SystemExit(f"{self.ckpt}: no checkpoint of step {step - 1} (run with grpo.save_steps: 1)")
        self.batch = read_batch(self.run_dir, step)
        self.policy = Policy.load(self.cfg, Path(self.cfg.model.path))
        self.start = load_file(str((self.ckpt or Path(self.cfg.model.path)) / "model.safetensors"))
        self.policy.model.load_state_dict(self.start, strict=False)
        self.trainer = RodsGRPOTrainer(
            model=self.policy.model, tokenizer=self.policy.tokenizer, cfg=self.cfg, out_dir=tempfile.mkdtemp(),
            draw=lambda n: [], task_of=lambda i: None, on_rollout=lambda r: None, episode_cfg=self.policy.episode,
            ranks=Ranks(rank=0, world=1), benchmark=episode_benchmark(self.policy.episode, "bfcl_multi_turn"),
        )  # fmt: skip
        self.trainer.create_optimizer_and_scheduler(num_training_steps=self.cfg.grpo.max_steps)
        fresh = self.trainer.optimizer.state_dict()
        self.opt_start = (
            torch.load(self.ckpt / "optimizer.pt", map_location="cpu", weights_only=True) if self.ckpt else fresh
        )
        self.trainer.current_gradient_accumulation_steps = 1
        self.model = self.trainer.model

    def reset(self) -> None:
        self.model.load_state_dict(self.start, strict=False)
        self.trainer.optimizer.load_state_dict(copy.deepcopy(self.opt_start))
        self.model.zero_grad(set_to_none=True)

    def gradient(self, rows: list[int]) -> tuple[float, torch.Tensor]:
        """(loss, flat gradient) of the rows' share of the update, from the start weights."""
        self.reset()
        self.model.train()
        loss = self.trainer.compute_loss(self.model, inputs_for(self.batch, rows))
        loss.backward()
        grads = [p.grad.flatten() if p.grad is not None else torch.zeros(p.numel()) for p in self.params()]
        return float(loss.detach()), torch.cat(grads)

    def params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def update(self, rows: list[int], lr_scale: float = 1.0) -> float:
        """Apply the update of these rows from the start state, as the run's step does (its learning rate times
        `lr_scale`); returns the gradient norm before clipping."""
        self.reset()
        self.model.train()
        self.trainer.compute_loss(self.model, inputs_for(self.batch, rows)).backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params(), self.cfg.grpo.max_grad_norm)
        for group in self.trainer.optimizer.param_groups:
            group["lr"] *= lr_scale
        self.trainer.optimizer.step()
        return float(norm)

    def step_size(self) -> tuple[float, float]:
        """(L2 norm, max |.|) of the weights' change from the start state."""
        have = self.model.state_dict()
        d = torch.cat([(have[k] - v).flatten() for k, v in self.start.items() if k in have])
        return float(d.norm()), float(d.abs().max())

    def mismatch_with_next_checkpoint(self) -> float | None:
        nxt = self.run_dir / "checkpoints" / f"checkpoint-{self.step}" / "model.safetensors"
        if not nxt.is_file():
            return None
        want = load_file(str(nxt))
        have = self.model.state_dict()
        return max(float((have[k] - v).abs().max()) for k, v in want.items() if k in have)

    @torch.no_grad()
    def target_figures(self, tasks: list, samples: int, seed: int) -> dict[str, float]:
        """Sampled progress of each target (`samples` episodes at the run's temperature, the same random numbers
        whatever the weights) and the mean log-prob per model token of its successful rollouts in the batch."""
        self.model.eval()
        gen = choose_generator(self.model, self.policy.tokenizer)
        out = {}
        for task in tasks:
            torch.manual_seed(seed)
            eps = run_episodes(
                [task] * samples,
                gen,
                self.policy.episode,
                benchmark=episode_benchmark(self.policy.episode, "bfcl_multi_turn"),
            )
            out[f"{task.id} sampled"] = sum(e.reward for e in eps) / len(eps)
            rows = [
                i
                for i, (t, r) in enumerate(zip(self.batch.task_ids, self.batch.rewards, strict=True))
                if t == task.id and r >= 0.5
            ]
            if rows:
                out[f"{task.id} logp"] = self._mean_logp(rows)
        return out

    def _mean_logp(self, rows: list[int]) -> float:
        inputs = self.trainer_inputs(rows)
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        k = inputs["completion_ids"].size(1)
        logps, _ = self.trainer._get_per_token_logps_and_entropies(self.model, ids, mask, k)[:2]
        m = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        return float((logps * m).sum() / m.sum())

    def trainer_inputs(self, rows: list[int]) -> dict:
        return trim_padding(inputs_for(self.batch, rows))


def describe_batch(rp: Replayer, seeds: set[str]) -> list[tuple[str, list[int]]]:
    b, g = rp.batch, rp.cfg.grpo.num_generations
    adv, toks = b.tensors["advantages"], model_tokens(b)
    weight = (adv.abs() * toks).sum()
    groups = group_rows(b, g)
    print(f"step {b.step}: {len(groups)} groups x {g} rollouts from {b.ranks} process(es); {int(toks.sum())} model "
          f"tokens (TRL's normaliser {b.num_items_in_batch:.0f})")  # fmt: skip
    print(f"{'task':34} {'kind':9} {'rewards':38} {'advantages':44} {'tokens':>7} {'weight':>6}")
    for task, rows in groups:
        kind = "seed" if task in seeds else f"synth g{lineage_of(task)[1]}"
        rw = " ".join(f"{b.rewards[i]:.2f}" for i in rows)
        ad = " ".join(f"{float(adv[i]):+.2f}" for i in rows)
        share = float((adv[rows].abs() * toks[rows]).sum() / weight) if weight > 0 else 0.0
        print(f"{task:34} {kind:9} {rw:38} {ad:44} {int(toks[rows].sum()):7d} {share:6.2f}")
    return groups


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--step", type=int, required=True, help="the update to replay (needs checkpoint-<step-1>)")
    ap.add_argument("--target", action="append", default=[], help="a seed task to measure (default: every seed "
                    "in the batch)")  # fmt: skip
    ap.add_argument("--samples", type=int, default=24, help="sampled episodes per target and arm")
    ap.add_argument("--lr-scale", type=float, action="append", default=[], help="also the whole batch at the run's "
                    "learning rate times this (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rp = Replayer(args.run_dir, args.step)
    seeds = {t.id: t for t in select_seeds(rp.cfg, run_benchmark(rp.cfg))}
    groups = describe_batch(rp, set(seeds))
    every = list(range(len(rp.batch.task_ids)))
    _, full = rp.gradient(every)
    print(f"\nwhole-batch gradient norm {float(full.norm()):.4f} (clipped at {rp.cfg.grpo.max_grad_norm})")
    heaviest, heaviest_norm = None, -1.0
    for task, rows in groups:
        _, g = rp.gradient(rows)
        cos = float(g @ full / (g.norm() * full.norm())) if g.norm() > 0 else math.nan
        print(f"  {task:34} own gradient norm {float(g.norm()):.4f}, cosine with the whole {cos:+.3f}")
        if float(g.norm()) > heaviest_norm:
            heaviest, heaviest_norm = task, float(g.norm())
    arms = {
        "whole batch": (every, 1.0),
        "seeds only": ([i for i, t in enumerate(rp.batch.task_ids) if t in seeds], 1.0),
        "synthesized only": ([i for i, t in enumerate(rp.batch.task_ids) if t not in seeds], 1.0),
        f"without {heaviest}": ([i for i, t in enumerate(rp.batch.task_ids) if t != heaviest], 1.0),
        **{f"whole batch, learning rate x {s:g}": (every, s) for s in args.lr_scale},
    }
    targets = [seeds[t] for t in (args.target or dict.fromkeys(t for t in rp.batch.task_ids if t in seeds))]
    rp.reset()
    before = rp.target_figures(targets, args.samples, seed=args.step)
    print(f"\nbefore the update: {_fmt(before)}")
    for name, (rows, scale) in arms.items():
        if not rows:
            print(f"{name}: no rows")
            continue
        norm = rp.update(rows, scale)
        size, biggest = rp.step_size()
        check = rp.mismatch_with_next_checkpoint() if name == "whole batch" else None
        after = rp.target_figures(targets, args.samples, seed=args.step)
        tail = f"; max |w - checkpoint-{args.step}| {check:.2e}" if check is not None else ""
        print(f"{name} ({len(rows)} rollouts, gradient norm {norm:.4f}, weight change L2 {size:.3f} max {biggest:.1e}"
              f"{tail}): {_fmt(after)}")  # fmt: skip


def _fmt(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in d.items())


if __name__ == "__main__":
    main()

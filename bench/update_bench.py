"""Update benchmark: one process's GRPO forward+backward on identical rollouts, TRL's pass vs a shared prompt.

Plays the demo config's seeds x G sampled episodes once (the real prompts and multi-turn completions), lays
them out as TRL does (left-padded prompts, right-padded completions), then alternates two arms on exactly
those inputs:
- `trl`: TRL's own scoring (`GRPOTrainer._get_per_token_logps_and_entropies`), one rollout per pass trimmed
  to its length (the demo's `micro_batch: 1` before `grpo.shared_prompt`), a backward per pass;
- `shared`: `rods_core.trainer.shared_prompt_logps` over the whole batch (each group's prompt once), one
  backward.
Prints the median seconds of each arm, the positions each runs through the model, and how far apart their
log-probs and gradients are. One torch thread (the per-process rule). Run:
`python -m bench.update_bench [--config configs/demo-cpu.yaml] [--repeats 5]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
import types

import torch

from rods_core.config import load_config
from rods_core.policy.cached_generation import CachedHFGenerator
from rods_core.policy.tiny import load_policy
from rods_core.rollout import episode_benchmark, run_episodes
from rods_core.tasksets import run_benchmark, select_seeds
from rods_core.threads import apply_thread_policy
from rods_lab.experiments.machine import describe


def _layout(episodes) -> tuple[torch.Tensor, torch.Tensor, int]:
    """TRL's pass layout: [left-padded prompts | right-padded completions], its mask, the completion width."""
    width = max(len(e.prompt_ids) for e in episodes)
    keep = max(len(e.completion_ids) for e in episodes)
    ids = torch.zeros(len(episodes), width + keep, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, e in enumerate(episodes):
        p, c = len(e.prompt_ids), len(e.completion_ids)
        ids[r, width - p : width] = torch.tensor(e.prompt_ids)
        ids[r, width : width + c] = torch.tensor(e.completion_ids)
        mask[r, width - p : width + c] = 1
    return ids, mask, keep


def run(config: str, repeats: int) -> dict:
    import trl.trainer.utils as trl_utils
    from trl import GRPOTrainer

    from rods_core.trainer import score_completion_positions_only, shared_prompt_logps  # TRL: the run only

    apply_thread_policy(1)
    cfg = load_config(config)
    model, tok, prompt = load_policy(cfg.model.path)
    tasks = select_seeds(cfg, run_benchmark(cfg))[: cfg.grpo.tasks_per_step]
    group = [t for t in tasks for _ in range(cfg.grpo.num_generations)]
    torch.manual_seed(0)
    with torch.no_grad():  # the run's episode settings (sampling, step and context bounds), its chat format
        episode = cfg.episode.model_copy(update={"prompt": prompt})
        bench = episode_benchmark(episode, cfg.benchmark, options=cfg.benchmark_options)
        episodes = run_episodes(group, CachedHFGenerator(model, tok), episode, benchmark=bench)
    ids, mask, keep = _layout(episodes)

    score_completion_positions_only()
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.train()
    accelerator = types.SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True)
    trl_self = types.SimpleNamespace(accelerator=accelerator)  # what TRL's method reads of its trainer

    def trl_arm():
        out = []
        for r in range(ids.size(0)):  # one rollout a pass, trimmed to its own length (rods_core.trainer)
            used = mask[r].nonzero()
            lo, hi = int(used[0]), int(used[-1]) + 1
            row_ids, row_mask = ids[r : r + 1, lo:hi], mask[r : r + 1, lo:hi]
            n = int(mask[r, ids.size(1) - keep :].sum())
            logps, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(trl_self, model, row_ids, row_mask, n)
            logps.sum().backward()
            out.append(torch.nn.functional.pad(logps.detach(), (0, keep - n)))
        return torch.cat(out)

    def shared_arm():
        logps, _ = shared_prompt_logps(model, ids, mask, keep)
        logps.sum().backward()
        return logps.detach()

    arms = {"trl": trl_arm, "shared": shared_arm}
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    results = {}
    for _ in range(repeats):
        for name, arm in arms.items():  # alternating, so drift hits both arms alike
            model.zero_grad()
            t0 = time.perf_counter()
            logps = arm()
            seconds[name].append(time.perf_counter() - t0)
            results[name] = (logps, torch.cat([p.grad.flatten() for p in model.parameters()]))
    (lp_a, g_a), (lp_b, g_b) = results["trl"], results["shared"]
    prompt_len = [len(e.prompt_ids) for e in episodes]
    completion_len = [len(e.completion_ids) for e in episodes]
    prompts = {tuple(e.prompt_ids) for e in episodes}  # one per group
    med = {name: statistics.median(s) for name, s in seconds.items()}
    return {
        "config": config,
        "rollouts": len(episodes),
        "groups": len(prompts),
        "prompt_tokens_mean": round(statistics.mean(prompt_len), 1),
        "completion_tokens_mean": round(statistics.mean(completion_len), 1),
        "positions_trl": sum(prompt_len) + sum(completion_len),
        "positions_shared": sum(len(p) for p in prompts) + sum(completion_len),
        "repeats": repeats,
        "seconds": {name: [round(v, 3) for v in s] for name, s in seconds.items()},
        "median_s": {name: round(v, 3) for name, v in med.items()},
        "speedup": round(med["trl"] / med["shared"], 2),
        "max_abs_logp_diff": float((lp_a - lp_b).abs().max()),
        "grad_rel_diff": float((g_a - g_b).norm() / g_a.norm()),
        "torch_threads": torch.get_num_threads(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/demo-cpu.yaml")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    print(json.dumps({"machine": describe(), **run(args.config, args.repeats)}, indent=2))


if __name__ == "__main__":
    main()

"""Generation benchmark: multi-turn episodes with plain `model.generate` vs the KV-cache-keeping backend.

Prints seconds per episode, generated tokens/s and whether both backends produced identical greedy
episodes. Run: `python -m bench.generation_bench --model models/tiny-sft [--tasks 8] [--samples 4]`.
On a shared machine set OMP_NUM_THREADS=1: torch's spinning threads collapse under CPU contention.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import torch

from rods_core.policy.cached_generation import CachedHFGenerator
from rods_core.policy.demo import demo_seeds
from rods_core.policy.generation import HFGenerator, SamplingConfig
from rods_core.policy.tiny import load_policy
from rods_core.rollout import EpisodeConfig, run_episodes


def _time(tasks, gen, cfg) -> tuple[list, dict]:
    t0 = time.perf_counter()
    eps = run_episodes(tasks, gen, cfg)
    sec = time.perf_counter() - t0
    return eps, {
        "episodes": len(eps),
        "s_per_episode": round(sec / len(eps), 3),
        "gen_tokens": gen.stats.tokens,
        "gen_tokens_per_s": round(gen.stats.tokens / sec, 1),
        "model_tokens_per_episode": round(sum(e.model_tokens for e in eps) / len(eps), 1),
        "context_tokens_per_episode": round(sum(len(e.prompt_ids) + len(e.completion_ids) for e in eps) / len(eps), 1),
    }


def run(model_dir: str, n_tasks: int, samples: int) -> dict:
    model, tok, prompt = load_policy(model_dir)
    tasks = demo_seeds()[:n_tasks]
    greedy = EpisodeConfig(prompt=prompt, sampling=SamplingConfig(temperature=0.0))
    sampled = EpisodeConfig(prompt=prompt, sampling=SamplingConfig(temperature=1.0))
    out: dict = {"torch_threads": torch.get_num_threads(), "tasks": n_tasks}
    a, out["greedy/plain_generate"] = _time(tasks, HFGenerator(model, tok), greedy)
    b, out["greedy/kv_cached"] = _time(tasks, CachedHFGenerator(model, tok), greedy)
    out["greedy/identical"] = all(x.completion_ids == y.completion_ids for x, y in zip(a, b, strict=True))
    group = [t for t in tasks for _ in range(samples)]
    _, out[f"sampled_x{samples}/plain_generate"] = _time(group, HFGenerator(model, tok), sampled)
    _, out[f"sampled_x{samples}/kv_cached"] = _time(group, CachedHFGenerator(model, tok), sampled)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--samples", type=int, default=4)
    a = p.parse_args()
    print(json.dumps(run(a.model, a.tasks, a.samples), indent=2))

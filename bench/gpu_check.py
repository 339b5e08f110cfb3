"""The GPU check: on one CUDA GPU, with no hub access, the project's real path at a real model size.

1. builds a ~0.5B-parameter Qwen3-architecture model from a config (the tiny model's tokenizer, wider and
   deeper layers: `--hidden 1536 --layers 16`), in bf16;
2. warm-starts it briefly on the demo seeds (TRL's SFTTrainer, `rods_core.policy.sft.run_sft`);
3. runs 3 bf16 GRPO steps through `rods train` itself (RodsGRPOTrainer, the curriculum, the store) with HF
   generation (the KV-cached decoder on the GPU; vLLM is not needed);
4. prints tokens/s, the step split (`time/*`) and peak GPU memory, as JSON.
`python -m bench.gpu_check` takes about 5 minutes on an H100/H200; `--smoke` runs the same path on the CPU
with a tiny model (the test suite uses it), so the first GPU run can fail on nothing but the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_config(work: Path, model: Path, gpu: bool, steps: int) -> dict:
    """`rods train` settings: bf16 on the GPU, micro-batches that fit, no vLLM."""
    return {
        "name": "gpu_check",
        "method": "rods",
        "output_dir": str(work / "runs"),
        "workspace": str(work / "ws"),
        "model": {"path": str(model)},
        "seeds": {"subset": "demo", "limit": 16},
        "episode": {"max_steps_per_turn": 3, "max_context_tokens": 2048, "sampling": {"max_new_tokens": 96}},
        "grpo": {
            "num_generations": 8 if gpu else 2,
            "tasks_per_step": 8 if gpu else 2,
            "micro_batch": 8 if gpu else 1,
            "max_steps": steps,
            "learning_rate": 1e-6,
            "save_steps": 1000,
            "use_cpu": not gpu,
            "bf16": gpu,
            "gradient_checkpointing": gpu,
        },
        "eval": {"every": 0, "split": "train", "limit": 4},
        "compute": {"threads": 8 if gpu else 1},
    }


def main(smoke: bool, hidden: int, layers: int, sft_tokens: int, steps: int, keep: bool) -> dict:
    import torch

    from rods_core.config import RunConfig
    from rods_core.loop import StepWatcher, train
    from rods_core.policy.demo import demo_seeds
    from rods_core.policy.sft import SFTSettings, run_sft
    from rods_core.policy.tiny import TinyModelConfig, init_tiny
    from rods_core.threads import apply_thread_policy

    gpu = not smoke
    if gpu and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA GPU visible (run with --smoke for the CPU path)")
    apply_thread_policy(8 if gpu else 1)
    work = Path(tempfile.mkdtemp(prefix="rods-gpu-check-"))
    t0 = time.perf_counter()
    size = {"hidden": hidden, "layers": layers, "heads": hidden // 128, "kv_heads": max(1, hidden // 512)}
    size["ffn"] = hidden * 8 // 3 // 64 * 64
    if smoke:
        size = {"hidden": 64, "layers": 2, "heads": 2, "kv_heads": 1, "ffn": 128}
    card = init_tiny(TinyModelConfig(**size), work / "init")
    built_s = time.perf_counter() - t0
    sft = run_sft(
        work / "init",
        work / "model",
        demo_seeds(),
        SFTSettings(
            token_budget=sft_tokens, use_cpu=not gpu, bf16=gpu, learning_rate=3e-4, warmup_steps=10, loss_target=1e-9
        ),
        show_progress=False,
    )
    rows: list[dict] = []

    class Keep(StepWatcher):
        def after_step(self, row: dict, drawn: list) -> None:
            rows.append(row)

    if gpu:
        torch.cuda.reset_peak_memory_stats()
    cfg = RunConfig.model_validate(run_config(work, work / "model", gpu, steps))
    train(cfg, run_id="gpu_check", log=lambda *_: None, watcher=Keep())
    report = {
        "device": torch.cuda.get_device_name(0) if gpu else "cpu (smoke)",
        "params": card["params"],
        "size": size,
        "build_s": round(built_s, 1),
        "sft": {k: sft[k] for k in ("sft/steps", "sft/seconds", "sft/tokens_per_s", "sft/final_loss")},
        "steps": [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items() if k.startswith(("time/", "train/"))}
            | {"step": r["step"], "gen_tokens_per_s": round(r["train/tokens"] / max(r["time/gen_s"], 1e-9), 1)}
            for r in rows
        ],
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if gpu else None,
        "total_s": round(time.perf_counter() - t0, 1),
    }
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return report


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="the same path on the CPU with a tiny model")
    p.add_argument("--hidden", type=int, default=1536, help="hidden size (1536 x 16 layers = ~0.5B parameters)")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--sft-tokens", type=int, default=None, help="warm-start tokens (default 400k GPU, 5k smoke)")
    p.add_argument("--steps", type=int, default=3, help="GRPO steps")
    p.add_argument("--keep", action="store_true", help="keep the work folder (model, run)")
    a = p.parse_args()
    tokens = a.sft_tokens or (5_000 if a.smoke else 400_000)
    # Libraries print progress to stdout (Trainer's log dicts); stdout carries only the JSON report.
    with contextlib.redirect_stdout(sys.stderr):
        report = main(a.smoke, a.hidden, a.layers, tokens, a.steps, a.keep)
    print(json.dumps(report, indent=2))
    sys.stdout.flush()

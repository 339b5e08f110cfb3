"""Threads and processes on CPU: the SFT warm start (TRL's SFTTrainer, the code `rods model demo` runs) at
1 vs 2 torch threads, quiet and beside a busy neighbour, and at 2 processes x 1 thread through accelerate.

Each configuration is a fresh child process (or `accelerate launch` of two) training a freshly built tiny
model on the demo seeds' demonstrations for a fixed token budget; it prints SFT steps/s and tokens/s as
`rods_core.policy.sft.run_sft` measured them. The neighbour is one single-threaded busy loop, as any
other job on a shared machine would be. Run: `python -m bench.threads_bench [--tokens 60000]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.demo_model import demo_tasks
from rods_core.config import SFTSettings, TinyModelConfig
from rods_core.policy.sft import run_sft
from rods_core.policy.tiny import init_tiny
from rods_core.threads import apply_thread_policy
from rods_lab.experiments.machine import describe

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [  # (name, torch threads per process, processes, busy neighbour)
    ("1 thread, quiet", 1, 1, False),
    ("2 threads, quiet", 2, 1, False),
    ("1 thread, beside a busy neighbour", 1, 1, True),
    ("2 threads, beside a busy neighbour", 2, 1, True),
    ("2 processes x 1 thread, quiet", 1, 2, False),
]


def child(model: str, out: str, tokens: int, threads: int) -> None:
    """One SFT run (inside this process, or one rank of an accelerate launch); rank 0 prints its figures."""
    apply_thread_policy(threads)
    settings = SFTSettings(token_budget=tokens, warmup_steps=0, loss_target=1e-9)
    figures = run_sft(model, out, demo_tasks(), settings, show_progress=False)
    if os.environ.get("RANK", "0") == "0":
        keep = ("sft/steps", "sft/seconds", "sft/tokens", "sft/tokens_per_s", "sft/processes")
        print("FIGURES " + json.dumps({k: figures[k] for k in keep}), flush=True)


def _run(model: Path, tokens: int, threads: int, processes: int, neighbour: bool) -> dict:
    out = tempfile.mkdtemp(prefix="rods-threads-")
    args = ["--child", "--model", str(model), "--out", out, "--tokens", str(tokens), "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if processes > 1:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "configs/accelerate/cpu.yaml"),
               "--num_processes", str(processes), "-m", "bench.threads_bench", *args]  # fmt: skip
    else:
        cmd = [sys.executable, "-m", "bench.threads_bench", *args]
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if neighbour else None
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("FIGURES ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"threads bench child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    figures = json.loads(line.removeprefix("FIGURES "))
    steps_per_s = figures["sft/steps"] / figures["sft/seconds"]
    return {**figures, "steps_per_s": round(steps_per_s, 2), "wall_s": round(wall, 1)}


def run(tokens: int) -> dict:
    model = Path(tempfile.mkdtemp(prefix="rods-threads-model-")) / "tiny"
    init_tiny(TinyModelConfig(), model)
    out = {"machine": describe(), "token_budget": tokens, "runs": {}}
    for name, threads, processes, neighbour in CONFIGS:
        out["runs"][name] = _run(model, tokens, threads, processes, neighbour)
        print(f"{name}: {out['runs'][name]}", file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=60_000, help="SFT tokens per configuration (all processes)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.model, a.out, a.tokens, a.threads)
    else:
        print(json.dumps(run(a.tokens), indent=2))

"""The paper's config, dry-run on CPU: configs/paper-qwen3-4b.yaml with only what a CPU and the tiny model
need changed (no vLLM, no bf16, a tiny model, short episodes, 2 steps) runs the GPU run's code path — two
processes through accelerate, gradient checkpointing, micro-batches — so a first GPU run fails on nothing
but the GPU. Also `bench/gpu_check.py --smoke`: the GPU check script's own path on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rods_core.config import load_config
from storage.reader import RunReader

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "configs" / "paper-qwen3-4b.yaml"
CPU = {  # everything the dry run changes; the rest is the paper config as shipped
    "grpo.use_cpu": True,
    "grpo.bf16": False,
    "grpo.use_vllm": False,
    "grpo.num_generations": 2,
    "grpo.tasks_per_step": 1,
    "grpo.micro_batch": 1,
    "grpo.max_steps": 2,
    "episode.max_steps_per_turn": 1,
    "episode.sampling.max_new_tokens": 16,
    "eval.limit": 2,
}


def test_paper_config_runs_two_steps_on_two_cpu_processes(tmp_path, tiny_model_dir):
    sets = {
        **CPU,
        "model.path": str(tiny_model_dir),
        "output_dir": str(tmp_path / "runs"),
        "workspace": str(tmp_path / "ws"),
    }
    cfg = load_config(PAPER, sets)
    assert cfg.grpo.gradient_checkpointing and cfg.seeds.subset == "all" and cfg.eval.split == "test"
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rods_lab.cli",
            "train",
            "--config",
            str(PAPER),
            *args,
            "--run-id",
            "paper",
            "--processes",
            "2",
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reader = RunReader(tmp_path / "runs" / "paper")
    steps = reader.query('select step, "train/trajectories" t, "time/update_s" u from step order by step')
    assert steps["step"].tolist() == [1, 2] and steps["t"].tolist() == [4.0, 4.0]  # 1 task x 2 x 2 processes
    digests = reader.query("select step, count(distinct digest) d, count(*) n from state_digest group by step")
    assert (digests["d"] == 1).all() and (digests["n"] == 2).all()
    assert reader.query("select count(*) n from eval")["n"].iat[0] == 2  # held-out test split at 0 and the end


def test_gpu_check_script_runs_its_path_on_the_cpu():
    proc = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--smoke", "--steps", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["device"] == "cpu (smoke)" and [s["step"] for s in report["steps"]] == [1, 2]
    assert all(s["time/gen_s"] > 0 and s["time/update_s"] > 0 for s in report["steps"])
    assert report["sft"]["sft/steps"] > 0 and report["peak_gpu_memory_gib"] is None

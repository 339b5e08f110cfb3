"""bench/gpu_check.py's parts that need no GPU: its command line, the run it would start on a GPU (a valid run
config with colocated vLLM, fp32 weights and bf16 autocast), the pre-flight estimate beside it, and the weight-sync
comparison. Its GPU run itself needs a CUDA GPU (`--smoke`, the same path on the CPU, is tests/test_paper_config.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu_check import parse_args, preflight_estimate, run_config, sync_gap
from rods_core.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent


def test_help_runs_without_loading_the_training_stack():
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "--model" in done.stdout and "--no-vllm" in done.stdout and "--smoke" in done.stdout
    assert "--fsdp" in done.stdout and "--budget-s" in done.stdout


def test_arguments_default_to_two_steps_with_vllm_and_a_built_model():
    a = parse_args([])
    assert (a.steps, a.no_vllm, a.model, a.sft_tokens, a.smoke) == (2, False, None, 400_000, False)
    assert (a.fsdp, a.budget_s, a.micro_batch, a.context) == (False, 540, None, None)  # the paper config's pass
    a = parse_args(["--smoke", "--model", "org/name", "--steps", "1"])
    assert (a.sft_tokens, a.model, a.steps) == (5_000, "org/name", 1)
    with pytest.raises(SystemExit):
        parse_args(["--steps", "two"])


def test_the_gpu_run_is_a_valid_run_config_with_colocated_vllm_and_fp32_master_weights(tmp_path, tiny_model_dir):
    cfg = RunConfig.model_validate(run_config(tmp_path, str(tiny_model_dir), True, 2, True, 1e-5, 0.35))
    assert cfg.grpo.use_vllm and cfg.grpo.vllm_mode == "colocate" and not cfg.grpo.use_cpu
    assert cfg.grpo.bf16 and cfg.model.dtype == "float32" and cfg.grpo.max_steps == 2
    assert cfg.grpo.trainer_args == {"vllm_gpu_memory_utilization": 0.35} and cfg.eval.max_batch == 4


def test_the_preflight_estimate_is_printed_when_the_estimator_is_in_the_tree(tmp_path, tiny_model_dir):
    cfg = RunConfig.model_validate(run_config(tmp_path, str(tiny_model_dir), True, 2, True, 1e-5, 0.35))
    estimate = preflight_estimate(cfg, 80 * 2**30)
    if importlib.util.find_spec("rods_core.memory_plan") is None:
        assert estimate is None  # `rods plan`'s estimator is not merged here yet
    else:
        assert estimate["total_gib"] > 0 and "1 GPU" in estimate["table"]


def test_the_weight_sync_gap_is_the_largest_per_token_difference():
    assert sync_gap([-1.0, -2.0, -0.5], [-1.1, -2.0, -0.2]) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        sync_gap([-1.0], [-1.0, -2.0])

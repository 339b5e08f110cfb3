"""bench/gpu_fsdp.py (`bench.gpu_check --fsdp`) without a GPU: the 1.1B model it builds has the parameters the plan
counts, the plan it compares is the paper config's at one GPU without vLLM and fits an 80 GB card, the verdicts,
and its whole path on the CPU (`--smoke`: a tiny model over gloo, real sharded checkpoint files, the memory
comparison skipped with its reason). Its CUDA run itself needs a GPU (docs/measurements.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu_fsdp import (
    BILLION,
    NO_CUDA,
    TINY,
    Budget,
    checkpoint_verdict,
    compare,
    estimate,
    guarded,
    overall,
    run_config,
)
from bench.gpu_fsdp import write_model_config as write_config
from rods_core.memory_plan import GiB, read_model_shape

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("size", [BILLION, TINY], ids=["1.1B", "tiny"])
def test_the_built_model_has_the_parameters_the_plan_counts(tmp_path, size):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = write_config(tmp_path, size)
    with torch.device("meta"):  # the sizes only: no memory, no initialisation
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    built = sum(p.numel() for p in model.parameters())
    assert built == read_model_shape(folder).params
    if size is BILLION:
        assert 1.1e9 < built < 1.2e9 and model.config.tie_word_embeddings


def test_the_plan_is_the_paper_configs_at_one_gpu_without_vllm_and_fits_an_h100(tmp_path):
    cfg = run_config(write_config(tmp_path, BILLION), None, None)
    assert (cfg.grpo.micro_batch, cfg.episode.max_context_tokens, cfg.grpo.use_vllm) == (2, 16384, False)
    assert cfg.grpo.bf16 and cfg.grpo.gradient_checkpointing and cfg.model.dtype == "float32"
    est = estimate(cfg, 80 * GiB)
    p = est.params
    assert est.weights == p * 4 and est.state == p * 16  # fp32 weights, fp32 gradient shards, two fp32 moments
    assert est.checkpoint == p * 12 + BILLION["vocab_size"] * BILLION["hidden_size"] * 4  # the tied head twice
    assert "vLLM (colocated)" not in est.table and "sharded over 1 GPU(s) (fsdp2)" in est.table and "fits" in est.table
    assert est.state + est.pass_ < 40 * GiB  # room on one 80 GB GPU beside the allocator's slack
    # one GPU still holds FSDP2's bf16 copies of the fp32 shards while a micro-batch runs: counted with the pass
    assert "gathered layers" in est.table and "gradients before reduce-scatter" in est.table
    small = estimate(run_config(tmp_path, 1, 4096), 80 * GiB)
    assert small.state == est.state and small.pass_ < est.pass_


def test_a_phase_is_ok_when_the_estimate_covers_the_measured_within_the_loose_bound():
    assert compare("peak", 110, 100)["verdict"] == "ok"
    assert compare("peak", 110, 100)["ratio"] == 1.1
    assert compare("peak", 90, 100)["verdict"] == "fail: the estimate is 10% under the measured"
    assert compare("peak", 200, 100)["verdict"].startswith("warn: the estimate is 2.00x")
    skipped = compare("peak", 100, None)
    assert skipped["measured_gib"] is None and skipped["verdict"] == f"skipped: {NO_CUDA}"


def test_a_checkpoint_is_ok_within_its_tolerance_and_the_report_fails_on_any_failed_check():
    gib = 2**30
    assert checkpoint_verdict(105 * gib, 100 * gib) == "ok" and checkpoint_verdict(95 * gib, 100 * gib) == "ok"
    assert checkpoint_verdict(128 * gib, 100 * gib).startswith("fail: the files are 1.280x")
    assert checkpoint_verdict(2_130_105, 1_914_112) == "ok"  # the tiny model's files: ~216 KB of metadata
    assert overall({"a": {"verdict": "ok"}, "b": {"verdict": "skipped: x"}, "device": "cpu"}) == "ok"
    assert overall({"a": {"verdict": "warn: loose"}, "b": {"verdict": "ok"}}) == "warn"
    assert overall({"a": {"verdict": "warn: loose"}, "b": {"verdict": "fail: under"}}) == "fail"
    assert 0 < Budget(5).left() <= 5


def test_a_check_that_raises_fails_alone_with_its_reason():
    def broken():
        raise RuntimeError("no fused AdamW for DTensor")

    out = guarded(broken)
    assert out["verdict"] == "fail: RuntimeError: no fused AdamW for DTensor" and "broken" in out["traceback"]
    assert guarded(lambda x: {"verdict": x}, "ok") == {"verdict": "ok"}


def test_the_fsdp_check_runs_its_path_on_the_cpu():
    """The tiny model through accelerate's FSDP2 wrapping, the run's scoring and optimizer, its sharded checkpoint
    and the accumulation comparison over a one-rank gloo group: everything but torch's CUDA counters."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--fsdp", "--smoke", "--budget-s", "120"],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout)
    assert r["model"]["params"] == r["model"]["plan_params"] and r["model"]["dtype"] == "torch.float32"
    assert all(p["verdict"] == f"skipped: {NO_CUDA}" for p in r["memory"]["phases"])
    assert len(r["memory"]["steps"]) == 2
    ckpt = r["checkpoint"]
    assert ckpt["state_dict_type"] == "StateDictType.SHARDED_STATE_DICT"
    assert set(ckpt["parts_gib"]) == {"pytorch_model_fsdp_0", "optimizer_0"}
    # every byte the plan counts is on disk, and little else (a tiny model's metadata weighs ~10%)
    assert 1.0 <= ckpt["ratio"] < 1.15, ckpt
    acc = r["accumulation"]
    assert acc["verdict"] == "ok" and acc["decoder_layer"]["sharded"] == "torch.float32"
    assert acc["mlp"]["no_sync"]["unsharded"] == "torch.bfloat16" and acc["mlp"]["no_sync"]["error"] > 1e-3
    assert ckpt["verdict"] == "ok" and r["verdict"] == "ok" and r["total_s"] < 120

"""The pre-flight memory estimate (rods_core.memory_plan, `rods plan`, the check before a multi-GPU `rods train`):
the arithmetic against hand-computed figures on a tiny model, the shipped paper config fitting 8 x 80 GB, and the
baselines as they were shipped before they extended it (no micro-batch, no checkpointing, DDP) refused with the
setting to change. The Qwen3-4B sizes come from tests/fixtures/qwen3-4b-config/config.json, a copy of the
model's own config.json (no weights: the estimate reads only the sizes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from rods_core.config import RunConfig, load_config
from rods_core.memory_plan import (
    GiB,
    ModelShape,
    PlanError,
    RunShape,
    evaluation,
    parse_size,
    pass_activations,
    plan,
    plan_run,
    read_model_shape,
    strategy_from_env,
    training_state,
)
from rods_lab.cli.plan_cmd import train_preflight

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "configs" / "paper-qwen3-4b.yaml"
QWEN3_4B = ROOT / "tests" / "fixtures" / "qwen3-4b-config"
# The tiny model of conftest's tiny_model_dir: hidden 64, 2 layers, 2 heads (head_dim 32), 1 KV head, FFN 128,
# vocabulary 1,000, tied embeddings, Qwen3 (q/k norms)
TINY = ModelShape(hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128, vocab=1000, tied=True, qk_norm=True)
# By hand: q 64x64 + k 64x32 + v 64x32 + o 64x64 + MLP 3 x 64x128 + norms 2x64 + q/k norms 2x32 = 37,056 a layer;
# 2 layers + embeddings 1000x64 (tied: once) + final norm 64 = 138,176
TINY_PARAMS = 138_176
# The baselines as shipped before they extended the paper config (static.yaml set no episode block)
_EPISODE = {"max_steps_per_turn": 5, "max_context_tokens": 16384, "sampling": {"temperature": 1.0, "max_new_tokens": 1024},
            "prompt": {"docs_mode": "json", "result_chars": 4000}}  # fmt: skip
_GRPO = {"num_generations": 16, "tasks_per_step": 4, "max_steps": 200, "learning_rate": 1.0e-6, "use_cpu": False,
         "bf16": True, "use_vllm": True}  # fmt: skip
_EVAL = {"every": 20, "split": "test", "limit": None}
OLD_BASELINES = {
    "static": {"name": "static", "method": "static", "seeds": {"subset": "all"}, "grpo": _GRPO, "eval": _EVAL},
    **{
        m: {"name": m, "method": m, "seeds": {"subset": "all"}, "episode": _EPISODE, "grpo": _GRPO, "eval": _EVAL}
        for m in ("dapo_filter", "uniform_synth", "env_augment")
    },
}


def _run(**kw) -> RunShape:
    base = dict(batch=8, micro_batch=2, context=100, checkpointing=False, bf16=True, dtype="float32",
                use_vllm=False, colocate=True, vllm_utilization=0.3, eval_batch=4)  # fmt: skip
    return RunShape(**{**base, **kw})


def test_parameter_count_matches_the_model_transformers_builds(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    shape = read_model_shape(tiny_model_dir)
    assert shape == TINY and shape.params == TINY_PARAMS
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert sum(p.numel() for p in model.parameters()) == TINY_PARAMS
    qwen = read_model_shape(QWEN3_4B)
    assert qwen.params == 4_022_468_096  # Qwen3-4B: "4.0B" on its card
    # rank 16 on all seven linear layers: 16 x 57,344 (the in + out of q, k, v, o, gate, up, down) x 36 layers
    assert qwen.lora_params(16, "all-linear") == 33_030_144


def test_training_state_by_hand():
    rows = {x.name: x.bytes for x in training_state(TINY, _run(), 2, "fsdp2")}
    assert rows["weights"] == rows["gradients"] == TINY_PARAMS * 4 // 2  # fp32 masters, halved by 2 shards
    assert rows["AdamW moments"] == TINY_PARAMS * 8 // 2
    assert rows["gathered layers"] == (2 * 37_056 + 64_000) * 2  # two bf16 layers and the embeddings
    # each micro-batch's gradient is reduce-scattered layer by layer: one layer's and the embeddings' bf16 at once
    assert rows["gradients before reduce-scatter"] == (37_056 + 64_000) * 2
    ddp = {x.name: x.bytes for x in training_state(TINY, _run(dtype="bfloat16"), 2, "ddp")}
    assert ddp == {"weights": TINY_PARAMS * 2, "gradients": TINY_PARAMS * 2, "AdamW moments": TINY_PARAMS * 4,
                   "DDP gradient buckets": TINY_PARAMS * 2}  # fmt: skip
    one = {x.name for x in training_state(TINY, _run(), 1, "ddp")}
    assert one == {"weights", "gradients", "AdamW moments"}  # one GPU: no DDP wrapper, no buckets
    zero3 = {x.name: x.bytes for x in training_state(TINY, _run(), 2, "zero3")}
    sharded = sum(zero3.values()) - zero3["gathered layers"] - zero3["gradients before reduce-scatter"]
    assert sharded == TINY_PARAMS * 16 // 2 and zero3["gradients"] == TINY_PARAMS * 2 // 2  # bf16 partitions
    lora = {x.name: x.bytes for x in training_state(TINY, _run(lora_r=4), 1, "ddp")}
    # r x (in + out) over q, k, v, o, gate, up, down: 4 x (128 + 96 + 96 + 128 + 192 + 192 + 192) x 2 layers
    assert lora == {"frozen weights": TINY_PARAMS * 4, "LoRA adapter + grads + AdamW": 4 * 1024 * 2 * 16}


def test_activations_lm_head_and_evaluation_by_hand():
    # per token and layer: 4 x 64 + 2 x 2 x 32 + 2 x 1 x 32 + 4 x 128 = 960 elements, bf16 under autocast
    tokens = 2 * 100
    # TRL's LM head: a 200 x 1,000 tile (bf16), the hidden states and their fp32 gradient (200 x 64 x (4 + 2)), the
    # head's fp32 gradient and its cast to the head's dtype (fp32 weights under DDP: 1,000 x 64 x (4 + 4))
    head = 200 * 1000 * 2 + 200 * 64 * 6 + 1000 * 64 * 8
    rows = {x.name: x.bytes for x in pass_activations(TINY, _run())}
    assert rows == {"activations": 2 * tokens * 960 * 2, "LM head (TRL's tiled log-probs)": head}
    ckpt = {x.name: x.bytes for x in pass_activations(TINY, _run(checkpointing=True))}
    assert ckpt["activations (checkpointed)"] == 2 * tokens * 64 * 4 + tokens * 960 * 2  # fp32 layer inputs + 1 layer
    # FSDP2 computes with bf16 parameters: the residual stream and the head's gradient cast are bf16
    fsdp = {x.name: x.bytes for x in pass_activations(TINY, _run(checkpointing=True), "fsdp2")}
    assert fsdp["activations (checkpointed)"] == 2 * tokens * 64 * 2 + tokens * 960 * 2
    assert fsdp["LM head (TRL's tiled log-probs)"] == head - 1000 * 64 * 2
    ev = {x.name: x.bytes for x in evaluation(TINY, _run(), 2, "fsdp2")}
    assert ev == {"eval KV cache": 4 * 100 * (2 * 2 * 1 * 32 * 2), "whole weights to generate": TINY_PARAMS * 2 // 2}


def test_a_checkpoints_size_is_the_engines_files_times_the_kept():
    p = plan(TINY, _run(kept=3), 2, 10 * GiB, "fsdp2")
    # fp32 weights + two fp32 moments, and the tied head again (torch.distributed.checkpoint writes each key)
    assert p.checkpoint == TINY_PARAMS * 12 + 1000 * 64 * 4 and p.kept == 3
    assert any("x 3 kept" in n for n in p.notes)
    assert plan(TINY, _run(), 2, 10 * GiB, "zero3").checkpoint == TINY_PARAMS * 16  # + bf16 copies
    assert plan(TINY, _run(lora_r=4), 1, 10 * GiB, "ddp").checkpoint == 4 * 1024 * 2 * 12


def test_the_total_is_the_persistent_state_plus_the_larger_peak_and_vllm_holds_its_share():
    p = plan(TINY, _run(use_vllm=True), 2, 10 * GiB, "fsdp2")
    persistent = TINY_PARAMS * 16 // 2 + (2 * 37_056 + 64_000) * 2 + (37_056 + 64_000) * 2 + 2 * GiB + 3 * GiB
    head = 200 * 1000 * 2 + 200 * 64 * 6 + 1000 * 64 * 6
    assert p.total == persistent + 2 * 200 * 960 * 2 + head and p.fits
    assert p.kv_tokens == (3 * GiB - TINY_PARAMS * 2 - 2 * GiB) // 256
    small = plan(TINY, _run(use_vllm=True, vllm_utilization=0.1), 2, 10 * GiB, "fsdp2")  # 1 GiB < 2 GiB workspace
    assert not small.fits and "vllm_gpu_memory_utilization to 0.21" in small.refusals[0]


def test_the_estimate_covers_the_one_gpu_measured_peak_closely():
    """bench.gpu_check's run on one H200 (docs/measurements.md, 2026-12-04): a 401M Qwen3-architecture model, fp32
    weights with bf16 autocast, 8 rollouts x 2,048 tokens per pass, checkpointing, no vLLM; torch measured 8.34 GiB
    allocated at the peak. The estimate without its CUDA-context row (which torch's allocator does not count) is
    above it, by less than 10%."""
    from bench.gpu_check import run_config

    model = ModelShape(hidden=1536, layers=16, heads=12, kv_heads=3, head_dim=128, ffn=4096, vocab=3000, tied=True,
                       qk_norm=True)  # fmt: skip
    cfg = RunConfig.model_validate(run_config(Path("/tmp"), "m", gpu=True, steps=2, use_vllm=False, lr=1e-5,
                                              vllm_memory=0.35))  # fmt: skip
    p = plan(model, RunShape.from_config(cfg), 1, 141 * GiB, "ddp")
    allocated = (p.total - 2 * GiB) / GiB
    assert 8.34 <= allocated < 8.34 * 1.10, allocated


def test_the_shipped_paper_config_fits_8_gpus_of_80_gb():
    cfg = load_config(PAPER, {"model.path": str(QWEN3_4B)})
    p = plan_run(cfg, 8, parse_size("80GB"), "fsdp2")
    assert p.fits, p.refusals
    assert p.kv_tokens >= cfg.episode.max_context_tokens and p.total < 80 * GiB
    assert cfg.grpo.trainer_args["vllm_gpu_memory_utilization"] == 0.6 and cfg.grpo.micro_batch == 2
    # what the two settings were derived from: ~8 GiB left, a KV cache of more than 17 full episodes, and a
    # micro-batch of 4 that would not fit
    assert 70 * GiB < p.total < 73 * GiB and p.kv_tokens // cfg.episode.max_context_tokens == 17
    four = load_config(PAPER, {"model.path": str(QWEN3_4B), "grpo.micro_batch": 4})
    assert not plan_run(four, 8, parse_size("80GB"), "fsdp2").fits


@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
@pytest.mark.parametrize("method", sorted(OLD_BASELINES))
def test_the_old_baselines_would_have_been_refused_with_the_setting_to_change(method, strategy):
    cfg = RunConfig.model_validate({**OLD_BASELINES[method], "model": {"path": str(QWEN3_4B)}})
    p = plan_run(cfg, 8, parse_size("80GB"), strategy)
    assert not p.fits and "grpo.gradient_checkpointing: true" in p.refusals[0]
    assert "grpo.micro_batch from 64" in p.refusals[0]


def test_a_refusal_names_the_evaluation_batch_without_vllm():
    run = _run(checkpointing=True, micro_batch=1, eval_batch=64, context=4096)
    # the training pass needs ~45 MB beyond the runtime, the evaluation's KV cache 64 x 4,096 x 256 B = 67 MB
    p = plan(TINY, run, 1, 2 * GiB + 50 * 1024**2, "ddp")
    assert not p.fits and p.refusals[0].endswith("to fit: lower eval.max_batch from 64 to 32")


def test_sizes_strategies_and_model_errors(tmp_path):
    assert parse_size("80GB") == parse_size("80GiB") == parse_size("80") == 80 * GiB
    for bad in ("", "eighty", "-1GB", "0"):
        with pytest.raises(PlanError, match="--gpu-memory"):
            parse_size(bad)
    assert strategy_from_env({"ACCELERATE_USE_FSDP": "true"}) == "fsdp2"
    assert strategy_from_env({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}) == "zero3"
    assert strategy_from_env({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}) == "ddp"
    assert strategy_from_env({}) == "ddp"
    (tmp_path / "config.json").write_text('{"model_type": "x", "hidden_size": 8}')
    with pytest.raises(PlanError, match="num_hidden_layers"):
        read_model_shape(tmp_path)


def test_train_preflight_refuses_before_loading_and_skips_what_it_cannot_know():
    old = RunConfig.model_validate({**OLD_BASELINES["static"], "model": {"path": str(QWEN3_4B)}})
    with pytest.raises(typer.Exit) as e:
        train_preflight(old, 8, {"RODS_GPU_MEMORY": "80GB", "RANK": "1"})
    assert e.value.exit_code == 2
    train_preflight(old, 1, {"RODS_GPU_MEMORY": "80GB"})  # one GPU: not a multi-GPU run
    train_preflight(old.model_copy(update={"grpo": old.grpo.model_copy(update={"use_cpu": True})}), 8, {})
    paper = load_config(PAPER, {"model.path": str(QWEN3_4B)})
    train_preflight(paper, 8, {"RODS_GPU_MEMORY": "80GB", "ACCELERATE_USE_FSDP": "true"})


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_rods_plan_prints_the_table_and_exits_2_naming_the_knob(tmp_path):
    ok = _cli("plan", "--config", str(PAPER), "--gpus", "8", "--gpu-memory", "80GB", "--set", f"model.path={QWEN3_4B}",
              "--runs", "5")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "LM head (TRL's tiled log-probs)" in ok.stdout and "a checkpoint on disk" in ok.stdout
    assert "total (peak)" in ok.stdout and "fits" in ok.stdout
    assert "92.8 GiB of checkpoints per run x 5 run(s) = 464.0 GiB" in ok.stdout  # 46.4 GiB each, 2 kept, 5 runs
    old = tmp_path / "static.yaml"
    import yaml

    old.write_text(yaml.safe_dump({**OLD_BASELINES["static"], "model": {"path": str(QWEN3_4B)}}))
    bad = _cli("plan", "--config", str(old), "--gpus", "8", "--gpu-memory", "80GB", "--strategy", "ddp")
    assert bad.returncode == 2 and "grpo.gradient_checkpointing" in bad.stderr and "Traceback" not in bad.stderr


def test_a_launched_train_refuses_before_any_model_load_and_checks_the_run_id(tmp_path):
    """The launcher's environment (LOCAL_RANK, WORLD_SIZE, FSDP) on one process: the plan refuses the old
    baseline with exit 2 before torch loads anything, and an id that breaks the rule is refused on the rank."""
    import yaml

    old = tmp_path / "static.yaml"
    old.write_text(yaml.safe_dump({**OLD_BASELINES["static"], "model": {"path": str(QWEN3_4B)}}))
    env = {"LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "8", "ACCELERATE_USE_FSDP": "true", "RODS_GPU_MEMORY": "80GB"}
    out = _cli("train", "--config", str(old), "--run-id", "old_static", env=env)
    assert out.returncode == 2 and "grpo.micro_batch" in out.stderr and "total (peak)" in out.stdout
    bad_id = _cli("train", "--config", str(old), "--run-id", "paper-rods", env=env)
    assert bad_id.returncode == 2 and "run id 'paper-rods' is not a valid id" in bad_id.stderr

"""Training precision as TRL sets it: fp32 master weights by default whatever the checkpoint's dtype, model.dtype,
model.attn_implementation and TRL's model_init_kwargs honoured, and the dtype each launcher's optimizer steps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.config import EpisodeConfig, RunConfig
from rods_core.config.run import ModelSettings, init_kwargs_conflicts
from rods_core.loop import Policy
from rods_core.policy.precision import model_init_kwargs, optimizer_dtype
from rods_core.policy.tiny import load_policy
from rods_core.rollout import episode_benchmark
from rods_core.trainer import RodsGRPOTrainer
from tests.conftest import smoke_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bf16_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model saved in bf16, as Qwen's checkpoints are (transformers 5 loads them as bf16 by default)."""
    out = tmp_path_factory.mktemp("bf16") / "model"
    shutil.copytree(tiny_model_dir, out)
    model, _, _ = load_policy(tiny_model_dir)
    model.to(torch.bfloat16).save_pretrained(out)
    return out


def _cfg(tmp_path, model_dir, **overrides) -> RunConfig:
    return RunConfig.model_validate(smoke_config(tmp_path, model_dir, **overrides))


def _dtypes(model) -> set[torch.dtype]:
    return {p.dtype for p in model.parameters()}


def test_a_training_load_keeps_fp32_master_weights_of_a_bf16_checkpoint(bf16_model_dir, tmp_path):
    plain, _, _ = load_policy(bf16_model_dir)
    assert _dtypes(plain) == {torch.bfloat16}  # transformers' own default: the trap TRL's loader avoids
    policy = Policy.load(_cfg(tmp_path, bf16_model_dir), bf16_model_dir)
    assert _dtypes(policy.model) == {torch.float32}


@pytest.mark.parametrize(
    ("overrides", "dtype", "attn"),
    [
        ({"model.dtype": "bfloat16"}, torch.bfloat16, None),
        ({"model.dtype": "auto"}, torch.bfloat16, None),  # the checkpoint's own
        ({"model.attn_implementation": "eager"}, torch.float32, "eager"),
    ],
)
def test_model_dtype_and_attention_reach_the_load(bf16_model_dir, tmp_path, overrides, dtype, attn):
    cfg = _cfg(tmp_path, bf16_model_dir, **overrides)
    policy = Policy.load(cfg, bf16_model_dir)
    assert _dtypes(policy.model) == {dtype}
    if attn:
        assert policy.model.config._attn_implementation == attn


# TRL's own field. The run config may refuse it at validation (pointing at model.dtype); where it passes, it is
# applied under model.* as TRL's loader would, so these call the function that builds the load directly.
@pytest.mark.parametrize(
    ("init", "dtype", "attn"),
    [({"dtype": "bfloat16"}, torch.bfloat16, None), ({"attn_implementation": "eager"}, torch.float32, "eager")],
)
def test_trls_model_init_kwargs_reach_the_load_under_model_settings(bf16_model_dir, init, dtype, attn):
    kwargs = model_init_kwargs(ModelSettings(), {"model_init_kwargs": init})
    model, _, _ = load_policy(bf16_model_dir, kwargs)
    assert _dtypes(model) == {dtype}
    if attn:
        assert model.config._attn_implementation == attn


def test_model_init_kwargs_are_built_as_trls_loader_builds_them():
    assert model_init_kwargs(ModelSettings(), {}) == {"dtype": torch.float32, "trust_remote_code": False}
    args = {"model_init_kwargs": {"revision": "main"}, "trust_remote_code": True}
    assert model_init_kwargs(ModelSettings(), args) == {
        "revision": "main",
        "dtype": torch.float32,
        "trust_remote_code": True,
    }
    # model.dtype set explicitly wins over TRL's field; its default does not
    assert model_init_kwargs(ModelSettings(dtype="float16"), {"model_init_kwargs": {"dtype": "bfloat16"}})["dtype"] == (
        torch.float16
    )


def test_model_dtype_and_model_init_kwargs_that_disagree_are_named():
    problems = init_kwargs_conflicts(ModelSettings(dtype="float32"), {"model_init_kwargs": {"dtype": "bfloat16"}})
    assert problems == [
        "model.dtype (float32) and grpo.trainer_args.model_init_kwargs.dtype (bfloat16) differ; set it in one place "
        "(model.dtype)"
    ]
    assert init_kwargs_conflicts(ModelSettings(), {"model_init_kwargs": {"dtype": "bfloat16"}}) == []


def test_the_optimizer_of_a_one_process_run_steps_fp32_weights(bf16_model_dir, tmp_path):
    """One process (and DDP, which never casts parameters): the parameters TRL's optimizer updates are the loaded
    ones, so a bf16 checkpoint trains on fp32 master weights only because the load asked for float32."""
    cfg = _cfg(tmp_path, bf16_model_dir, **{"grpo.max_steps": 1})
    policy = Policy.load(cfg, bf16_model_dir)
    tasks = {t.id: t for t in demo_seeds()[:2]}
    trainer = RodsGRPOTrainer(
        model=policy.model,
        tokenizer=policy.tokenizer,
        cfg=cfg,
        out_dir=str(tmp_path / "ck"),
        draw=lambda n: list(tasks)[:n],
        task_of=tasks.__getitem__,
        on_rollout=lambda report: None,
        episode_cfg=EpisodeConfig(prompt=policy.episode.prompt),
        benchmark=episode_benchmark(EpisodeConfig(prompt=policy.episode.prompt), "bfcl_multi_turn"),
    )
    optimizer = trainer.create_optimizer()
    stepped = {p.dtype for group in optimizer.param_groups for p in group["params"]}
    assert stepped == {torch.float32}


LAUNCHERS = sorted((ROOT / "configs" / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("path", LAUNCHERS, ids=[p.stem for p in LAUNCHERS])
def test_every_launcher_config_steps_fp32_master_weights(path, tmp_path, tiny_model_dir):
    """Each shipped accelerate config with the run config's default load (float32): the optimizer steps float32.
    FSDP2 and ZeRO-3 need GPUs (accelerate shards GPU processes only), so for them this checks the rule that
    decides (`optimizer_dtype`, from accelerate's fsdp2_prepare_model and DeepSpeed's bf16 master partitions);
    DDP, one process and CPU are also run for real above."""
    launcher = yaml.safe_load(path.read_text())
    dist, mp = launcher["distributed_type"], str(launcher.get("mixed_precision", "no"))
    cfg = _cfg(tmp_path, tiny_model_dir)
    loaded = str(model_init_kwargs(cfg.model, cfg.grpo.trainer_args)["dtype"]).removeprefix("torch.")
    assert optimizer_dtype(dist, mp, loaded) == "float32"


@pytest.mark.parametrize(
    ("name", "stepped"), [("8gpu", "bfloat16"), ("fsdp", "float32"), ("zero3", "float32"), ("cpu", "bfloat16")]
)
def test_a_bf16_load_trains_in_pure_bf16_only_where_nothing_upcasts(name, stepped):
    """model.dtype: bfloat16 under DDP trains pure bf16 (the trap the float32 default avoids); FSDP2 with mixed
    precision and ZeRO-3 with bf16 keep fp32 master weights anyway."""
    launcher = yaml.safe_load((ROOT / "configs" / "accelerate" / f"{name}.yaml").read_text())
    assert optimizer_dtype(launcher["distributed_type"], str(launcher["mixed_precision"]), "bfloat16") == stepped


def test_an_evaluation_only_load_is_bf16_on_a_gpu_and_the_checkpoints_dtype_on_the_cpu():
    """`rods eval` places the model with `inference_placement`; the GPU branch (cuda, bfloat16) needs a GPU, so on a
    CPU host this checks the CPU branch only."""
    from rods_core.policy.precision import inference_placement

    device, kwargs = inference_placement()
    if torch.cuda.is_available():
        assert (device, kwargs) == ("cuda", {"dtype": torch.bfloat16})
    else:
        assert (device, kwargs) == ("cpu", {})

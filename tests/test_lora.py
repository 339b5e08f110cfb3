"""LoRA through TRL's peft_config (model.lora): a 2-step CPU GRPO run trains only the adapter, saves it as the
run's final/, and `rods eval` loads that folder (its base model with the adapter merged)."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from rods_core.config import RunConfig
from rods_core.config.inputs import DoorError
from rods_core.policy.lora import base_model_of, is_adapter_folder, peft_config
from rods_core.policy.model_folders import check_model_dir
from rods_core.policy.tiny import load_policy
from tests.conftest import smoke_config


def test_model_lora_becomes_peft_s_lora_config():
    cfg = RunConfig.model_validate({"model": {"lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}}})
    lora = peft_config(cfg.model.lora)
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (4, 8, 0.05)
    assert set(lora.target_modules) == {"q_proj", "v_proj"} and lora.task_type == "CAUSAL_LM"


def _length_reward(prompts, completions, completion_ids, **kwargs):
    # A reward with variance: the untrained tiny model scores 0 progress everywhere, so GRPO would have no
    # advantage and the adapter would not move (as in tests/test_trainer.py).
    return [len(c) / 1000.0 for c in completion_ids]


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, tiny_model_dir):
    """Two GRPO steps of the tiny model with a LoRA adapter, saved as a run saves its final model."""
    from rods_core.benchmarks.bfcl.demo import demo_seeds
    from rods_core.config import EpisodeConfig
    from rods_core.loop import Policy
    from rods_core.ranks import Ranks
    from rods_core.rollout import episode_benchmark
    from rods_core.trainer import RodsGRPOTrainer

    tmp = tmp_path_factory.mktemp("lora")
    over = {"grpo.max_steps": 2, "grpo.learning_rate": 5e-2, "model.lora": {"r": 4, "alpha": 8}}
    cfg = RunConfig.model_validate(smoke_config(tmp, tiny_model_dir, **over))
    policy = Policy.load(cfg, tiny_model_dir)
    tasks = {t.id: t for t in demo_seeds()[:2]}
    episode = EpisodeConfig(prompt=policy.episode.prompt, max_steps_per_turn=1, sampling={"max_new_tokens": 16})
    trainer = RodsGRPOTrainer(
        model=policy.model,
        tokenizer=policy.tokenizer,
        cfg=cfg,
        out_dir=str(tmp / "ck"),
        draw=lambda n: [list(tasks)[i % 2] for i in range(n)],
        task_of=tasks.__getitem__,
        on_rollout=lambda report: None,
        episode_cfg=episode,
        reward_funcs=[_length_reward],
        benchmark=episode_benchmark(episode, "bfcl_multi_turn"),
    )
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    policy.save_final(trainer, tmp / "final", "lora", Ranks())
    return tmp, trainable


def test_a_lora_run_trains_two_steps_and_saves_only_the_adapter(lora_run, tiny_model_dir):
    run, trainable = lora_run
    assert trainable and all("lora_" in n for n in trainable)  # the base weights are frozen
    final = run / "final"
    assert is_adapter_folder(final) and (final / "adapter_model.safetensors").is_file()
    assert base_model_of(final) == str(tiny_model_dir)
    assert check_model_dir(final) == final
    base, _, _ = load_policy(tiny_model_dir)
    merged, _, _ = load_policy(final)
    assert type(merged) is type(base)  # a plain transformers model: the adapter merged in
    moved = [k for k, v in merged.state_dict().items() if not torch.equal(v, base.state_dict()[k])]
    assert moved and all("proj" in k for k in moved)  # only the adapted linear layers changed


def test_rods_eval_loads_the_adapter_folder(lora_run):
    from rods_lab.cli import app

    r = CliRunner().invoke(
        app, ["eval", "--model", str(lora_run[0] / "final"), "--split", "train", "--limit", "1", "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout[r.stdout.index("{") :])["eval/tasks"] == 1


def test_an_adapter_whose_base_is_gone_is_refused_by_the_door(lora_run, tmp_path):
    import shutil

    bad = tmp_path / "adapter"
    shutil.copytree(lora_run[0] / "final", bad)
    config = json.loads((bad / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps(config | {"base_model_name_or_path": str(tmp_path / "gone")}))
    with pytest.raises(DoorError, match="the adapter's base"):
        check_model_dir(bad)

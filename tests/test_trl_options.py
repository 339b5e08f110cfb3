"""TRL's GRPOConfig fields pass through `grpo.trainer_args`: the field names read without importing TRL match
GRPOConfig itself, a passed field reaches GRPOConfig, and the CLI refuses a bad one (the config model's own
checks of trainer_args are in test_config.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from pydantic import ValidationError
from trl import GRPOConfig

from rods_core.config import RunConfig
from rods_core.config.trl_options import OWNED, REFUSED_VALUES, grpo_config_fields, trainer_args_problems
from rods_core.trainer import grpo_args


def test_the_cheap_field_reader_matches_grpoconfig_and_owned_fields_are_grpoconfig_fields():
    real = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
    assert grpo_config_fields() == real
    assert set(OWNED) - real <= {"activation_checkpointing"}  # gradient_checkpointing's name in newer transformers


def test_a_passed_field_reaches_grpoconfig(tmp_path):
    cfg = RunConfig.model_validate(
        {"grpo": {"trainer_args": {"epsilon_high": 0.28, "scale_rewards": "batch", "warmup_steps": 2}}}
    )
    args = grpo_args(cfg, str(tmp_path))
    assert (args.epsilon_high, args.scale_rewards, args.warmup_steps) == (0.28, "batch", 2)


def test_the_cli_refuses_a_bad_trainer_arg_with_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  trainer_args: {report_to: [wandb]}\n")
    out = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", "config", "validate", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "report_to: set by RODS" in out.stderr and "report.to" in out.stderr


# Every trap: a GRPOConfig field that validated, then failed after the model loaded or was silently ignored.
# (trainer_args entry, what the refusal must name)
TRAPS = [
    ({"vllm_server_base_url": "http://h:8000"}, "grpo.vllm_server_url"),
    ({"vllm_max_model_length": 8192}, "episode.max_context_tokens"),
    ({"top_p": 0.9}, "episode.sampling.top_p"),
    ({"top_k": 50}, "episode.sampling"),
    ({"min_p": 0.05}, "episode.sampling"),
    ({"repetition_penalty": 1.1}, "episode.sampling"),
    ({"generation_kwargs": {"top_k": 5}}, "episode.sampling"),
    ({"vllm_enable_sleep_mode": True}, "sleep mode discards vLLM's weights"),
    ({"vllm_tensor_parallel_size": 2}, "trl vllm-serve --tensor_parallel_size"),
]
ALLOWED = [
    {"vllm_enable_sleep_mode": False},
    {"model_init_kwargs": {"dtype": "bfloat16"}},  # honoured: RODS passes it to from_pretrained (policy.precision)
    {"vllm_tensor_parallel_size": 1},
    {"vllm_gpu_memory_utilization": 0.5},
]


@pytest.mark.parametrize(("args", "names"), TRAPS, ids=[next(iter(a)) for a, _ in TRAPS])
def test_every_passthrough_trap_is_refused_at_validation_naming_where_it_lives(args, names):
    key = next(iter(args))
    assert key in grpo_config_fields()  # a real GRPOConfig field: without the refusal it would validate
    with pytest.raises(ValidationError) as e:
        RunConfig.model_validate({"grpo": {"trainer_args": args}})
    assert f"grpo.trainer_args: {key}:" in str(e.value) and names in str(e.value)


@pytest.mark.parametrize("args", ALLOWED, ids=[next(iter(a)) for a in ALLOWED])
def test_harmless_values_of_the_guarded_fields_pass(args):
    assert trainer_args_problems(args) == []


def test_every_refused_value_names_a_grpoconfig_field():
    assert set(REFUSED_VALUES) <= grpo_config_fields() and not set(REFUSED_VALUES) & set(OWNED)

"""TRL's GRPOConfig fields pass through `grpo.trainer_args`: the field names read without importing TRL match
GRPOConfig itself, a passed field reaches GRPOConfig, and the CLI refuses a bad one (the config model's own
checks of trainer_args are in test_config.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from trl import GRPOConfig

from rods_core.config import RunConfig
from rods_core.config.trl_options import OWNED, grpo_config_fields
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

"""TRL's GRPOConfig fields pass through `grpo.trainer_args`: checked against GRPOConfig itself, refused with the
nearest name or with the run-config field that owns them; `loss_type` takes every value TRL names."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import pytest
import yaml
from trl import GRPOConfig

from rods_core.config import ConfigError, RunConfig, load_config
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


def test_an_unknown_field_names_the_nearest_and_an_owned_one_the_field_to_use(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"grpo": {"trainer_args": {"epsilon_hihg": 0.28, "num_generations": 4}}}))
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    msg = str(e.value)
    assert "epsilon_hihg: not a field of TRL's GRPOConfig; did you mean 'epsilon_high'?" in msg
    assert "num_generations: set by RODS" in msg and "set grpo.num_generations" in msg


def test_the_cli_refuses_a_bad_trainer_arg_with_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  trainer_args: {report_to: [wandb]}\n")
    out = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", "config", "validate", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "report_to: set by RODS" in out.stderr and "report.to" in out.stderr


def test_loss_type_accepts_every_value_trl_names():
    help_text = next(f for f in dataclasses.fields(GRPOConfig) if f.name == "loss_type").metadata["help"]
    trl_values = set(re.findall(r"'(\w+)'", help_text.split("Supported values are", 1)[1].split(".", 1)[0]))
    ours = set(RunConfig.model_fields["grpo"].annotation.model_fields["loss_type"].annotation.__args__)
    assert trl_values and ours == trl_values


def test_checking_trainer_args_imports_neither_trl_nor_torch():
    code = (
        "import sys; from rods_core.config import RunConfig; "
        "RunConfig.model_validate({'grpo': {'trainer_args': {'epsilon_high': 0.3}}}); "
        "print(sorted(m for m in ('trl', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

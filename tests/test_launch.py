"""rods_lab.configs and rods_lab.launch: the config the Launch form builds (app folders, confined paths,
errors by field) and the twin a run is paired with."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rods_core.config import load_config
from rods_lab.configs import build_config, field_errors
from rods_lab.launch import pair_configs
from rods_lab.paths import PROJECT_ROOT, AppPaths, OutsideWorkspace


def test_build_config_forces_app_folders_and_confines_paths(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    base = PROJECT_ROOT / "configs" / "demo-cpu.yaml"
    cfg = build_config(base, {"grpo.max_steps": 2, "output_dir": "/elsewhere"}, paths)
    assert (cfg.output_dir, cfg.workspace, cfg.grpo.max_steps) == (str(paths.runs), str(paths.workspace), 2)
    assert cfg.model.path == str((PROJECT_ROOT / "models" / "tiny-demo").resolve())  # models/ may be a link
    with pytest.raises(OutsideWorkspace):
        build_config(base, {"seeds.subset": "file", "seeds.file": "../../etc/passwd"}, paths)
    with pytest.raises(OutsideWorkspace):
        build_config(base, {"model.path": "/tmp"}, paths)
    with pytest.raises(ValidationError) as e:
        build_config(base, {"grpo.learning_rate": -1, "grpo.typo": 3}, paths)
    errs = field_errors(e.value)
    assert "greater than 0" in errs["grpo.learning_rate"] and "unknown field" in errs["grpo.typo"]


def test_a_static_twin_keeps_the_design_and_splits_the_cores():
    cfg = load_config(PROJECT_ROOT / "configs" / "demo-cpu.yaml", {"compute.processes": 2, "grpo.tasks_per_step": 4})
    run, twin = pair_configs(cfg)
    assert (run.method, twin.method) == ("rods", "static")
    for c in (run, twin):
        assert c.compute.processes == 1 and c.grpo.tasks_per_step == 8  # the batch of 8 tasks, one core each
        assert (c.seeds, c.seed, c.model, c.grpo.max_steps) == (cfg.seeds, cfg.seed, cfg.model, cfg.grpo.max_steps)
    with pytest.raises(ValueError, match="static already"):
        pair_configs(twin)

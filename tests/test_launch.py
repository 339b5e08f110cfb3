"""The app's launch helpers: workspace confinement, config building, the log's tail, progress and ETA."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from rods_core.config import load_config
from rods_core.launch import (
    PROJECT_ROOT,
    AppPaths,
    OutsideWorkspace,
    build_config,
    confine,
    field_errors,
    format_eta,
    pair_configs,
    progress,
    read_prefs,
    save_upload,
    tail,
    write_prefs,
)


def test_confine_accepts_inside_and_refuses_escapes(tmp_path):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    assert confine("sub/a.jsonl", ws) == (ws / "sub" / "a.jsonl").resolve()
    assert confine(ws / "sub", ws) == (ws / "sub").resolve()
    for bad in ("../x.jsonl", "sub/../../x", "/etc/passwd", tmp_path / "other.jsonl", "~/.ssh/id_rsa"):
        with pytest.raises(OutsideWorkspace, match="outside the workspace"):
            confine(bad, ws)
    os.symlink(tmp_path, ws / "link")  # a symlink inside that points outside does not escape either
    with pytest.raises(OutsideWorkspace):
        confine("link/secret", ws)


def test_confine_extra_roots_and_base(tmp_path):
    ws, models = tmp_path / "ws", tmp_path / "models"
    assert confine("models/m", ws, models, base=tmp_path) == (models / "m").resolve()
    with pytest.raises(OutsideWorkspace):
        confine("elsewhere/m", ws, models, base=tmp_path)


def test_build_config_forces_app_folders_and_confines_paths(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    base = PROJECT_ROOT / "configs" / "demo-cpu.yaml"
    cfg = build_config(base, {"grpo.max_steps": 2, "output_dir": "/elsewhere"}, paths)
    assert (cfg.output_dir, cfg.workspace, cfg.grpo.max_steps) == (str(paths.runs), str(paths.workspace), 2)
    assert cfg.model.path == str(PROJECT_ROOT / "models" / "tiny-demo")
    with pytest.raises(OutsideWorkspace):
        build_config(base, {"seeds.subset": "file", "seeds.file": "../../etc/passwd"}, paths)
    with pytest.raises(OutsideWorkspace):
        build_config(base, {"model.path": "/tmp"}, paths)
    with pytest.raises(ValidationError) as e:
        build_config(base, {"grpo.learning_rate": -1, "grpo.typo": 3}, paths)
    errs = field_errors(e.value)
    assert "greater than 0" in errs["grpo.learning_rate"] and "unknown field" in errs["grpo.typo"]


def test_tail_reads_last_lines(tmp_path):
    log = tmp_path / "train.log"
    assert tail(log) == ""
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3) == "line 97\nline 98\nline 99"
    assert tail(log, 5, max_bytes=20).splitlines()[-1] == "line 99"


def test_progress_and_eta():
    assert progress(None, 10, []) == (0.0, None)
    assert progress(2, 10, [float("nan"), 0.0]) == (0.2, None)
    done, eta = progress(4, 10, [100.0, 2.0, 4.0], window=2)
    assert done == 0.4 and eta == pytest.approx(18.0)
    assert progress(12, 10, [1.0]) == (1.0, 0.0)
    assert format_eta(None) == "ETA —" and format_eta(75) == "ETA 1m15s" and format_eta(7260) == "ETA 2h01m"


def test_save_upload_keeps_only_the_base_name(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    for name in ("../../evil.jsonl", "/etc/evil.jsonl", "evil.jsonl"):
        out = save_upload(paths, name, b"{}\n")
        assert out == (paths.workspace / "imports" / "evil.jsonl").resolve() and out.read_bytes() == b"{}\n"


def test_prefs_roundtrip(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    assert read_prefs(paths) == {}
    write_prefs(paths, review="gated")
    assert write_prefs(paths, other=1) == {"review": "gated", "other": 1}
    assert read_prefs(paths)["review"] == "gated"


def test_a_static_twin_keeps_the_design_and_splits_the_cores():
    cfg = load_config(PROJECT_ROOT / "configs" / "demo-cpu.yaml", {"compute.processes": 2, "grpo.tasks_per_step": 4})
    run, twin = pair_configs(cfg)
    assert (run.method, twin.method) == ("rods", "static")
    for c in (run, twin):
        assert c.compute.processes == 1 and c.grpo.tasks_per_step == 8  # the batch of 8 tasks, one core each
        assert (c.seeds, c.seed, c.model, c.grpo.max_steps) == (cfg.seeds, cfg.seed, cfg.model, cfg.grpo.max_steps)
    with pytest.raises(ValueError, match="static already"):
        pair_configs(twin)

"""rods_lab.paths: workspace confinement of typed paths and uploads; where the app's folders are."""

from __future__ import annotations

import os

import pytest

from rods_lab.paths import AppPaths, OutsideWorkspace, confine, save_upload


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


def test_save_upload_keeps_only_the_base_name(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    for name in ("../../evil.jsonl", "/etc/evil.jsonl", "evil.jsonl"):
        out = save_upload(paths, name, b"{}\n")
        assert out == (paths.workspace / "imports" / "evil.jsonl").resolve() and out.read_bytes() == b"{}\n"


def test_app_paths_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RODS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RODS_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("RODS_EXPERIMENTS", str(tmp_path / "exp"))
    monkeypatch.delenv("RODS_CONTROL_DB", raising=False)
    paths = AppPaths.from_env()
    assert (paths.workspace, paths.runs, paths.experiments) == (tmp_path / "ws", tmp_path / "runs", tmp_path / "exp")
    assert paths.control_db == tmp_path / "ws" / "control.sqlite"

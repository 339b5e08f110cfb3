"""A model named by hub id is found in the local Hugging Face cache, never downloaded; a missing one says how to
fetch it. The cache here is a temporary folder in the hub's layout (models--org--name/snapshots/<rev> + refs/main)."""

from __future__ import annotations

import shutil

import pytest
from huggingface_hub import constants

from rods_core.config import RunConfig
from rods_core.config.inputs import DoorError
from rods_core.policy.model_folders import model_folder
from rods_core.preflight import preflight
from tests.conftest import smoke_config

REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path, tiny_model_dir, monkeypatch):
    """A hub cache holding the tiny model as rods-test/tiny-policy; the hub client is forced offline."""
    cache = tmp_path / "hub"
    repo = cache / "models--rods-test--tiny-policy"
    shutil.copytree(tiny_model_dir, repo / "snapshots" / REV)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # read at call time by snapshot_download
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # any network call would raise
    return repo / "snapshots" / REV


def test_a_hub_id_resolves_to_its_cached_snapshot_and_trains(tmp_path, hub_cache, monkeypatch):
    from rods_lab.run import train

    monkeypatch.chdir(tmp_path)  # no local folder named rods-test/
    assert model_folder("rods-test/tiny-policy") == hub_cache
    cfg = RunConfig.model_validate(
        smoke_config(tmp_path, "rods-test/tiny-policy", **{"grpo.max_steps": 1, "eval.limit": 1})
    )
    assert preflight(cfg, "hub", None) == "hub"
    run_dir = train(cfg, run_id="hub", log=lambda *_: None)
    assert (run_dir / "final" / "config.json").is_file()
    assert "model:\n  path: rods-test/tiny-policy" in (run_dir / "config.yaml").read_text()  # the id, as given


def test_a_missing_hub_id_says_how_to_fetch_it_and_a_local_path_stays_local(tmp_path, hub_cache, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DoorError) as e:
        model_folder("rods-test/absent")
    assert "runs never download: fetch it once with `hf download rods-test/absent`" in str(e.value)
    (tmp_path / "models").mkdir()
    assert model_folder("models/absent") == tmp_path.joinpath("models/absent").relative_to(tmp_path)  # a folder
    assert model_folder("rods-test/tiny-policy", build_if_missing=True).name == "tiny-policy"  # a folder to build


def test_the_app_launch_keeps_a_cached_hub_id_and_refuses_a_missing_one(tmp_path, hub_cache):
    from rods_lab.configs import build_config
    from rods_lab.paths import AppPaths

    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    cfg = build_config({"model": {"path": "rods-test/tiny-policy"}}, {}, paths)
    assert cfg.model.path == "rods-test/tiny-policy"  # the id, not a path confined to the workspace
    with pytest.raises(DoorError, match="hf download rods-test/absent"):
        build_config({"model": {"path": "rods-test/absent"}}, {}, paths)


def test_rods_eval_takes_a_hub_id_from_the_cache_and_says_how_to_fetch_a_missing_one(tmp_path, hub_cache, monkeypatch):
    """The README's base-model line: `rods eval --model org/name` reads the cached snapshot, downloads nothing."""
    import json

    from typer.testing import CliRunner

    from rods_lab.cli import app

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["eval", "--model", "rods-test/tiny-policy", "--split", "train", "--limit", "2", "--max-batch", "1"]
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout[r.stdout.index("{") :])
    assert report["model"] == "rods-test/tiny-policy" and report["eval/tasks"] == 2
    r = runner.invoke(app, ["eval", "--model", "rods-test/absent", "--limit", "1"])
    assert r.exit_code == 2 and "fetch it once with `hf download rods-test/absent`" in r.output

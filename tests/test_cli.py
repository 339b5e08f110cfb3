"""Every `rods` command answers --help; env and seeds commands work and reject bad input clearly."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from rods_lab.cli import app

runner = CliRunner()


def _command_paths(group, prefix=()):
    for name, cmd in group.commands.items():
        yield (*prefix, name)
        if hasattr(cmd, "commands"):  # a sub-group (typer vendors its own click)
            yield from _command_paths(cmd, (*prefix, name))


def test_every_command_has_help():
    root = typer.main.get_command(app)
    paths = list(_command_paths(root))
    assert ("env", "replay") in paths and ("seeds", "stats") in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage" in result.output


def test_seeds_stats_json():
    result = runner.invoke(app, ["seeds", "stats", "--split", "test", "--json"])
    report = json.loads(result.output)
    assert report["tasks"] == 400 and report["by_category"]["miss_func"] == 100


def test_env_score_reports_and_rejects(tmp_path, all_seeds):
    task = all_seeds[0]
    good = tmp_path / "a.jsonl"
    half = [calls if i == 0 else [] for i, calls in enumerate(task.ground_truth)]
    good.write_text(
        json.dumps({"id": task.id, "turns": task.ground_truth})
        + "\n"
        + json.dumps({"id": all_seeds[1].id, "turns": [[]] * all_seeds[1].n_turns})
        + "\n"
    )
    report = json.loads(runner.invoke(app, ["env", "score", "--answers", str(good), "--json"]).output)
    assert report["n"] == 2 and report["tasks"][0]["accuracy"] == 1.0 and report["tasks"][1]["progress"] == 0.0
    partial = tmp_path / "p.jsonl"
    partial.write_text(json.dumps({"id": task.id, "turns": half}) + "\n")
    r = json.loads(runner.invoke(app, ["env", "score", "--answers", str(partial), "--json"]).output)
    assert 0 < r["progress"] < 1 and r["accuracy"] == 0
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"id": "nope", "turns": []}\n{"id": 3}\n')
    result = runner.invoke(app, ["env", "score", "--answers", str(bad)])
    assert result.exit_code == 2 and "b.jsonl:2: id" in result.output


def test_choice_options_list_their_values_in_help_and_match_the_library():
    from typing import get_args

    from rods_core.benchmarks.protocols import Split as SeedSplit
    from rods_core.config import TinyModelConfig
    from rods_lab.cli._common import Split
    from rods_lab.cli.model_cmd import Arch
    from rods_lab.cli.store_cmd import Pool
    from storage.schema import POOLS

    assert [s.value for s in Split] == list(get_args(SeedSplit))
    assert [p.value for p in Pool] == [*POOLS, "all"]
    assert [a.value for a in Arch] == list(get_args(TinyModelConfig.model_fields["arch"].annotation))
    wide = {"COLUMNS": "200"}
    for path, listed in [
        (["seeds", "stats"], "<train|test|all>"),
        (["env", "replay"], "<train|test|all>"),
        (["export"], "<seeds|staged|active|retired|all>"),
        (["eval"], "<train|test|all>"),
        (["eval"], "<bfcl_multi_turn|bfcl_memory_kv|bfcl_memory_rec_sum>"),
        (["model", "init-tiny"], "<qwen2|qwen3>"),
    ]:
        assert listed in runner.invoke(app, [*path, "--help"], env=wide).output, path
    refused = runner.invoke(app, ["seeds", "stats", "--split", "dev"], env=wide)
    assert refused.exit_code == 2 and "'dev' is not one of" in refused.output


def test_the_seeds_group_says_its_import_takes_any_benchmark():
    """`rods seeds import --benchmark` reads any benchmark's file: the group's summary must not say BFCL only."""
    result = runner.invoke(app, ["seeds", "--help"])
    assert result.exit_code == 0 and "of any benchmark" in " ".join(result.output.split())

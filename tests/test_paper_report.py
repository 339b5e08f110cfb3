"""`rods bench paper-report` over synthetic run folders written with the real EventLog: arms read from the run
configs, the reach fractions, the ablation table, churn and depletion land in summary.json and summary.md."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from bench.arms import ABLATIONS
from bench.curriculum_report import band_figure
from bench.paper_frames import arm_of, load_paper
from bench.paper_report import write
from rods_core.config import METHODS
from rods_lab.cli import app
from storage.events import EventLog


def write_run(root, run, name, method, progress, shares, retire_at=None, seed=0):
    """4 steps of 10 trajectories (100 tokens, 2 s each), evals at steps 0, 2, 4, one variant retired at
    `retire_at` after being played in every step up to it."""
    run_dir = root / "runs" / run
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"name": name, "method": method, "seed": seed}))
    with EventLog(run_dir) as log:
        for step in range(1, 5):
            log.append(
                "step",
                {"step": step, "wall_s": 2.0, "train/trajectories": 10.0, "train/tokens": 100.0,
                 "time/step_s": 2.0, "boundary/informative_share": shares[step - 1], "buffer/active": 4.0},
            )  # fmt: skip
            log.append(
                "task_stats", {"step": step, "task_id": "v1", "n": 6, "mean": 0.5, "var": 0.1, "region": "boundary"}
            )
        for step, p in zip((0, 2, 4), progress, strict=True):
            log.append(
                "eval",
                {"step": step, "split": "variants", "accuracy": p / 2, "progress": p, "per_category": {},
                 "trajectories": step * 10},
            )  # fmt: skip
        if retire_at:
            log.append(
                "buffer", {"step": 1, "task_id": "v1", "from_pool": None, "to_pool": "staged", "reason": "offer/staged"}
            )
            log.append(
                "buffer",
                {
                    "step": retire_at,
                    "task_id": "v1",
                    "from_pool": "active",
                    "to_pool": "retired",
                    "reason": "retire/hard",
                },
            )
    return run_dir


def experiment(tmp_path):
    folder = tmp_path / "exp"
    for k in range(2):
        write_run(folder, f"rods_r{k}", "rods", "rods", [0.1, 0.5, 0.5], [0.6, 0.6, 0.5, 0.5], retire_at=2)
        write_run(folder, f"static_r{k}", "static", "static", [0.1, 0.2, 0.3], [0.6, 0.6, 0.3, 0.3])
        write_run(folder, f"single_layer_r{k}", "single_layer", "rods", [0.1, 0.2, 0.25], [0.5, 0.5, 0.5, 0.5], 1)
    return folder


def test_runs_are_labelled_by_arm_and_other_names_fall_back_to_the_method(tmp_path):
    folder = experiment(tmp_path)
    assert sorted(set(load_paper(folder).frames.steps.method)) == ["rods", "single_layer", "static"]
    odd = write_run(tmp_path / "other", "x", "my-test-run", "rods", [0.1, 0.2, 0.3], [0.5] * 4)
    assert arm_of(odd) == "rods"


def test_paper_report_writes_the_numbers_behind_every_figure(tmp_path):
    out = write(experiment(tmp_path), tmp_path / "docs", png=False, log=lambda *_: None)
    data = json.loads((out / "summary.json").read_text())
    on = {r["axis"]: r for r in data["reach"]}
    # rods reaches static's final 0.3 halfway between steps 0 and 2 of 4 (x = 10 of 40 trajectories)
    assert [on[a]["fraction"] for a in ("trajectories", "tokens", "train_s")] == pytest.approx([0.25] * 3)
    assert [r["arm"] for r in data["ablation_table"]] == ["rods", "static", "single_layer"]
    assert data["depletion"]["fell_by_third"] is True and data["depletion"]["fall"] == 0.5
    churn = {r["run"]: r for r in data["churn_runs"]}
    assert churn["rods_r0"]["groups_per_retired"] == 2 and churn["single_layer_r0"]["one_shot_share"] == 1.0
    for name in ("progress_vs_trajectories", "progress_vs_tokens", "depletion", "active_pool", "ablation_table"):
        assert (out / f"{name}.json").exists(), name
    md = (out / "summary.md").read_text()
    assert "0.25 of its trajectories consumed" in md
    # these synthetic single_layer runs carry rods' own config: the report names the arm a no-op
    assert "| single_layer (no-op) | 2 |" in md and "- single_layer: **no-op** (not compared): its run config" in md
    assert "Static's informative share fell by at least a third" in md


def test_paper_commands_refuse_bad_input_with_exit_code_2(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["bench", "paper-report", str(tmp_path), "--no-png"])
    assert r.exit_code == 2 and "no run with recorded steps" in r.output
    r = runner.invoke(app, ["bench", "paper", "--budget", "48", "--arms", "rods,grpo", "--out", str(tmp_path / "p")])
    assert r.exit_code == 2 and "unknown ['grpo']" in r.output


def test_paper_folders_of_one_design_pool_with_each_ablation_numbered_apart_from_rods(tmp_path):
    from bench.curriculum_bench import pool_runs

    settings = {"config": "c.yaml", "budget": 40, "max_steps": 4, "eval_every": 2, "trajectories_per_step": 10,
                "sets": {}, "methods": ["rods", "single_layer"], "repeats": 1}  # fmt: skip
    folders = []
    for seed in (0, 1):
        folder = tmp_path / f"p{seed}"
        runs = []
        for arm, method in (("rods", "rods"), ("single_layer", "rods")):
            write_run(folder, f"{arm}_r0", arm, method, [0.1, 0.2, 0.3], [0.5] * 4, seed=seed)
            runs.append({"run": f"{arm}_r0", "method": arm, "arm": arm, "status": "finished", "wall_s": 1.0})
        (folder / "manifest.json").write_text(json.dumps({"settings": settings, "runs": runs}))
        folders.append(folder)
    _, meta = pool_runs(folders, tmp_path / "pooled")
    assert sorted(m["run"] for m in meta) == ["rods_r0", "rods_r1", "single_layer_r0", "single_layer_r1"]
    assert sorted(set(load_paper(tmp_path / "pooled").frames.steps.method)) == ["rods", "single_layer"]


def test_every_arm_of_one_figure_has_its_own_line_colour():
    arms = [*METHODS, *ABLATIONS]
    curve = pd.DataFrame([{"method": a, "trajectories": x, "progress": 0.5} for a in arms for x in (0, 48)])
    fig = band_figure(curve, "trajectories", "progress", "t", "y")
    colours = {t.name: t.line.color for t in fig.data if t.mode == "lines+markers"}
    assert set(colours) == set(arms)
    assert len(set(colours.values())) == len(arms), colours

"""`rods bench paper` with replicates that draw pools of their own (--pool-seed-base) and run summaries that outlive
the session (--summaries): repeat k's pool drawn by base + k for every arm, its own held-out sets (H1b's parents
filtered by the warm start), a summary per finished run, and a restart that skips every run with a valid summary."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from rods_lab.experiments import arms, replicates
from rods_lab.experiments import summaries as run_summaries
from rods_lab.experiments.arms import plan_arms, run
from rods_lab.experiments.heldout import HeldOutSpec, parse_spec
from rods_lab.experiments.pool_criteria import areas
from tests.app_helpers import smoke_config

POOL = {"seeds.limit": None, "seeds.random": {"n": 3}}


def base_config(tmp_path, model):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(smoke_config(tmp_path, model, **POOL)))
    return base


def test_parse_spec_reads_h1b():
    assert parse_spec("h1=8,h1b=16x4,h3=100,h1s=4") == HeldOutSpec(h1_per_seed=8, h2_solvable=True, h1_samples=4)
    assert HeldOutSpec(h2_solvable=True).names() == ("H1", "H1b", "H3") and HeldOutSpec().names()[1] == "H2"


def test_each_repeat_draws_its_pool_by_base_plus_k_for_every_arm(tmp_path, tiny_model_dir):
    base = base_config(tmp_path, tiny_model_dir)
    spec = HeldOutSpec(h2_solvable=True)
    plans = plan_arms(base, tmp_path / "x", ["rods", "static", "offline_small"], 2, 8, 1, {}, spec, 1000)
    assert [p[0] for p in plans] == [f"{a}_r{k}" for k in (0, 1) for a in ("rods", "static", "offline_small")]
    for run_id, arm, k, cfg in plans:
        if arm != "offline_small":
            assert cfg.seeds.random.seed == 1000 + k, run_id
        assert cfg.eval.file == str(tmp_path / "x" / "heldout" / f"r{k}" / "H1.jsonl")
        assert [f.rsplit("/", 1)[1] for f in cfg.synthesis.exclude] == ["H1.jsonl", "H1b.jsonl", "H3.jsonl"]
    no_draw = tmp_path / "fixed.yaml"
    no_draw.write_text(yaml.safe_dump(smoke_config(tmp_path, tiny_model_dir)))
    with pytest.raises(ValueError, match=r"--set seeds.random.n=16"):
        plan_arms(no_draw, tmp_path / "y", ["static"], 1, 8, 1, {}, None, 1000)


def fake_launch(launched):
    def launch(run_id, cfg, out, timeout_s, log=print, resume=False):
        launched.append(run_id)
        return {"run": run_id, "method": cfg.method, "seed": cfg.seed, "status": "failed (fake)", "wall_s": 0.0}

    return launch


def test_a_plan_with_one_valid_summary_runs_only_the_others(tmp_path, tiny_model_dir, monkeypatch):
    base, out, summaries = base_config(tmp_path, tiny_model_dir), tmp_path / "exp", tmp_path / "summaries"
    plans = plan_arms(base, out, ["static"], 3, 8, 1, {}, None, 1000)
    kept = {"version": run_summaries.VERSION, "run": "static_r1", "arm": "static", "replicate": 1, "status": "finished",
            "config_hash": run_summaries.config_hash(plans[1][3], out), "evaluations": [], "wall_s": 12.5}  # fmt: skip
    run_summaries.write(summaries, kept)
    stale = {**kept, "run": "static_r2", "config_hash": "0" * 64}  # written for another config: run again
    run_summaries.write(summaries, stale)
    launched, lines = [], []
    monkeypatch.setattr(arms, "launch", fake_launch(launched))
    run(8, ["static"], 3, base, 1, out=out, log=lines.append, pool_seed_base=1000, summaries=summaries)
    assert launched == ["static_r0", "static_r2"]
    assert "3 runs (1 already complete, 1 of them by their summaries)" in lines[0]
    manifest = json.loads((out / "manifest.json").read_text())
    by_run = {m["run"]: m for m in manifest["runs"]}
    assert by_run["static_r1"]["status"] == "finished" and by_run["static_r1"]["summary"] is True
    assert by_run["static_r1"]["wall_s"] == 12.5 and by_run["static_r0"]["status"] == "failed (fake)"
    pools = manifest["settings"]["pools"]
    assert (
        len(pools) == 3 and all(len(p) == 3 for p in pools.values()) and manifest["settings"]["pool_seed_base"] == 1000
    )
    assert pools["0"] != pools["1"]  # seeds 1000 and 1001 draw other pools of the demo seeds
    assert run_summaries.read_valid(summaries, "static_r1", plans[1][3], out) == kept
    assert run_summaries.read_valid(summaries, "static_r1", plans[0][3], out) is None  # another config


def test_the_config_hash_ignores_where_the_experiment_was_written(tmp_path, tiny_model_dir):
    base = base_config(tmp_path, tiny_model_dir)
    spec = HeldOutSpec()
    a = plan_arms(base, tmp_path / "a", ["static"], 2, 8, 1, {}, spec, 1000)
    b = plan_arms(base, tmp_path / "elsewhere" / "b", ["static"], 2, 8, 1, {}, spec, 1000)
    hashes = [run_summaries.config_hash(p[3], tmp_path / "a") for p in a]
    assert hashes == [run_summaries.config_hash(p[3], tmp_path / "elsewhere" / "b") for p in b]
    assert hashes[0] != hashes[1]  # repeat 1 draws another pool and reads other held-out sets


@pytest.mark.slow
def test_replicates_make_their_own_held_out_sets_and_a_summary_lets_a_new_session_skip_the_run(
    tmp_path, tiny_model_dir, monkeypatch
):
    def every_other(cfg):  # the untrained model scores 0 everywhere: stands in for a warm start's progress
        return lambda tasks: {t.id: float(i % 2 == 0) for i, t in enumerate(tasks)}

    monkeypatch.setattr(replicates, "warm_start_progress", every_other)
    base, out, summaries = base_config(tmp_path, tiny_model_dir), tmp_path / "exp", tmp_path / "summaries"
    spec = HeldOutSpec(h1_per_seed=1, h2_seeds=1, h2_per_seed=2, h3=2, h2_solvable=True, h1_samples=2)
    args = (8, ["static"], 2, base, 1)
    run(*args, out=out, log=lambda *_: None, heldout=spec, only=["static_r0"], pool_seed_base=1000, summaries=summaries)
    assert (out / "heldout" / "r0" / "H1b.jsonl").is_file() and not (out / "heldout" / "r1").exists()
    held = json.loads((out / "heldout" / "r0" / "manifest.json").read_text())
    assert held["sets"]["H1b"]["parents_passed"] and held["pool"] == sorted(held["pool"])
    s = json.loads((summaries / "static_r0.json").read_text())
    assert s["replicate"] == 0 and s["status"] == "finished" and len(s["code"]["commit"]) == 40
    assert s["pool"] == held["pool"] and s["heldout_sets"]["H1b"]["sha256"] == held["sets"]["H1b"]["sha256"]
    sets = {(e["step"], e["set"]) for e in s["evaluations"]}
    assert {(0, "H1"), (2, "H1"), (0, "H1b"), (2, "H1b"), (0, "H3"), (2, "H3")} <= sets
    sampled = [e for e in s["evaluations"] if e.get("sampled")]
    assert [(e["step"], e["set"], e["n"]) for e in sampled] == [(0, "H1_sampled", 3), (2, "H1_sampled", 3)]
    assert areas([s]) == {
        "static": {0: pytest.approx(s["evaluations"][1]["progress"] - s["evaluations"][0]["progress"])}
    }
    assert s["steps"]["count"] == 2 and len(s["steps"]["sha256"]) == 64 and s["binding"] == {"offer_budget": 0}
    assert set(s["audit"]) == {"H1", "H1b"} and s["audit"]["H1"]["items"]["n"] == 3
    greedy_h1 = [e for e in s["evaluations"] if e["set"] == "H1" and not e.get("sampled")]
    assert all(set(e["per_task"]) == set(s["audit"]["H1"]["nearest"]) for e in greedy_h1)  # by task, far or near
    assert s["pool_sizes"]["seeds"] == 3 and s["cpu_kernels"] and s["wall_s"] > 0

    shutil.rmtree(out / "runs" / "static_r0")  # a new session: the run folder is gone, its summary is committed
    launched = []
    real = arms.launch
    monkeypatch.setattr(arms, "launch", lambda run_id, *a, **k: launched.append(run_id) or real(run_id, *a, **k))
    run(*args, out=out, log=lambda *_: None, heldout=spec, pool_seed_base=1000, summaries=summaries)
    assert launched == ["static_r1"] and (summaries / "static_r1.json").is_file()
    assert json.loads((summaries / "static_r0.json").read_text()) == s  # left as it was
    pools = json.loads((out / "manifest.json").read_text())["settings"]["replicate_heldout_sets"]
    assert set(pools) == {"0", "1"} and pools["0"]["H1"]["sha256"] != pools["1"]["H1"]["sha256"]


def test_with_only_the_runner_finishes_its_own_runs_only(tmp_path, tiny_model_dir, monkeypatch):
    """Two processes share one folder, each with its own `--only` runs: neither scores or summarizes the other's
    finished runs (they would both score it, and the second would rewrite the first's summary)."""
    base, out = base_config(tmp_path, tiny_model_dir), tmp_path / "exp"
    swept, launched = [], []
    monkeypatch.setattr(arms, "launch", fake_launch(launched))
    monkeypatch.setattr(arms, "finish_cut_short", lambda plans, *a, **k: swept.extend(p[0] for p in plans))
    run(8, ["static"], 3, base, 1, out=out, log=lambda *_: None, pool_seed_base=1000, only=["static_r1"])
    assert swept == ["static_r1"] and launched == ["static_r1"]

"""`rods bench paper`'s runner end to end on the tiny model (2 steps a run): held-out sets made once and shared,
H1 evaluated in-run, every checkpoint scored on H2 and H3, and the offline arm trained on seeds + M variants with
M measured from rods' run of the same repeat; the report says all of it (static's runs are the same machinery)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from rods_lab.experiments import arms
from rods_lab.experiments.arms import offline_file, run
from rods_lab.experiments.heldout import SCORES, HeldOutSpec, load, parse_spec, sha256
from rods_lab.experiments.machine import cpu_kernels
from storage.reader import RunReader
from tests.app_helpers import smoke_config


def test_parse_spec_reads_the_sizes_or_none():
    assert parse_spec("h1=3,h2=4x2,h3=10") == HeldOutSpec(h1_per_seed=3, h2_seeds=4, h2_per_seed=2, h3=10)
    assert parse_spec("h1=8,h1min=0,h3=10").h1_min_per_seed == 0 and parse_spec("h1=8").h1_min_per_seed is None
    assert parse_spec("h1b=16x4,h2min=1").h2_min_seeds == 1 and parse_spec("h1b=16x4").h2_min_seeds is None
    assert parse_spec("none") is None
    import pytest

    with pytest.raises(ValueError, match="unknown key 'h4'"):
        parse_spec("h4=1")


def test_an_experiment_shares_its_held_out_sets_scores_every_checkpoint_and_runs_the_offline_arm(
    tmp_path, tiny_model_dir
):
    base = tmp_path / "base.yaml"
    cfg = smoke_config(tmp_path, tiny_model_dir, **{"buffer.synth_parents": "uniform", "synthesis.parents_per_step": 2})
    base.write_text(yaml.safe_dump(cfg))
    spec = HeldOutSpec(h1_per_seed=1, h2_seeds=1, h2_per_seed=2, h3=2)
    out = run(
        8, ["rods", "static", "offline_small"], 1, base, 1, out=tmp_path / "exp", log=lambda *_: None, heldout=spec
    )
    manifest = json.loads((out / "manifest.json").read_text())
    held, sets = load(out / "heldout")
    assert {k: len(v) for k, v in sets.items()} == {"H1": 6, "H2": 2, "H3": 2}
    assert manifest["settings"]["heldout_sets"]["H1"]["sha256"] == held["sets"]["H1"]["sha256"]
    h1_ids = {t.id for t in sets["H1"]}
    for arm in ("rods", "offline_small"):
        run_dir = out / "runs" / f"{arm}_r0"
        evals = RunReader(run_dir).eval_curve()
        assert list(evals.step) == [0, 2] and set(evals.split) == {"file"}, arm  # H1 in-run, at step 0 and 2
        run_cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert run_cfg["eval"]["file"].endswith("H1.jsonl") and len(run_cfg["synthesis"]["exclude"]) == 3
        assert run_cfg["synthesis"]["deterministic"] is True
        scores = json.loads((run_dir / SCORES).read_text())
        assert {(r["step"], r["set"], r["n"]) for r in scores} == {(2, "H2", 2), (2, "H3", 2)}, arm
        assert not h1_ids & set(RunReader(run_dir).query("SELECT DISTINCT task_id FROM task_stats").task_id)
    base_scores = json.loads((out / "heldout" / "base_model" / SCORES).read_text())
    assert {(r["step"], r["set"]) for r in base_scores} == {(0, "H2"), (0, "H3")}
    (meta,) = [m for m in manifest["runs"] if m["run"] == "offline_small_r0"]
    offline = [json.loads(line) for line in offline_file(out, "offline_small", 0).read_text().splitlines()]
    assert meta["offline"]["made"] == len(offline) - 6 and meta["offline"]["asked"] >= 1
    from rods_lab.experiments.report import write

    text = (write(out, tmp_path / "report", png=False, log=lambda *_: None) / "summary.md").read_text()
    assert (
        "- H1: 6 tasks (its sha256 under Sizes)" in text
        and "- H1: 6 tasks, sha256 `" in text
        and "## Transfer (last checkpoint)" in text
    )
    assert "| H3 | offline_small | 2 |" in text and "## Synthesized tasks trained on" in text
    assert (
        f"weights sha256 `{sha256(tiny_model_dir / 'model.safetensors')}`; torch's CPU kernels {cpu_kernels()}." in text
    )
    assert "- offline_small: " in text and "distinct tasks outside the seeds" in text
    assert f"- offline_small_r0: {meta['offline']['made']} of M = {meta['offline']['asked']} variants" in text


def test_a_run_cut_short_resumes_from_its_last_checkpoint_when_the_experiment_is_run_again(
    tmp_path, tiny_model_dir, monkeypatch
):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(smoke_config(tmp_path, tiny_model_dir)))
    spec = HeldOutSpec(h1_per_seed=1, h2_seeds=1, h2_per_seed=2, h3=2)
    args = (16, ["static"], 1, base, 2)  # 4 steps; with held-out sets, a checkpoint at each evaluation (2, 4)
    monkeypatch.setenv("RODS_FAULT", "step_end:3")  # rods_core.loop._fault: SIGKILL in step 3, after checkpoint-2
    out = run(*args, out=tmp_path / "exp", log=lambda *_: None, heldout=spec)
    (meta,) = json.loads((out / "manifest.json").read_text())["runs"]
    assert meta["status"] == "failed (-9)" and meta["resumed_from"] is None
    assert "score_s" not in meta and not (out / "runs" / "static_r0" / "heldout_scores.json").exists()  # cut short
    monkeypatch.delenv("RODS_FAULT")

    run(*args, out=out, log=lambda *_: None, heldout=spec)
    (meta,) = json.loads((out / "manifest.json").read_text())["runs"]
    assert meta["status"] == "finished" and meta["resumed_from"] == 2
    scored = json.loads((out / "runs" / "static_r0" / "heldout_scores.json").read_text())
    assert {r["step"] for r in scored} == {2, 4}  # every checkpoint, once the run finished
    log = (out / "logs" / "static_r0.log").read_text()
    assert "resuming static_r0 from checkpoint-2" in log
    reader = RunReader(out / "runs" / "static_r0")
    assert reader.query("select step from step order by step").step.tolist() == [1, 2, 3, 4]
    assert reader.eval_curve().step.tolist() == [0, 2, 4]
    # cut short again after training, while its checkpoints were scored: the next run of the experiment scores them
    scores = out / "runs" / "static_r0" / SCORES
    written = scores.read_text()
    scores.unlink()
    run(*args, out=out, log=lambda *_: None, heldout=spec)
    assert scores.read_text() == written


def test_only_runs_the_named_runs_of_the_plan_and_lists_the_others_as_not_run(tmp_path, tiny_model_dir, monkeypatch):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(smoke_config(tmp_path, tiny_model_dir)))
    args = (8, ["static"], 2, base, 1)  # 2 steps, repeats 0 and 1
    with pytest.raises(ValueError, match="static_r2 not in this plan"):
        run(*args, out=tmp_path / "exp", log=lambda *_: None, only=["static_r2"])
    assert not (tmp_path / "exp").exists()  # refused before anything was written

    # a bench killed in its first run (KeyboardInterrupt stands in for the kill) has already recorded what fixes
    # the floats, so that run's resume is checked below as a finished run's is
    def killed(*_a, **_k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(arms, "launch", killed)
        with pytest.raises(KeyboardInterrupt):
            run(*args, out=tmp_path / "exp", log=lambda *_: None, only=["static_r1"])
    recorded = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    assert recorded["runs"] == [] and recorded["settings"]["cpu_kernels"] == cpu_kernels()
    assert recorded["settings"]["model_sha256"] == sha256(tiny_model_dir / "model.safetensors")

    lines = []
    out = run(*args, out=tmp_path / "exp", log=lines.append, only=["static_r1"])
    assert "2 runs (0 already complete, 1 left for later (--only))" in lines[0]
    assert "(figures of a loaded 2-core machine;" in lines[0]  # nothing measured in this folder yet
    runs = {m["run"]: m for m in json.loads((out / "manifest.json").read_text())["runs"]}
    assert runs["static_r1"]["status"] == "finished" and runs["static_r0"]["status"] == "not run"
    # the next invocation estimates from what static_r1 took here, training and checkpoint scoring
    took = (runs["static_r1"]["wall_s"] + runs["static_r1"].get("score_s", 0.0)) / 60
    assert not (out / "runs" / "static_r0").exists()

    # what else fixes the floats is recorded; a restart under other CPU kernels or another model is refused
    manifest = json.loads((out / "manifest.json").read_text())
    kernels, model_sha = manifest["settings"]["cpu_kernels"], manifest["settings"]["model_sha256"]
    assert kernels and model_sha == sha256(tiny_model_dir / "model.safetensors")
    for field, other, fix in (
        ("cpu_kernels", "SVE256", "ATEN_CPU_CAPABILITY=sve256"),
        ("model_sha256", "0" * 64, "rebuild"),
    ):
        (out / "manifest.json").write_text(json.dumps({**manifest, "settings": {**manifest["settings"], field: other}}))
        lines = []
        with pytest.raises(ValueError, match=f"would not repeat its runs: .*{fix}"):
            run(*args, out=out, log=lines.append, only=["static_r0"])
        assert f"estimated {took:.0f} min (measured on this folder's runs;" in lines[0]
        assert not (out / "runs" / "static_r0").exists()


def test_cpu_kernels_names_the_instruction_set_torch_dispatches_to_and_follows_its_cap():
    code = "from rods_lab.experiments.machine import cpu_kernels; print(cpu_kernels())"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    capped = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert capped.stdout.strip() == "DEFAULT"  # the portable kernels, on any machine
    assert cpu_kernels() not in (None, "")

"""Exact resume: a run killed with SIGKILL at any moment — before its first checkpoint, mid-step, mid-save —
resumes to a store with exactly one row per step and per evaluation, and every decision applied once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from rods_core.benchmarks.bfcl.demo import demo_seeds
from storage.control import ControlDB
from storage.reader import RunReader
from tests.conftest import smoke_config

ROOT = Path(__file__).resolve().parent.parent


def _run(config: Path, *args: str, log: Path, fault: str | None = None) -> int:
    """`rods train` to its end (or its injected SIGKILL); returns the exit code."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("RODS_FAULT", None)
    if fault:
        env["RODS_FAULT"] = fault  # rods_core.loop._fault: SIGKILL at exactly that moment
    with log.open("ab") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "rods_lab.cli", "train", "--config", str(config), *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=600,
        )
    return proc.returncode


def test_sigkill_at_three_moments_then_resume_exactly(tmp_path, tiny_model_dir):
    cfg = smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 6, "grpo.save_steps": 2, "eval.every": 3})
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(cfg))
    run_dir, log = tmp_path / "runs" / "killme", tmp_path / "train.log"
    db = ControlDB(tmp_path / "ws" / "control.sqlite")
    # a decision waiting before the run starts: it is applied at step 1, then twice more re-applied
    # only if it was lost with a killed process; its effect must be in the final pools exactly once
    parent = demo_seeds()[0].id
    db.create_run("killme", run_dir, cfg, "rods", name="killme")
    decision = db.add_decision("killme", parent, "reseed", {"mode": "synthesize"})

    # 1. killed mid-step 1, before any checkpoint: the resume starts from step 0 with the store emptied
    assert _run(config, "--run-id", "killme", log=log, fault="step_end:1") == -9
    assert not (run_dir / "checkpoints" / "checkpoint-2").exists()
    # 2. resumed, killed mid-save at step 4: TRL's checkpoint-4 exists, its RODS state does not
    assert _run(config, "--resume", "killme", log=log, fault="save:4") == -9
    assert "resuming killme from step 0 (no complete checkpoint)" in log.read_text()
    assert (run_dir / "checkpoints" / "checkpoint-4").exists()
    assert not (run_dir / "checkpoints" / "checkpoint-4" / "rods_state.json").exists()
    # 3. resumed from checkpoint-2 (the newest complete one), killed mid-step 5 after checkpoint-4 is whole
    assert _run(config, "--resume", "killme", log=log, fault="step_end:5") == -9
    assert "resuming killme from checkpoint-2" in log.read_text()
    # 4. resumed from checkpoint-4 to the end
    assert _run(config, "--resume", "killme", log=log) == 0, log.read_text()[-3000:]
    assert "resuming killme from checkpoint-4" in log.read_text()

    reader = RunReader(run_dir)
    assert reader.query("select step from step order by step")["step"].tolist() == list(range(1, 7))
    assert reader.query("select step from eval order by step")["step"].tolist() == [0, 3, 6]
    per_step = reader.query("select step, count(*) n, count(distinct task_id) d from task_stats group by step")
    assert sorted(per_step["step"]) == list(range(1, 7)) and (per_step["n"] == per_step["d"]).all()
    applied = reader.query("select step, decision_id, outcome from decision_applied")
    assert applied.to_dict("records") == [{"step": 1, "decision_id": decision.id, "outcome": "applied"}]
    assert db.decisions("killme")[0].status == "applied"
    # its effect, once: the task was handed to synthesis at the next step's round (decisions apply last)
    samples = reader.query("select step, task_id from boundary_sample order by step")
    assert samples.to_dict("records") == [{"step": 2, "task_id": parent}]
    saved = json.loads((run_dir / "checkpoints" / "checkpoint-6" / "rods_state.json").read_text())
    assert saved["step"] == 6 and saved["trajectories"] == 6 * 2 * 2  # counters carried across three kills
    assert (run_dir / "final" / "model.safetensors").exists()
    assert db.get_run("killme").status == "finished"


def test_resume_of_an_unknown_run_is_refused_before_anything_is_created(tmp_path, tiny_model_dir):
    cfg = smoke_config(tmp_path, tiny_model_dir)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", "train", "--config", str(config), "--resume", "nosuchrun"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "nosuchrun" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs" / "nosuchrun").exists()

"""Two CPU training processes through accelerate's own launcher: the ranks hold identical buffer and
detector state at every step, rank 0 alone writes, a decision is applied once, and a kill + resume is clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from rods_core.policy.demo import demo_seeds
from storage.control import ControlDB
from storage.reader import RunReader
from tests.conftest import smoke_config

ROOT = Path(__file__).resolve().parent.parent


def _train(config: Path, *args: str, log: Path, fault: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "RODS_FAULT"}
    if fault:
        env["RODS_FAULT"] = fault  # rods_core.loop._fault: the rank that reaches it is SIGKILLed there
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rods_core.cli", "train", "--config", str(config), "--processes", "2", *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            return proc.wait(timeout=600)
        finally:
            try:  # a rank killed alone leaves its peer and the launcher behind: end the whole group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_two_processes_agree_write_once_apply_a_decision_once_and_resume(tmp_path, tiny_model_dir):
    cfg = smoke_config(
        tmp_path,
        tiny_model_dir,
        **{
            "method": "uniform_synth",  # synthesizes from seeds whatever the rewards (an untrained model scores 0)
            "grpo.max_steps": 4,
            "grpo.save_steps": 2,
            "buffer.probe_obs": 1,  # a variant probed hard retires at once: the run synthesizes and retires
            "synthesis.parents_per_step": 2,
            # the demo's update: one forward call per distinct prompt and per rollout, so the ranks make
            # different numbers of calls whenever a rank's groups share a task
            "grpo.shared_prompt": True,
        },
    )
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(cfg))
    run_dir, log = tmp_path / "runs" / "pair", tmp_path / "train.log"
    db = ControlDB(tmp_path / "ws" / "control.sqlite")
    db.create_run("pair", run_dir, cfg, "uniform_synth", name="pair")
    decision = db.add_decision("pair", demo_seeds()[0].id, "reseed", {"mode": "synthesize"})

    assert _train(config, "--run-id", "pair", log=log, fault="step_end:3") != 0  # killed mid-step 3
    assert _train(config, "--resume", "pair", log=log) == 0, log.read_text()[-4000:]
    text = log.read_text()
    assert "resuming pair from checkpoint-2" in text

    reader = RunReader(run_dir)
    digests = reader.query("select step, rank, digest from state_digest order by step, rank")
    assert digests["step"].tolist() == [1, 1, 2, 2, 3, 3, 4, 4] and set(digests["rank"]) == {0, 1}
    assert (digests.groupby("step")["digest"].nunique() == 1).all(), digests  # every rank, the same state
    steps = reader.query('select step, "train/trajectories" t from step order by step')
    assert steps["step"].tolist() == [1, 2, 3, 4]  # one writer: one row per step
    assert steps["t"].tolist() == [8.0] * 4  # 2 tasks x 2 rollouts x 2 processes
    moves = reader.query("select reason from buffer")["reason"].str.split(":").str[0].tolist()
    assert "offer/staged" in moves and any(m.startswith("probe/") for m in moves)  # synthesized, then retired
    applied = reader.query("select decision_id, outcome from decision_applied")
    assert applied.to_dict("records") == [{"decision_id": decision.id, "outcome": "applied"}]
    assert db.decisions("pair")[0].status == "applied"
    assert db.get_run("pair").status == "finished"

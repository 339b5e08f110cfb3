"""Two CPU training processes through accelerate's own launcher: the ranks hold identical buffer and
detector state at every step, rank 0 alone writes, a decision is applied once, and a kill + resume is clean."""

from __future__ import annotations

import yaml

from rods_core.benchmarks.bfcl.demo import demo_seeds
from storage.control import ControlDB
from storage.reader import RunReader
from tests.conftest import smoke_config
from tests.launch_helpers import equal_digests_per_step, train


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

    assert train(config, "--run-id", "pair", log=log, fault="step_end:3") != 0  # killed mid-step 3
    assert train(config, "--resume", "pair", log=log) == 0, log.read_text()[-4000:]
    text = log.read_text()
    assert "resuming pair from checkpoint-2" in text

    reader = RunReader(run_dir)
    assert equal_digests_per_step(reader) == [1, 2, 3, 4]
    steps = reader.query('select step, "train/trajectories" t from step order by step')
    assert steps["step"].tolist() == [1, 2, 3, 4]  # one writer: one row per step
    assert steps["t"].tolist() == [8.0] * 4  # 2 tasks x 2 rollouts x 2 processes
    moves = reader.query("select reason from buffer")["reason"].str.split(":").str[0].tolist()
    assert "offer/staged" in moves and any(m.startswith("probe/") for m in moves)  # synthesized, then retired
    applied = reader.query("select decision_id, outcome from decision_applied")
    assert applied.to_dict("records") == [{"decision_id": decision.id, "outcome": "applied"}]
    assert db.decisions("pair")[0].status == "applied"
    assert db.get_run("pair").status == "finished"

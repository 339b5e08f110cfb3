"""A run killed mid-way and resumed from its last checkpoint gives the figures of the same run uninterrupted: every
step figure (time aside), every evaluation and the final pools. This is what lets `rods bench paper` resume a run
cut short instead of starting it again: an experiment's runs can be spread over several sittings."""

from __future__ import annotations

import pytest
import yaml

from storage.reader import RunReader
from tests.app_helpers import smoke_config
from tests.test_resume import _run


def _records(df) -> list[dict]:
    """Rows without their clock fields and log positions, NaN as None (NaN != NaN would fail equal rows)."""
    df = df[
        [
            c
            for c in df.columns
            if c not in ("time", "wall_s", "seq") and not c.startswith("time/") and "seconds" not in c
        ]
    ]
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _figures(run_dir) -> dict:
    reader = RunReader(run_dir)
    return {
        "steps": _records(reader.query("select * from step order by step")),
        "evals": _records(reader.eval_curve()),
        "task_stats": _records(reader.query("select * from task_stats order by step, task_id")),
    }


@pytest.mark.parametrize("method", ["static", "rods"])
def test_a_run_killed_and_resumed_gives_the_figures_of_the_run_uninterrupted(tmp_path, tiny_model_dir, method):
    overrides = {
        "method": method,
        "grpo.max_steps": 6,
        "grpo.save_steps": 2,
        "eval.every": 3,
        # uniform parents: an untrained model's groups are all flat, and synthesis must still run every step
        "buffer.synth_parents": "uniform",
        "buffer.probe_slots": 2,
        "synthesis.parents_per_step": 2,
        "synthesis.deterministic": True,
        "synthesis.apply_after": 1,
    }
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(smoke_config(tmp_path, tiny_model_dir, **overrides)))
    log = tmp_path / "train.log"
    assert _run(config, "--run-id", "whole", log=log) == 0, log.read_text()[-3000:]
    # killed after step 5's figures are written, resumed from checkpoint-4: steps 5 and 6 run again
    assert _run(config, "--run-id", "cut", log=log, fault="step_end:5") == -9
    assert _run(config, "--resume", "cut", log=log) == 0, log.read_text()[-3000:]
    assert "resuming cut from checkpoint-4" in log.read_text()

    whole, cut = (_figures(tmp_path / "runs" / r) for r in ("whole", "cut"))
    assert len(whole["steps"]) == len(cut["steps"]) == 6
    if method == "rods":
        assert sum(r["synth/accepted"] for r in whole["steps"][4:]) > 0  # variants landed after the checkpoint
    for step, (a, b) in enumerate(zip(whole["steps"], cut["steps"], strict=True), start=1):
        assert a == b, f"step {step}: " + ", ".join(f"{k} {a[k]} != {b[k]}" for k in a if a[k] != b[k])
    assert whole["evals"] == cut["evals"]
    assert whole["task_stats"] == cut["task_stats"]

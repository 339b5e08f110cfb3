"""A run killed with SIGKILL mid-training leaves a readable store and resumes from its last checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from storage.reader import RunReader
from tests.conftest import smoke_config


def _launch(config: Path, *args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "rods_core.cli", "train", "--config", str(config), *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def test_sigkill_mid_step_then_resume(tmp_path, tiny_model_dir):
    cfg = smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 7, "grpo.save_steps": 2})
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "runs" / "killme"
    log = tmp_path / "train.log"
    proc = _launch(config, "--run-id", "killme", log=log)
    state = run_dir / "checkpoints" / "checkpoint-2" / "rods_state.json"
    deadline = time.time() + 300
    while not state.exists():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.time() < deadline, "no checkpoint within 300 s"
        time.sleep(0.2)
    time.sleep(1.5)  # well inside step 3 or 4: generation, the optimizer step or a write
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    reader = RunReader(run_dir)  # the store reads cleanly: no half-written part is visible
    steps_before = reader.query("select step from step order by step")["step"].tolist()
    assert steps_before == sorted(set(steps_before)) and steps_before[:2] == [1, 2]
    import pyarrow.parquet as pq

    for part in (run_dir / "events").rglob("*.parquet"):  # every visible part is a whole Parquet file
        pq.read_metadata(part)

    proc = _launch(config, "--resume", "killme", log=log)
    assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    assert "resuming killme from checkpoint-" in log.read_text()
    reader = RunReader(run_dir)
    assert reader.query("select step from step order by step")["step"].tolist() == list(range(1, 8))
    per_step = reader.query(
        "select step, count(*) n, count(distinct task_id) d from task_stats group by step order by step"
    )
    assert per_step["step"].tolist() == list(range(1, 8)) and (per_step["n"] == per_step["d"]).all()
    saved = json.loads((run_dir / "checkpoints" / "checkpoint-6" / "rods_state.json").read_text())
    assert saved["step"] == 6 and saved["trajectories"] == 6 * 2 * 2  # counters carried across the kill
    assert (run_dir / "final" / "model.safetensors").exists()

"""A run with synthesis.deterministic repeats exactly: the same 6-step config trained twice, the second time with
a CPU hog beside it and its synthesizer slowed past a step, gives the same figure at every step (time/* aside),
the same draws and the same pools. Without the setting the same pair differs (the test's own control)."""

from __future__ import annotations

import subprocess
import sys
import time

from rods_core.config import RunConfig
from tests.app_helpers import smoke_config


def _train(tmp_path, model_dir, run_id: str, deterministic: bool = True) -> list[dict]:
    from rods_core.loop import StepWatcher
    from rods_lab.run import train

    rows = []

    class Keep(StepWatcher):
        def after_step(self, row: dict, drawn: list) -> None:
            rows.append(
                {k: v for k, v in row.items() if not k.startswith("time/") and k != "wall_s"} | {"drawn": drawn}
            )

    overrides = {
        "grpo.max_steps": 6,
        "grpo.save_steps": 6,
        # uniform parents: an untrained model's groups are all flat, and synthesis must still run every step
        "buffer.synth_parents": "uniform",
        "buffer.probe_slots": 2,
        "synthesis.parents_per_step": 2,
        "synthesis.deterministic": deterministic,
        "synthesis.apply_after": 1,
    }
    cfg = RunConfig.model_validate(smoke_config(tmp_path / run_id, model_dir, **overrides))
    train(cfg, run_id=run_id, log=lambda *_: None, watcher=Keep())
    return rows


def _pair(tmp_path, model_dir, monkeypatch, deterministic: bool) -> tuple[list[dict], list[dict]]:
    """(quiet run, loaded run): the loaded one beside a CPU hog, its synthesis jobs 3 s slower (a step of the
    tiny model takes well under that), as a loaded machine's worker would be."""
    from rods_core.benchmarks.synth_worker import VariantsJob  # the worker's job for every benchmark

    tag = "det" if deterministic else "free"
    quiet = _train(tmp_path, model_dir, f"quiet_{tag}", deterministic)
    job = VariantsJob.__call__
    monkeypatch.setattr(VariantsJob, "__call__", lambda *args: (time.sleep(3.0), job(*args))[1])
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = _train(tmp_path, model_dir, f"loaded_{tag}", deterministic)
    finally:
        hog.kill()
        hog.wait()
        monkeypatch.setattr(VariantsJob, "__call__", job)
    return quiet, loaded


def test_the_same_config_trained_twice_once_beside_a_cpu_hog_gives_the_same_figures_and_pools(
    tmp_path, tiny_model_dir, monkeypatch
):
    quiet, loaded = _pair(tmp_path, tiny_model_dir, monkeypatch, deterministic=True)
    assert len(quiet) == len(loaded) == 6
    assert sum(r["synth/accepted"] for r in quiet) > 0  # synthesis results did land: the schedule was exercised
    for step, (a, b) in enumerate(zip(quiet, loaded, strict=True), start=1):
        assert a == b, f"step {step}: " + ", ".join(f"{k} {a.get(k)} != {b.get(k)}" for k in a if a.get(k) != b.get(k))
    # the control: taking whatever the worker has finished, the same pair does not repeat
    quiet, loaded = _pair(tmp_path, tiny_model_dir, monkeypatch, deterministic=False)
    assert quiet != loaded

"""A run process the heartbeat test holds in each phase before its first step (tests/test_heartbeats.py).

It is the real recorder (storage.run_recorder.open_run_recorder) with a short start-up beat, then: starting
(registered, nothing built), building (it reports an SFT epoch and blocks there: the build's work itself is
not needed to show its liveness), waiting (the real `ensure_model` waits on the build lock the test holds,
until the test has made the model and let go), starting again (model built, no step), one step, then silence
(the steps stopped: stale), then finished. Between the step and the silence it holds a `working()` block
(an evaluation between steps), which beats. It moves on when the test creates the file named for the next phase.

Usage: python heartbeat_driver.py <config.yaml> <run id> <folder of go-files>
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rods_core.build import ensure_model
from rods_core.config import load_config
from storage.run_recorder import open_run_recorder

BEAT_S = 0.25


def go(folder: Path, phase: str) -> None:
    while not (folder / phase).exists():
        time.sleep(0.05)


def main(config: str, run_id: str, signals: str) -> None:
    cfg, folder = load_config(config), Path(signals)
    run_dir = Path(cfg.output_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    rec = open_run_recorder(cfg, run_dir, run_id, False, startup_beat_s=BEAT_S)
    go(folder, "build")
    rec.build_progress("sft", epoch=1, epochs=9, loss=0.5, eta_s=60)
    go(folder, "wait")
    ensure_model(cfg, lambda *_: None, run_id=run_id, progress=rec.build_progress)
    go(folder, "step")
    rec.write({"step": [{"step": 1, "wall_s": 1.0, "time/step_s": 1.0, "reward/mean": 0.5}]})
    rec.flush()
    rec.heartbeat(1)
    go(folder, "work")
    with rec.working():  # an evaluation between steps: no step reported, still beating
        go(folder, "worked")
    go(folder, "end")
    rec.close("finished")


if __name__ == "__main__":
    main(*sys.argv[1:])

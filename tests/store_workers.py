"""Worker processes for the store tests (run as `python tests/store_workers.py <role> ...`).

writer RUN_DIR SECONDS ROWS COMPACT_AT MIN_STEPS STOP_FILE
                                        - log steps until SECONDS pass, MIN_STEPS are written and STOP_FILE
                                          exists; print the steps written
killable RUN_DIR ROWS                   - log steps forever (flushing each), to be SIGKILLed
consumer DB RUN_ID OUT                  - claim decisions, append each claimed id to OUT, mark
                                          applied; stop after OUT.stop appears
control DB RUN_ID N                     - N rounds of heartbeat + add_decision + list_runs
open DB LEGACY GO_FILE                  - once GO_FILE exists, open the store DB (carrying LEGACY over)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.events import EventLog  # noqa: E402


def log_step(log: EventLog, step: int, rows: int) -> None:
    log.append(
        "task_stats",
        [
            {
                "step": step,
                "task_id": f"t{i}",
                "n": 8,
                "mean": (step % 9) / 8,
                "var": 0.01 * (i % 5),
                "smoothed_mean": 0.5,
                "smoothed_var": 0.02,
                "region": ("mastered", "boundary", "hard")[i % 3],
            }
            for i in range(rows)
        ],
    )
    log.append(
        "buffer",
        {
            "step": step,
            "task_id": f"t{step % rows}",
            "from_pool": "staged",
            "to_pool": "active",
            "reason": "probe passed",
        },
    )
    # The step row goes last: a reader that sees step s in `step` must see all of step s's rows.
    log.append("step", {"step": step, "wall_s": float(step), "reward/mean": 0.5, "train/loss": 0.1})
    log.flush()


def writer(run_dir: str, seconds: str, rows: str, compact_at: str, min_steps: str, stop_file: str) -> None:
    """Stops once SECONDS have passed, MIN_STEPS are written and the reader has made STOP_FILE (its
    queries are done): how much happened does not depend on the machine's speed, only how long it took."""
    log = EventLog(run_dir, compact_at_files=int(compact_at))
    end, step = time.monotonic() + float(seconds), 0
    while time.monotonic() < end or step < int(min_steps) or not Path(stop_file).exists():
        log_step(log, step, int(rows))
        step += 1
        time.sleep(0.01)
    log.close()
    print(json.dumps({"steps": step}))


def killable(run_dir: str, rows: str) -> None:
    log = EventLog(run_dir, compact_at_files=8)
    step = 0
    while True:
        log_step(log, step, int(rows))
        # Rows of the next step, buffered until the next flush: a kill before it loses them whole.
        log.append("rollouts", [{"step": step + 1, "task_id": "t0", "sample": k, "reward": 1.0} for k in range(4)])
        step += 1
        if step == 3:
            print("ready", flush=True)


def consumer(db_path: str, run_id: str, out: str) -> None:
    from storage.control import ControlDB

    db = ControlDB(db_path)
    stop = Path(out + ".stop")
    with open(out, "a") as f:
        while True:
            last_round = stop.exists()  # one more round after the producer is done
            for d in db.claim_decisions(run_id):
                f.write(f"{d.id}\n")
                f.flush()
                if not db.mark_decision(d.id, "applied", f"applied by {os.getpid()}", step=1):
                    f.write(f"double-mark {d.id}\n")
            if last_round:
                return
            time.sleep(0.05)


def control(db_path: str, run_id: str, n: str) -> None:
    from storage.control import ControlDB

    db = ControlDB(db_path)
    for i in range(int(n)):
        db.heartbeat(run_id, step=i)
        db.add_decision(run_id, f"task_{os.getpid()}_{i}", "approve", author=str(os.getpid()))
        db.list_runs()
    print(json.dumps({"rounds": int(n)}))


def open_store(db_path: str, legacy: str, go_file: str) -> None:
    from storage.control import ControlDB

    while not Path(go_file).exists():
        time.sleep(0.005)
    db = ControlDB(db_path, legacy=legacy)
    print(json.dumps({"runs": len(db.list_runs())}))


if __name__ == "__main__":
    roles = {"writer": writer, "killable": killable, "consumer": consumer, "control": control, "open": open_store}
    roles[sys.argv[1]](*sys.argv[2:])

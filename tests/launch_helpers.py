"""Training processes started the way a user starts them (`rods train`, `accelerate launch`), each launcher in its
own process group so a rank that dies alone never leaves its peers behind; and the per-rank digest check."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch"]
RODS = ["-m", "rods_lab.cli"]


def start(cmd: list[str], log: Path, fault: str | None = None) -> subprocess.Popen:
    """`cmd` in the project folder, appending to `log`, in a new process group."""
    env = {k: v for k, v in os.environ.items() if k != "RODS_FAULT"}
    if fault:
        env["RODS_FAULT"] = fault  # rods_core.loop._fault: the rank that reaches it is SIGKILLed there
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 600) -> int:
    """Its exit code; the whole group is ended afterwards (a launcher outlives a rank killed alone)."""
    try:
        return proc.wait(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def train(config: Path, *args: str, log: Path, fault: str | None = None) -> int:
    """`rods train --config <config> --processes 2 <args>`: the CLI hands off to accelerate's launcher."""
    cmd = [sys.executable, *RODS, "train", "--config", str(config), "--processes", "2", *args]
    return finish(start(cmd, log, fault))


def equal_digests_per_step(reader) -> list[int]:
    """The steps whose state digests were written, asserting that every rank wrote one and all are equal."""
    digests = reader.query("select step, rank, digest from state_digest order by step, rank")
    ranks = set(digests["rank"])
    assert ranks == {0, 1}, digests
    assert (digests.groupby("step")["rank"].nunique() == len(ranks)).all(), digests
    assert (digests.groupby("step")["digest"].nunique() == 1).all(), digests  # every rank, the same state
    return sorted(set(digests["step"]))

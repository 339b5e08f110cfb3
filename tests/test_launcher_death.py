"""A launched worker never outlives its launcher: torchrun puts each worker in a session of its own, so
stopping the launcher's process group would otherwise leave workers waiting forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# The launcher starts a worker in its own session, as torchrun does, prints its pid and sleeps.
LAUNCHER = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=dict(os.environ), start_new_session=True)
print(worker.pid, flush=True)
time.sleep(120)
"""
WORKER = "from rods_core.ranks import die_with_launcher; die_with_launcher(); import time; time.sleep(120)"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _worker_after_launcher_killed(local_rank: bool, wait_s: float) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}
    if local_rank:
        env["LOCAL_RANK"] = "1"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, WORKER], env=env, stdout=subprocess.PIPE, text=True)
    worker = int(launcher.stdout.readline())
    time.sleep(3)  # the worker has imported rods_core.ranks and armed the signal
    launcher.kill()
    launcher.wait()
    deadline = time.monotonic() + wait_s
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    return alive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_launched_worker_ends_with_its_launcher_and_a_plain_process_does_not():
    assert _worker_after_launcher_killed(local_rank=True, wait_s=20) is False
    assert _worker_after_launcher_killed(local_rank=False, wait_s=2) is True  # outside a launcher nothing is armed

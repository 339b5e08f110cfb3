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


def _outlives(pid: int, wait_s: float) -> bool:
    """Whether `pid` is still running after `wait_s` seconds (then killed, so no test leaves it behind)."""
    deadline = time.monotonic() + wait_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def _worker_after_launcher_killed(local_rank: bool, wait_s: float) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}
    if local_rank:
        env["LOCAL_RANK"] = "1"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, WORKER], env=env, stdout=subprocess.PIPE, text=True)
    worker = int(launcher.stdout.readline())
    time.sleep(3)  # the worker has imported rods_core.ranks and armed the signal
    launcher.kill()
    launcher.wait()
    return _outlives(worker, wait_s)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_launched_worker_ends_with_its_launcher_and_a_plain_process_does_not():
    assert _worker_after_launcher_killed(local_rank=True, wait_s=20) is False
    assert _worker_after_launcher_killed(local_rank=False, wait_s=2) is True  # outside a launcher nothing is armed


# An experiment's runner: one run in the foreground through rods_lab.launch.train_to_end, the run a process that
# prints its pid and sleeps (train_command replaced: `rods train` itself needs a model and minutes).
RUNNER = """
import sys, rods_lab.launch as launch
launch.train_command = lambda *a, **k: [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(120)"]
timeout = None if sys.argv[2] == "none" else float(sys.argv[2])
with open(sys.argv[1], "w") as log:
    print(launch.train_to_end("unused.yaml", "r1", log, timeout_s=timeout), flush=True)
"""


@pytest.mark.parametrize("stop", ["sigterm", "timeout"])
def test_a_run_never_outlives_the_experiment_that_launched_it(tmp_path, stop):
    """Stopping an experiment (SIGTERM) or its run's timeout stops the run's whole process group; before, the run
    went on training beside the next launch of itself, holding its lock."""
    log = tmp_path / "run.log"
    # a timeout the run outlasts only once started: at 0.1 s a loaded machine killed it before it printed its pid
    timeout = "5" if stop == "timeout" else "none"
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(log), timeout], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not log.read_text().strip() if log.exists() else True:
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.1)
    run_pid = int(log.read_text().split()[0])
    if stop == "sigterm":
        runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    if stop == "timeout":
        assert out.strip() == "timeout"
    assert not _outlives(run_pid, 10)


# A group's leader that exits on SIGTERM at once, and a member of its group that ignores SIGTERM.
LEADER = """
import os, signal, subprocess, sys, time
member = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('armed', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
member.stdout.readline()
print(member.pid, flush=True)
time.sleep(120)
"""


def test_stopping_a_group_kills_a_member_that_outlives_its_leader():
    """The leader (accelerate's launcher, in a run) gone after SIGTERM does not end the stop: what is left of its
    group is killed after the grace."""
    from rods_lab.launch import stop_group

    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True)
    member = int(leader.stdout.readline())
    stop_group(leader, grace_s=1.0)
    alive = _outlives(member, 10)
    assert leader.returncode == -signal.SIGTERM and not alive

"""A command that needs several processes hands itself to accelerate's launcher (torchrun), once."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

from rods_lab.cli._common import stdout_for_exec

ACCELERATE_CPU_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "cpu.yaml"


def handoff_to_accelerate(n: int, argv: list[str], cpu: bool) -> NoReturn:
    """Replace this process by `accelerate launch` running the same command in `n` processes.

    The pid stays the same (exec), so whoever started the run (the app) still holds its launcher; rank 0
    registers its own pid as the run's process once it starts, and the Stop button signals it."""
    # one machine: a free port per launch (0), never a fixed one two runs at once would race for
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(n), "--num_machines", "1",
           "--main_process_port", "0"]  # fmt: skip
    if cpu:  # torchrun's launcher; the trainer itself asks for the CPU (gloo), see configs/accelerate/cpu.yaml
        cmd += ["--config_file", str(ACCELERATE_CPU_CONFIG)]
    else:
        cmd += ["--multi_gpu", "--dynamo_backend", "no"]
    cmd += ["-m", "rods_lab.cli", *argv]
    sys.stdout.flush()
    stdout_for_exec()  # under --json the ranks print the document; it must reach the real stdout
    os.execv(sys.executable, cmd)

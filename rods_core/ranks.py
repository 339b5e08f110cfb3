"""This process's place among the training processes, and the two collectives the run loop needs.

Several processes come from accelerate's own launcher (`accelerate launch`, or `rods train --processes N`,
which hands off to it): on CPU they talk over gloo, on GPUs over NCCL — the same code. Every rank runs the
curriculum on the same gathered reward matrix; what comes from outside a process (researcher decisions,
synthesized variants) is read on rank 0 and shared, so every rank's buffer makes the same moves.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1

    @classmethod
    def current(cls, cpu: bool = False) -> Ranks:
        """The ranks of this launch. `cpu` must match the trainer's `use_cpu`: accelerate's process state
        is set up once per process, and only `cpu=True` makes CPU processes join one gloo group."""
        from accelerate import PartialState

        state = PartialState(cpu=cpu)
        return cls(state.process_index, state.num_processes)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def share(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (a picklable object)."""
        if self.world == 1:
            return obj
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([obj])[0]

    def close(self) -> None:
        """End the process group once every rank got here. Left to interpreter exit, gloo's threads are
        torn down in no set order: one 2-process demo run of nine aborted at exit ("terminate called without
        an active exception", SIGABRT) after its last step and eval were written, and torchrun then reports
        the whole run failed."""
        if self.world == 1:
            return
        import torch.distributed as dist

        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()

    def gather(self, items: list) -> list:
        """Every rank's `items`, concatenated in rank order, on every rank."""
        if self.world == 1:
            return list(items)
        from accelerate.utils import gather_object

        return gather_object(list(items))


def digest(state: Any) -> str:
    """A short hash of a JSON-serialisable state (buffer + detector): equal on every rank or a bug."""
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:16]


ACCELERATE_CPU_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "accelerate" / "cpu.yaml"


def under_launcher() -> bool:
    """True inside a process started by accelerate's (torchrun's) launcher."""
    return "LOCAL_RANK" in os.environ


def handoff_to_accelerate(n: int, argv: list[str], cpu: bool) -> NoReturn:
    """Replace this process by `accelerate launch` running the same command in `n` processes.

    The pid stays the same (exec), so whoever started the run (the app) still holds its launcher; rank 0
    registers its own pid as the run's process once it starts, and the Stop button signals it."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(n), "--num_machines", "1"]
    if cpu:  # torchrun's launcher; the trainer itself asks for the CPU (gloo), see configs/accelerate/cpu.yaml
        cmd += ["--config_file", str(ACCELERATE_CPU_CONFIG)]
    else:
        cmd += ["--multi_gpu", "--dynamo_backend", "no"]
    cmd += ["-m", "rods_core.cli", *argv]
    sys.stdout.flush()
    os.execv(sys.executable, cmd)

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
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

# transformers' TrainingArguments.ddp_timeout default, in seconds (tests/test_gpu_path.py compares them)
DDP_TIMEOUT_S = 1800


def distributed_timeout(trainer_args: dict[str, Any]) -> timedelta:
    """The run's distributed timeout: `grpo.trainer_args.ddp_timeout` (TrainingArguments' own field, seconds), else
    that field's default. torch fixes a process group's timeout when the group is made, and the run makes its group
    before GRPOConfig exists, so the value must reach the group here, not through GRPOConfig."""
    return timedelta(seconds=int(trainer_args.get("ddp_timeout", DDP_TIMEOUT_S)))


def end_process_group() -> None:
    """Every rank waits for the others, then the default process group and its subgroups go. Left to interpreter
    exit, gloo's threads are torn down in no set order: one 2-process demo run of nine aborted at exit ("terminate
    called without an active exception", SIGABRT) after its last step and eval were written, and torchrun then
    reports the whole run failed. Collecting garbage first matters as much: FSDP2 modules sit in reference cycles,
    so tensors and gloo work held by them outlive destroy_process_group until finalization frees them; the 2-rank
    FSDP2 accumulation check aborted there in 7 runs of 10 on a loaded 2-core machine with barrier and destroy
    alone, and in none of 18 with the collection before them."""
    import gc

    import torch.distributed as dist

    if dist.is_initialized():
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1

    @classmethod
    def current(cls, cpu: bool = False, timeout: timedelta | None = None) -> Ranks:
        """The ranks of this launch. `cpu` must match the trainer's `use_cpu`: accelerate's process state
        is set up once per process, and only `cpu=True` makes CPU processes join one gloo group. `timeout`: the
        process group's, when this call makes it (None: torch's default)."""
        from accelerate import PartialState

        state = PartialState(cpu=cpu, **({"timeout": timeout} if timeout is not None else {}))
        return cls(state.process_index, state.num_processes)

    @classmethod
    def for_run(cls, grpo) -> Ranks:
        """The ranks of a run with the GRPO settings `grpo` (rods_core.config.GRPOSettings): its device choice and
        its distributed timeout (`grpo.trainer_args.ddp_timeout`)."""
        return cls.current(cpu=grpo.use_cpu, timeout=distributed_timeout(grpo.trainer_args))

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
        """End the process group once every rank got here (end_process_group)."""
        if self.world > 1:
            end_process_group()

    def gather(self, items: list) -> list:
        """Every rank's `items`, concatenated in rank order, on every rank."""
        if self.world == 1:
            return list(items)
        from accelerate.utils import gather_object

        return gather_object(list(items))


def balance(drawn: list[str], rank_slots: list[list[int]], cost: Callable[[str], float | None]) -> list[str]:
    """The drawn tasks placed in the slots so that each rank's slots carry about equal expected cost.

    `drawn[i]` is the task of slot i; `rank_slots[r]` the slots rank r plays. Longest first, each to the rank
    with the least cost so far that has a slot free (LPT); a task of unknown cost counts as the median of the
    known ones. Deterministic (ties go to the lower draw index and rank), so every rank computes the same
    placement; returns `drawn` unchanged when the slots are not a partition of its indices or no cost is known."""
    if sorted(s for slots in rank_slots for s in slots) != list(range(len(drawn))):
        return list(drawn)
    costs = [cost(t) for t in drawn]
    known = sorted(c for c in costs if c is not None)
    if not known:  # nothing to go by
        return list(drawn)
    fill = known[len(known) // 2]
    costs = [fill if c is None else c for c in costs]
    free = [list(slots) for slots in rank_slots]
    load = [0.0] * len(rank_slots)
    placed: list[str] = list(drawn)
    for i in sorted(range(len(drawn)), key=lambda i: (-costs[i], i)):
        r = min((r for r in range(len(free)) if free[r]), key=lambda r: (load[r], r))
        placed[free[r].pop(0)] = drawn[i]
        load[r] += costs[i]
    return placed


def digest(state: Any) -> str:
    """A short hash of a JSON-serialisable state (buffer + detector): equal on every rank or a bug."""
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()[:16]


def launch_refusal(
    environ: dict[str, str] | os._Environ,
    use_cpu: bool,
    bf16: bool,
    shared_prompt: bool = False,
    lora_with_vllm: bool = False,
) -> str | None:
    """Why a launch cannot train as its accelerate config asks, else None:
    - accelerate shards (FSDP, DeepSpeed) only GPU processes; on CPU (grpo.use_cpu) it ignores the request and
      trains unsharded with DDP;
    - FSDP2 frees each layer's gathered weights after its forward call and gathers them once for the backward,
      so the shared-prompt pass (many forward calls, then one backward) finds them freed ("setStorage: ...
      out of bounds for storage of size 0": tests/test_scale.py, and a lent H200);
    - under DeepSpeed, accelerate writes the launch's mixed_precision into DeepSpeed's `bf16.enabled` /
      `fp16.enabled`, and transformers' Trainer refuses one whose `bf16` differs, after the model has loaded;
    - a LoRA adapter with vLLM under FSDP or DeepSpeed: TRL syncs vLLM by merging the adapter into the base weights
      and unmerging it again, every step; under ZeRO-3 those weights are bf16, and W + BA - BA does not give W back in
      bf16 (tests/test_gpu_path.py: the base weights move), and merging over FSDP2-sharded weights is unverified
      (TRL's own TODO)."""
    deepspeed = environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    if lora_with_vllm and not use_cpu:
        for var, name in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
            if environ.get(var, "false").lower() == "true":
                return (
                    f"model.lora with grpo.use_vllm under {name}: TRL syncs vLLM by merging the adapter into the base "
                    "weights and unmerging it, every step, which moves bf16 base weights by rounding (ZeRO-3 holds "
                    "them in bf16) and is unverified over FSDP2's shards; train the adapter with DDP "
                    "(configs/accelerate/8gpu.yaml: a LoRA run's frozen base fits on each GPU), or drop model.lora"
                )
    if use_cpu:
        for var, name in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
            if environ.get(var, "false").lower() == "true":
                return (
                    f"the accelerate config asks for {name}, but grpo.use_cpu is true: accelerate shards GPU "
                    "processes only (on CPU it would train unsharded, with DDP); on CPU launch with "
                    "configs/accelerate/cpu.yaml, on GPUs set grpo.use_cpu: false"
                )
    if shared_prompt and environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return (
            "grpo.shared_prompt cannot train under FSDP2: it makes many forward calls before one backward, and "
            "FSDP2 frees each layer's gathered weights after every forward; set grpo.shared_prompt: false "
            "(TRL's batched passes, the faster choice on GPUs anyway)"
        )
    mixed = environ.get("ACCELERATE_MIXED_PRECISION", "no").lower()
    if deepspeed and (mixed not in ("bf16", "no") or (mixed == "bf16") != bf16):
        return (
            f"the accelerate config's mixed_precision is {mixed!r} and grpo.bf16 is {str(bf16).lower()}: under "
            "DeepSpeed they must agree (accelerate writes mixed_precision into DeepSpeed's config, and the "
            "trainer refuses a different bf16); set grpo.bf16: true with mixed_precision: bf16 "
            "(configs/accelerate/zero3.yaml), or grpo.bf16: false with mixed_precision: 'no'"
        )
    return None


def under_launcher() -> bool:
    """True inside a process started by accelerate's (torchrun's) launcher."""
    return "LOCAL_RANK" in os.environ


def die_with_launcher() -> None:
    """Inside a launched process: end when the launcher does (Linux's parent-death signal).

    torchrun starts each worker in a session of its own, so stopping a run's process group (the app's
    Stop, a killed launcher) leaves its workers behind, and one that is still joining the process group
    or waiting for its rank 0 waits forever. SIGKILL, as torchrun itself ends workers that outlive it."""
    if not under_launcher() or not sys.platform.startswith("linux"):
        return
    import ctypes

    launcher = os.getppid()
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != launcher:  # the launcher was gone before the signal was armed
        os._exit(1)

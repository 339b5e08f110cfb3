"""Whole weights on every rank while the training model itself plays episodes (transformers generation, the
KV-cached decoder): FSDP2 unsharded, DeepSpeed ZeRO-3 gathered as TRL gathers them for generation.

A sharded forward gathers its weights (a collective) at each call, and each rank's episodes make their own
number of forward calls (turns and lengths differ), so sharded episodes would wait on each other forever.
TRL's own generation calls `generate` once per step, which keeps ranks in step; RODS's multi-turn episodes call
the model as often as their turns need. Holding the whole weights costs one full copy per device while episodes
run (what DDP holds always), so it is skipped when vLLM generates (the training model makes no forward call;
TRL's weight sync gathers what it pushes). DDP and one process: nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace


def zero3_partitioned(model) -> bool:
    """Whether DeepSpeed ZeRO-3 partitions the model's parameters (each then carries a `ds_id`)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


@contextmanager
def whole_weights(model, optimizer=None) -> Iterator[None]:
    """The whole weights on every rank inside the block; each module's sharding as it was afterwards.

    `optimizer`: the trainer's (under ZeRO-3, TRL's generation path removes the ZeRO-3 forward hooks through the
    engine's optimizer while the weights are gathered, so no forward call issues a collective of its own)."""
    if zero3_partitioned(model):
        with _zero3_gathered(model, optimizer):
            yield
        return
    from torch.distributed.fsdp import FSDPModule

    sharded = [m for m in model.modules() if isinstance(m, FSDPModule)]
    saved = [_reshard_setting(m) for m in sharded]
    for m in sharded:
        m.set_reshard_after_forward(False, recurse=False)
        m.unshard()
    try:
        yield
    finally:
        for m, setting in zip(sharded, saved, strict=True):
            m.reshard()
            _restore_reshard_setting(m, setting)


def _reshard_setting(module) -> tuple:
    """An FSDP2 module's reshard-after-forward setting, as `set_reshard_after_forward` changes it (torch exposes
    no getter; the root's is special: its automatic choice keeps the weights after forward)."""
    state = module._get_fsdp_state()
    infos = [g.post_forward_mesh_info for g in fsdp_param_groups(state)]
    return getattr(state, "_auto_reshard_after_forward", None), infos


def _restore_reshard_setting(module, setting: tuple) -> None:
    state = module._get_fsdp_state()
    auto, infos = setting
    if hasattr(state, "_auto_reshard_after_forward"):
        state._auto_reshard_after_forward = auto
    for group, info in zip(fsdp_param_groups(state), infos, strict=True):
        group.post_forward_mesh_info = info


def fsdp_param_groups(state) -> list:
    """An FSDP2 state's parameter groups: a list in the pinned torch (2.13), one or None in earlier releases (2.11,
    which a lent GPU host had: there the root's automatic choice is its group's mesh info alone)."""
    if hasattr(state, "_fsdp_param_groups"):
        return state._fsdp_param_groups
    return [state._fsdp_param_group] if state._fsdp_param_group is not None else []


@contextmanager
def _zero3_gathered(model, optimizer) -> Iterator[None]:
    """TRL's `unwrap_model_for_generation` for ZeRO-3 (trl/models/utils.py): the parameters gathered, the ZeRO-3
    hooks removed while inside and registered again after. TRL's hook helpers read only the engine's `optimizer`
    (the ZeRO optimizer, under accelerate's wrapper); before the optimizer exists they do nothing, as in TRL."""
    import deepspeed
    from trl.models.utils import add_hooks, remove_hooks

    zero_optimizer = getattr(optimizer, "optimizer", optimizer)
    engine = SimpleNamespace(optimizer=zero_optimizer) if zero_optimizer is not None else SimpleNamespace()
    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        remove_hooks(engine)
        try:
            yield
        finally:
            add_hooks(engine)

"""Which dtype FSDP2 accumulates gradients in under accelerate's own mixed-precision policy for `mixed_precision:
bf16` (param and reduce dtype bf16, fp32 master weights), over the micro-batches of one step, two ways:
- `no_sync`: what transformers' Trainer does by default (`accelerator.no_sync` = `set_requires_gradient_sync(False)`
  until the last micro-batch): the unsharded bf16 `.grad` sums them;
- `sync_each_batch`: every micro-batch reduce-scattered into the fp32 shards (the run's setting under FSDP,
  rods_core.trainer.accelerator_config).
A small MLP, so the accumulated gradient can be set beside an fp64 sum of each micro-batch's own gradient. Used by
tests/fsdp_accumulation_worker.py (2 gloo ranks on CPU) and bench.gpu_fsdp (one CUDA rank)."""

from __future__ import annotations

from rods_core.policy.weights import fsdp_param_groups

MICRO = 32  # micro-batches per step (the paper config accumulates 32 per GPU)


def bf16_policy():
    """accelerate's MixedPrecisionPolicy for FSDP2 under `mixed_precision: bf16`."""
    from accelerate.utils import FullyShardedDataParallelPlugin

    return FullyShardedDataParallelPlugin(fsdp_version=2, mixed_precision_policy="bf16").mixed_precision_policy


def held(unit) -> dict:
    """Where the gradient of an FSDP2 unit's first parameter lives after a backward: unsharded (and its dtype) or in
    the sharded parameter (and its dtype); None where it holds none."""
    param = fsdp_param_groups(unit._get_fsdp_state())[0].fsdp_params[0]
    unsharded = param._unsharded_param.grad if param._unsharded_param is not None else None
    sharded = param.sharded_param.grad
    return {
        "unsharded": None if unsharded is None else str(unsharded.dtype),
        "sharded": None if sharded is None else str(sharded.to_local().dtype),
    }


def accumulation_check(device, micro: int = MICRO) -> dict:
    """Per way: the dtype the first micro-batch's gradient is held in, and the relative error of the accumulated
    gradient against the fp64 sum. Every rank of the default process group calls it; its batches differ by rank."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh, policy = init_device_mesh(device.type, (world,)), bf16_policy()

    def model():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64)).to(device)
        for layer in (net[0], net[2]):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
        return fully_shard(net, mesh=mesh, mp_policy=policy)

    def batch(i: int):
        return torch.randn(8, 64, generator=torch.Generator().manual_seed(1000 * rank + i)).to(device)

    # the reference: each micro-batch's gradient on its own (bf16 compute, one reduce), summed in fp64
    reference = torch.zeros(256, 64, dtype=torch.float64, device=device)
    for i in range(micro):
        net = model()
        net(batch(i)).square().mean().backward()
        reference += net[0].weight.grad.full_tensor().double()
    out = {}
    for way, each in (("no_sync", False), ("sync_each_batch", True)):
        net, first = model(), None
        for i in range(micro):
            net.set_requires_gradient_sync(each or i == micro - 1)
            net(batch(i)).square().mean().backward()
            first = first or held(net[0])
        grad = net[0].weight.grad.full_tensor().double()
        out[way] = {**first, "error": ((grad - reference).norm() / reference.norm()).item()}
    return out

"""One rank of tests/test_scale.py's FSDP2 gradient-accumulation check (started by torchrun, 2 processes over gloo):
a small MLP sharded with FSDP2 under accelerate's own mixed-precision policy for `mixed_precision: bf16`, fp32
master weights (as accelerate upcasts them), gradients accumulated over micro-batches two ways:
- `no_sync`: what transformers' Trainer does by default (`accelerator.no_sync` = `set_requires_gradient_sync(False)`
  until the last micro-batch);
- `sync_each_batch`: every micro-batch reduce-scattered (the run's setting under FSDP, rods_core.trainer.grpo_args).
Prints, per way, the dtype the first micro-batch's gradient is held in (unsharded / sharded) and the relative error
of the accumulated gradient against an fp64 sum of the same micro-batches' gradients."""

from __future__ import annotations

import json

import torch
import torch.distributed as dist
from accelerate.utils import FullyShardedDataParallelPlugin
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

MICRO = 32  # micro-batches per step (the paper config accumulates 64)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
policy = FullyShardedDataParallelPlugin(fsdp_version=2, mixed_precision_policy="bf16").mixed_precision_policy


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64))
    mesh = init_device_mesh("cpu", (world,))
    for layer in (net[0], net[2]):
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    return fully_shard(net, mesh=mesh, mp_policy=policy)


def batch(i: int) -> torch.Tensor:
    return torch.randn(8, 64, generator=torch.Generator().manual_seed(1000 * rank + i))


def held(net) -> dict:
    """Where the gradient of the first layer's weight lives after a backward: unsharded (and its dtype) or sharded."""
    param = net[0]._get_fsdp_state()._fsdp_param_group.fsdp_params[0]
    unsharded = param._unsharded_param.grad if param._unsharded_param is not None else None
    sharded = net[0].weight.grad
    return {
        "unsharded": None if unsharded is None else str(unsharded.dtype),
        "sharded": None if sharded is None else str(sharded.to_local().dtype),
    }


def accumulate(sync_each_batch: bool) -> tuple[dict, torch.Tensor]:
    net = model()
    first = None
    for i in range(MICRO):
        net.set_requires_gradient_sync(sync_each_batch or i == MICRO - 1)
        net(batch(i)).square().mean().backward()
        first = first or held(net)
    return first, net[0].weight.grad.full_tensor().double()


# the reference: each micro-batch's gradient on its own (bf16 compute, one reduce), summed in fp64
reference = torch.zeros(256, 64, dtype=torch.float64)
for i in range(MICRO):
    net = model()
    net(batch(i)).square().mean().backward()
    reference += net[0].weight.grad.full_tensor().double()
out = {}
for way, each in (("no_sync", False), ("sync_each_batch", True)):
    first, grad = accumulate(each)
    out[way] = {**first, "error": ((grad - reference).norm() / reference.norm()).item()}
if rank == 0:
    print("\nRESULT " + json.dumps(out), flush=True)
dist.destroy_process_group()

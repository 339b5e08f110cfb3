"""One rank of tests/test_scale.py's FSDP2 check (started by torchrun, 2 processes over gloo): the tiny model
sharded with FSDP2 as accelerate's fsdp.yaml shards it (each decoder layer, then the root); inside
rods_core.policy.weights.whole_weights the ranks make different numbers of forward calls (as their episodes do), then a
sharded forward, backward and AdamW step; prints the rank and digests of its full weights before and after."""

from __future__ import annotations

import hashlib
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from rods_core.policy.tiny import load_policy
from rods_core.policy.weights import _reshard_setting, whole_weights
from rods_core.ranks import end_process_group

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model, _, _ = load_policy(sys.argv[1])


def digest(tensors) -> str:
    flat = torch.cat([t.detach().flatten() for t in tensors])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


before = digest(model.parameters())
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
ids = torch.tensor([[1, 2, 3, 4, 5]])
settings = [_reshard_setting(m) for m in model.modules() if hasattr(m, "_get_fsdp_state")]
with torch.no_grad(), whole_weights(model):
    assert not any(isinstance(p, DTensor) for p in model.parameters())  # whole, local weights
    for _ in range(2 + 3 * rank):  # rank 1 makes more calls than rank 0: no collective may be pending
        model(input_ids=ids)
assert all(isinstance(p, DTensor) for p in model.parameters())  # sharded again
# each module's reshard-after-forward setting is the one it had (the root's own automatic choice included)
assert [_reshard_setting(m) for m in model.modules() if hasattr(m, "_get_fsdp_state")] == settings
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model(input_ids=ids + rank, labels=ids + rank).loss.backward()
opt.step()
after = digest(p.full_tensor() for p in model.parameters())
print(f"\nrank {rank} before {before} after {after}", flush=True)
end_process_group()

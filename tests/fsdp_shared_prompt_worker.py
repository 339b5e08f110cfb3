"""One rank of tests/test_scale.py's check of why grpo.shared_prompt is refused under FSDP2 (torchrun, gloo): the
tiny model sharded as tests/fsdp_worker.py shards it, then one loss and backward through `argv[2]`'s pass, TRL's
plain pass or RODS's shared-prompt pass (many forward calls, then one backward). Prints `backward ok` or the error."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
import trl.trainer.utils as trl_utils
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from rods_core.policy.tiny import load_policy
from rods_core.ranks import end_process_group
from rods_core.trainer import shared_prompt_logps

dist.init_process_group("gloo")
model, _, _ = load_policy(sys.argv[1])
trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 9, 8, 7]])  # one prompt (4 tokens), two completions
try:
    if sys.argv[2] == "shared":
        logps, _ = shared_prompt_logps(model, ids, torch.ones_like(ids), logits_to_keep=3)
        loss = logps.sum()
    else:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    print("backward ok", flush=True)
except RuntimeError as e:
    print(f"backward failed: {e}", flush=True)
end_process_group()

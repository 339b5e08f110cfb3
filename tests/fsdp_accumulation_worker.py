"""One rank of tests/test_scale.py's FSDP2 gradient-accumulation check (started by torchrun, 2 processes over gloo):
bench.fsdp_accumulation's comparison of `no_sync` and `sync_each_batch` on the CPU. Prints, per way, the dtype the
first micro-batch's gradient is held in (unsharded / sharded) and the relative error of the accumulated gradient
against an fp64 sum of the same micro-batches' gradients."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # torchrun puts only tests/ on the path
from bench.fsdp_accumulation import accumulation_check  # noqa: E402
from rods_core.ranks import end_process_group  # noqa: E402

dist.init_process_group("gloo")
out = accumulation_check(torch.device("cpu"))
if dist.get_rank() == 0:
    print("\nRESULT " + json.dumps(out), flush=True)
end_process_group()

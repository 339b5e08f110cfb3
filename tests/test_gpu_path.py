"""The GPU path's silent faults, pinned on CPU: the distributed timeout reaches the process group the run makes,
server-mode weight syncs end in a checked cache reset and a barrier, the importance-sampling correction the paper
config chooses, old log-probs that do not depend on left padding, and LoRA under sharding refused with the reason.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# ----- the distributed timeout --------------------------------------------------------------------------------
def test_the_default_timeout_is_transformers_own():
    from trl import GRPOConfig

    from rods_core.ranks import DDP_TIMEOUT_S

    assert {f.name: f.default for f in dataclasses.fields(GRPOConfig)}["ddp_timeout"] == DDP_TIMEOUT_S


def test_the_configured_timeout_is_the_process_groups(tmp_path):
    """One launched process (torchrun's environment) makes its gloo group through Ranks.for_run: the group's timeout
    is grpo.trainer_args.ddp_timeout, not torch's default."""
    script = textwrap.dedent(
        """
        import sys
        import torch
        import torch.distributed as dist
        from rods_core.config import RunConfig
        from rods_core.ranks import Ranks

        cfg = RunConfig.model_validate({"grpo": {"trainer_args": {"ddp_timeout": int(sys.argv[1])}}})
        ranks = Ranks.for_run(cfg.grpo)
        backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
        print(ranks.world, int(backend.options._timeout.total_seconds()))
        """
    )
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "PYTHONPATH": str(ROOT)}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", script, "77"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "77"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

"""Two training processes (accelerate, gloo) play multi-turn episodes through one vLLM server started apart.

What TRL 1.16's server mode gives each process is stood in for here, because its trainer cannot be built on
CPU (TRL's `VLLMClient.init_communicator` refuses a non-CUDA device: see docs/vllm.md): the main process
holds a `VLLMClient` (as TRL's does), the other none, and `VLLMGenerator.from_trainer` must give both a
working generator. The processes play different tasks, so they call the server a different number of times;
nothing waits on the other until the final gather.
Usage: accelerate launch --config_file configs/accelerate/cpu.yaml tests/vllm_server_driver.py URL MODEL OUT
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent


def main(url: str, model_dir: Path, out: Path) -> None:
    from accelerate import Accelerator
    from accelerate.utils import gather_object
    from trl.generation.vllm_client import VLLMClient

    from rods_core.benchmarks.bfcl.demo import demo_seeds
    from rods_core.config import EpisodeConfig
    from rods_core.policy.generation import VLLMGenerator
    from rods_core.policy.tiny import load_policy
    from rods_core.rollout import episode_benchmark, rollout_output, run_episodes

    acc = Accelerator(cpu=True)
    _, tokenizer, prompt = load_policy(model_dir)
    main_client = VLLMClient(base_url=url, connection_timeout=60) if acc.is_main_process else None
    vllm_generation = SimpleNamespace(
        mode="server", vllm_client=main_client, server_base_url=url, server_host="0.0.0.0", server_port=8000,
        server_timeout=60.0,
    )  # fmt: skip
    trainer = SimpleNamespace(vllm_generation=vllm_generation, processing_class=tokenizer)
    if main_client is None:
        del vllm_generation.vllm_client  # TRL sets the attribute on the main process only
    generator = VLLMGenerator.from_trainer(trainer)
    tasks = demo_seeds()[acc.process_index : 6 : acc.num_processes]
    cfg = EpisodeConfig(
        prompt=prompt,
        max_steps_per_turn=2,
        max_context_tokens=1024,
        sampling={"temperature": 1.0, "max_new_tokens": 16},
    )
    episodes = run_episodes(tasks, generator, cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
    ro = rollout_output(episodes)
    mine = {
        "rank": acc.process_index,
        "own_client": generator.backend.client is not main_client,
        "calls": generator.stats.calls,
        "tokens": generator.stats.tokens,
        "completion_ids": ro["completion_ids"],
        "env_mask": ro["env_mask"],
        "logprobs": ro["logprobs"],
        "n_messages": [e.n_messages for e in episodes],
    }
    rows = gather_object([mine])
    if acc.is_main_process:
        out.write_text(json.dumps({"ranks": rows, "stop_id": tokenizer.eos_token_id, "max_new_tokens": 16}))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))

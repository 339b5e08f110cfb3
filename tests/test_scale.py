"""Past one process: two accelerate machines (two launchers, machine ranks 0 and 1) train one run with equal
per-rank state and one writer; FSDP2 episodes run on whole weights; sharding configs that cannot run on CPU are
refused instead of silently training unsharded."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest
import yaml
from accelerate.commands.config.config_args import load_config_from_file

from rods_core.ranks import sharding_refusal
from storage.reader import RunReader
from tests.conftest import smoke_config
from tests.launch_helpers import LAUNCH, RODS, ROOT, equal_digests_per_step, finish, start

ACCELERATE = ROOT / "configs" / "accelerate"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_machines_train_one_run_with_equal_state_and_only_rank_0_writes(tmp_path, tiny_model_dir):
    """docs/scaling.md's two commands, one per machine; each machine has its own runs folder, as two nodes
    without a shared disk would."""
    port, logs, configs = _free_port(), [], []
    for machine in (0, 1):
        node = tmp_path / f"node{machine}"
        cfg = smoke_config(node, tiny_model_dir, **{"method": "uniform_synth", "grpo.max_steps": 2})
        configs.append(node / "run.yaml")
        node.mkdir()
        configs[-1].write_text(yaml.safe_dump(cfg))
        logs.append(node / "train.log")
    procs = [
        start(
            [
                *LAUNCH,
                "--config_file",
                str(ACCELERATE / "two-machines-cpu.yaml"),
                "--machine_rank",
                str(m),
                "--main_process_ip",
                "127.0.0.1",
                "--main_process_port",
                str(port),
                *RODS,
                "train",
                "--config",
                str(configs[m]),
                "--run-id",
                "nodes",
            ],
            logs[m],
        )  # fmt: skip
        for m in (0, 1)
    ]
    codes = [finish(p) for p in procs]
    assert codes == [0, 0], [log.read_text()[-3000:] for log in logs]

    run_dir = tmp_path / "node0" / "runs" / "nodes"
    reader = RunReader(run_dir)
    assert equal_digests_per_step(reader) == [1, 2]
    assert reader.query("select step from step order by step")["step"].tolist() == [1, 2]  # one writer
    # machine 1's run folder holds only what TRL writes per process (its RNG state in each checkpoint)
    other = tmp_path / "node1" / "runs" / "nodes"
    written = [p.relative_to(other).as_posix() for p in other.rglob("*") if p.is_file()] if other.exists() else []
    assert all(re.fullmatch(r"checkpoints/checkpoint-\d+/rng_state_1\.pth", w) for w in written), written
    assert "step 2/2" in logs[0].read_text() and "step 2/2" not in logs[1].read_text()  # rank 0 reports


def test_an_fsdp_launch_on_cpu_is_refused_not_trained_unsharded(tmp_path, tiny_model_dir):
    """configs/accelerate/fsdp.yaml on 2 CPU processes: accelerate would wrap the model in DDP; the run says so
    and creates nothing."""
    config, log = tmp_path / "run.yaml", tmp_path / "train.log"
    config.write_text(yaml.safe_dump(smoke_config(tmp_path, tiny_model_dir)))
    cmd = [*LAUNCH, "--config_file", str(ACCELERATE / "fsdp.yaml"), "--num_processes", "2", "--mixed_precision",
           "no", "--main_process_port", str(_free_port()), *RODS, "train", "--config", str(config), "--run-id", "fs"]  # fmt: skip
    assert finish(start(cmd, log), timeout=300) != 0
    assert "asks for FSDP, but grpo.use_cpu is true" in log.read_text()
    assert not (tmp_path / "runs" / "fs").exists()


def test_fsdp2_episodes_run_on_whole_weights_while_ranks_make_different_calls(tiny_model_dir):
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
         str(_free_port()), str(ROOT / "tests" / "fsdp_worker.py"), str(tiny_model_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    found = re.findall(r"rank (\d) before ([0-9a-f]{16}) after ([0-9a-f]{16})", out.stdout)
    assert sorted(r for r, _, _ in found) == ["0", "1"], out.stdout
    assert len({(b, a) for _, b, a in found}) == 1, found  # the same model on both ranks, before and after
    assert found[0][1] != found[0][2], found  # the sharded step changed it


def test_sharded_accelerate_configs_are_fsdp2_and_zero3_and_refused_on_cpu():
    fsdp = load_config_from_file(str(ACCELERATE / "fsdp.yaml"))
    assert fsdp.distributed_type == "FSDP" and fsdp.fsdp_config["fsdp_version"] == 2 and fsdp.num_processes == 8
    assert fsdp.fsdp_config["fsdp_reshard_after_forward"] is True  # restored by policy.weights.whole_weights
    zero3 = load_config_from_file(str(ACCELERATE / "zero3.yaml"))
    assert zero3.distributed_type == "DEEPSPEED" and zero3.deepspeed_config["zero_stage"] == 3
    nodes = load_config_from_file(str(ACCELERATE / "two-machines-cpu.yaml"))
    assert (nodes.num_machines, nodes.num_processes, nodes.main_process_ip) == (2, 2, "127.0.0.1")
    assert "FSDP" in sharding_refusal({"ACCELERATE_USE_FSDP": "true"}, use_cpu=True)
    assert "DeepSpeed" in sharding_refusal({"ACCELERATE_USE_DEEPSPEED": "true"}, use_cpu=True)
    assert sharding_refusal({"ACCELERATE_USE_FSDP": "true"}, use_cpu=False) is None
    assert sharding_refusal({}, use_cpu=True) is None

"""Past one process: two accelerate machines (two launchers, machine ranks 0 and 1) train one run with equal
per-rank state and one writer; FSDP2 episodes run on whole weights; sharding configs that cannot run on CPU are
refused instead of silently training unsharded."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from accelerate.commands.config.config_args import load_config_from_file

from rods_core.policy.weights import _reshard_setting, _restore_reshard_setting
from rods_core.ranks import launch_refusal
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


def test_fsdp2_accumulates_gradients_in_bf16_under_no_sync_and_in_the_fp32_shards_when_each_batch_syncs():
    """accelerate's bf16 policy (param and reduce dtype bf16) over 2 gloo ranks, 32 micro-batches: under no_sync
    (transformers' default) the first micro-batch's gradient is held unsharded in bf16 and the sum drifts from the
    exact one; syncing each batch (the run's setting under FSDP) holds it sharded in fp32 and sums it exactly."""
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
         str(_free_port()), str(ROOT / "tests" / "fsdp_accumulation_worker.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.split("RESULT ", 1)[1].splitlines()[0])
    no_sync, each = result["no_sync"], result["sync_each_batch"]
    assert (no_sync["unsharded"], no_sync["sharded"]) == ("torch.bfloat16", None)
    assert (each["unsharded"], each["sharded"]) == (None, "torch.float32")
    assert each["error"] < 1e-6 < 1e-3 < no_sync["error"], result


@pytest.mark.parametrize("pass_", ["plain", "shared"])
def test_fsdp2_cannot_back_propagate_the_shared_prompt_pass_which_the_run_therefore_refuses(tiny_model_dir, pass_):
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port",
         str(_free_port()), str(ROOT / "tests" / "fsdp_shared_prompt_worker.py"), str(tiny_model_dir), pass_],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    if pass_ == "plain":
        assert "backward ok" in out.stdout, out.stdout
    else:  # if a torch release lifts this, lift the refusal in rods_core.ranks.launch_refusal
        assert "backward failed: setStorage" in out.stdout and "storage of size 0" in out.stdout, out.stdout
    fsdp = {"ACCELERATE_USE_FSDP": "true"}
    assert "grpo.shared_prompt: false" in launch_refusal(fsdp, use_cpu=False, bf16=True, shared_prompt=True)
    assert launch_refusal(fsdp, use_cpu=False, bf16=True, shared_prompt=False) is None
    assert (
        launch_refusal({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_MIXED_PRECISION": "bf16"}, False, True, True)
        is None
    )


def test_whole_weights_restores_the_reshard_setting_on_torch_releases_with_one_parameter_group_per_state():
    # torch 2.11 (a lent GPU host's) keeps one `_fsdp_param_group` per FSDP state and no automatic-choice flag,
    # where the pinned 2.13 keeps a list (the run above): that release is not installed here, so stand-in states
    # take its layout; on the GPU host the FSDP2 run itself passed (docs/measurements.md)
    group = SimpleNamespace(post_forward_mesh_info="mesh")
    state = SimpleNamespace(_fsdp_param_group=group)
    layer = SimpleNamespace(_get_fsdp_state=lambda: state)
    setting = _reshard_setting(layer)
    group.post_forward_mesh_info = None  # what set_reshard_after_forward(False) does to it
    _restore_reshard_setting(layer, setting)
    assert group.post_forward_mesh_info == "mesh" and not hasattr(state, "_auto_reshard_after_forward")
    root = SimpleNamespace(_get_fsdp_state=lambda: SimpleNamespace(_fsdp_param_group=None))  # no group of its own
    assert _reshard_setting(root) == (None, [])
    _restore_reshard_setting(root, (None, []))


def test_sharded_accelerate_configs_are_fsdp2_and_zero3_and_refused_on_cpu():
    fsdp = load_config_from_file(str(ACCELERATE / "fsdp.yaml"))
    assert fsdp.distributed_type == "FSDP" and fsdp.fsdp_config["fsdp_version"] == 2 and fsdp.num_processes == 8
    assert fsdp.fsdp_config["fsdp_reshard_after_forward"] is True  # restored by policy.weights.whole_weights
    zero3 = load_config_from_file(str(ACCELERATE / "zero3.yaml"))
    assert zero3.distributed_type == "DEEPSPEED" and zero3.deepspeed_config["zero_stage"] == 3
    nodes = load_config_from_file(str(ACCELERATE / "two-machines-cpu.yaml"))
    assert (nodes.num_machines, nodes.num_processes, nodes.main_process_ip) == (2, 2, "127.0.0.1")
    assert "FSDP" in launch_refusal({"ACCELERATE_USE_FSDP": "true"}, use_cpu=True, bf16=False)
    assert "DeepSpeed" in launch_refusal({"ACCELERATE_USE_DEEPSPEED": "true"}, use_cpu=True, bf16=False)
    assert launch_refusal({"ACCELERATE_USE_FSDP": "true"}, use_cpu=False, bf16=False) is None
    assert launch_refusal({}, use_cpu=True, bf16=False) is None


def test_a_deepspeed_launch_whose_mixed_precision_differs_from_grpo_bf16_is_refused_before_the_model_loads():
    # what a lent H200 showed: zero3.yaml (mixed_precision bf16) with grpo.bf16 false got as far as the trainer,
    # where transformers raised "ds bf16.enabled=True vs hf bf16|bf16_full_eval=False"
    ds = {"ACCELERATE_USE_DEEPSPEED": "true"}
    assert "grpo.bf16: true" in launch_refusal({**ds, "ACCELERATE_MIXED_PRECISION": "bf16"}, use_cpu=False, bf16=False)
    assert launch_refusal({**ds, "ACCELERATE_MIXED_PRECISION": "no"}, use_cpu=False, bf16=True) is not None
    assert launch_refusal({**ds, "ACCELERATE_MIXED_PRECISION": "fp16"}, use_cpu=False, bf16=False) is not None
    assert launch_refusal({**ds, "ACCELERATE_MIXED_PRECISION": "bf16"}, use_cpu=False, bf16=True) is None
    assert launch_refusal({**ds, "ACCELERATE_MIXED_PRECISION": "no"}, use_cpu=False, bf16=False) is None
    # DDP and FSDP2 take mixed precision as autocast / a cast policy whatever grpo.bf16 says
    assert launch_refusal({"ACCELERATE_MIXED_PRECISION": "bf16"}, use_cpu=False, bf16=False) is None
    assert launch_refusal({"ACCELERATE_USE_FSDP": "true", "ACCELERATE_MIXED_PRECISION": "bf16"}, False, False) is None

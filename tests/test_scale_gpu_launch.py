"""The GPU launch recipes, checked on CPU without a GPU: docs/scaling.md's server-mode lines (`trl vllm-serve` on
one GPU, `accelerate launch --num_processes 7` training) parsed by TRL's and accelerate's own parsers, the vLLM
command TRL builds from them, the training line's config validated and planned; the two-node FSDP2 config and its
SLURM script shell-checked, each launch line the GPU twin of the two-machine CPU command tests/test_scale.py runs.
None of these commands has run on a GPU."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.commands.launch import launch_command_parser

from rods_core.config import load_config, parse_overrides
from rods_core.memory_plan import parse_size, plan_run

ROOT = Path(__file__).resolve().parent.parent
SCALING = ROOT / "docs" / "scaling.md"
ACCELERATE = ROOT / "configs" / "accelerate"
SLURM = ACCELERATE / "slurm-fsdp-2x8.sh"
QWEN3_4B = ROOT / "tests" / "fixtures" / "qwen3-4b-config"  # the model's config.json only (the plan's input)
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def _commands(text: str) -> list[list[str]]:
    """The shell commands of a script or code block: continuation lines joined, comments and blanks dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [shlex.split(line) for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _section(title: str) -> str:
    """A section of docs/scaling.md, up to the next heading (## or ###; a shell comment has one #)."""
    text = SCALING.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = re.compile(r"\n#{2,6} ").search(text, start + 1)
    return text[start : end.start() if end else len(text)]


def _launch(argv: list[str]):
    """accelerate's own parse of an `accelerate launch` line (leading VAR=value assignments dropped)."""
    while "=" in argv[0]:
        argv = argv[1:]
    assert argv[:2] == ["accelerate", "launch"] or argv[:2] == [".venv/bin/accelerate", "launch"], argv
    return launch_command_parser().parse_args(argv[2:])


def test_server_mode_lines_parse_and_the_training_config_fits():
    section = _section("Server mode: one generation GPU, seven training GPUs")
    serve, train = _commands(BASH_BLOCK.search(section).group(1))
    assert serve[0] == "CUDA_VISIBLE_DEVICES=7" and serve[1:3] == ["trl", "vllm-serve"]
    from trl.scripts.vllm_serve import build_command, make_parser

    (args, extra) = make_parser(prog="trl vllm-serve").parse_args_and_config(serve[3:], return_remaining_strings=True)
    vllm = build_command(args, extra)
    assert vllm[vllm.index("serve") + 1] == "Qwen/Qwen3-4B-Instruct-2507" and "--weight-transfer-config" in vllm
    assert vllm[vllm.index("--logprobs-mode") + 1] == "processed_logprobs"  # what the multi-turn generator reads

    assert train[0] == "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6"
    launch = _launch(train)
    assert launch.num_processes == 7 and Path(launch.config_file) == Path("configs/accelerate/fsdp.yaml")
    assert launch.module and launch.training_script == "rods_lab.cli" and launch.training_script_args[0] == "train"
    rods = launch.training_script_args
    sets = parse_overrides([rods[i + 1] for i, a in enumerate(rods) if a == "--set"])
    cfg = load_config(ROOT / rods[rods.index("--config") + 1], {**sets, "model.path": str(QWEN3_4B)})
    assert cfg.grpo.vllm_mode == "server" and cfg.grpo.vllm_server_url == f"http://127.0.0.1:{args.port}"
    assert args.max_model_len == cfg.episode.max_context_tokens  # every episode's context fits the server
    tasks = 7 * cfg.grpo.tasks_per_step
    assert f"{tasks} tasks x {cfg.grpo.num_generations} rollouts = {tasks * cfg.grpo.num_generations:,}" in section
    assert plan_run(cfg, 7, parse_size("80GB"), "fsdp2").fits  # no vLLM share on the training GPUs


def _two_machine_cpu_lines() -> list[list[str]]:
    block = BASH_BLOCK.search(_section("Two machines")).group(1)
    return [c for c in _commands(block) if c[:2] == ["accelerate", "launch"]]


def _shape(launch) -> tuple:
    """What a launch line asks of accelerate, without the values that differ between machines and hardware."""
    args = launch.training_script_args
    return (launch.module, launch.training_script, args[0], tuple(a for a in args if a.startswith("--")))


def test_the_slurm_script_launches_the_gpu_twin_of_the_tested_two_machine_command():
    cpu = [_launch(c) for c in _two_machine_cpu_lines()]
    assert [c.machine_rank for c in cpu] == [0, 1] and len({_shape(c) for c in cpu}) == 1
    script = SLURM.read_text()
    per_node = re.search(r"srun [^\n]*bash -c '\n(.*?)\n'", script, re.S).group(1)
    # what node 1 expands: its SLURM rank, node 0's address, the script's defaults
    values = dict(re.findall(r"^(\w+)=\$\{\w+:-([^}]+)\}$", script, re.M)) | {
        "SLURM_NODEID": "1",
        "MAIN_IP": "10.0.0.1",
    }
    for name, value in values.items():
        per_node = per_node.replace(f'"${name}"', value)
    gpu = [_launch(c) for c in _commands(per_node)]
    assert len(gpu) == 1  # one line, run once per node by srun with that node's rank
    twin, ref = gpu[0], cpu[0]
    assert _shape(twin) == _shape(ref)
    for flag in ("machine_rank", "main_process_ip", "main_process_port"):  # given per node, as on the CPU
        assert getattr(twin, flag) is not None and getattr(ref, flag) is not None, flag
    assert (twin.machine_rank, twin.main_process_ip, twin.main_process_port) == (1, "10.0.0.1", ref.main_process_port)
    assert twin.training_script_args[twin.training_script_args.index("--config") + 1] == "configs/paper-qwen3-4b.yaml"
    assert Path(twin.config_file) == Path("configs/accelerate/fsdp-2x8.yaml")

    nodes, cpu_cfg = (
        load_config_from_file(str(ACCELERATE / "fsdp-2x8.yaml")),
        load_config_from_file(str(ACCELERATE / "two-machines-cpu.yaml")),
    )
    one_node = load_config_from_file(str(ACCELERATE / "fsdp.yaml"))
    assert (nodes.num_machines, nodes.num_processes) == (2, 16)
    for same in ("num_machines", "rdzv_backend", "same_network", "main_process_port", "use_cpu"):
        assert getattr(nodes, same) == getattr(cpu_cfg, same), same
    assert nodes.distributed_type == one_node.distributed_type == "FSDP"
    assert nodes.fsdp_config == one_node.fsdp_config and nodes.mixed_precision == "bf16"


def test_the_slurm_script_is_valid_shell():
    assert subprocess.run(["bash", "-n", str(SLURM)], capture_output=True, text=True).returncode == 0
    text = SLURM.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --gres=gpu:8" in text and "set -euo pipefail" in text
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian: apt-get install -y shellcheck); bash -n passed")
    check = subprocess.run(["shellcheck", str(SLURM)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout

#!/bin/bash
# The paper's run on two 8-GPU nodes under SLURM: one `accelerate launch` per node (fsdp-2x8.yaml, FSDP2 over 16
# GPUs), node 0 the rendezvous. Each launch line is the GPU twin of docs/scaling.md's two-machine CPU command,
# which tests/test_scale.py runs; this script itself has never run (no GPU here). Submit from the project folder:
#   sbatch configs/accelerate/slurm-fsdp-2x8.sh                  # RODS, or:
#   CONFIG=configs/static.yaml RUN_ID=paper_static sbatch configs/accelerate/slurm-fsdp-2x8.sh
# tasks_per_step is per process: the paper config's 4 x 16 processes = 64 tasks a step (set grpo.tasks_per_step=2
# with --set to keep the paper's 32). Check memory first: rods plan --config FILE --gpus 16 --gpu-memory 80GB
#SBATCH --job-name=rods
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --exclusive
#SBATCH --output=rods-%j.log
set -euo pipefail

CONFIG=${CONFIG:-configs/paper-qwen3-4b.yaml}
RUN_ID=${RUN_ID:-paper_rods}
MAIN_IP=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MAIN_PORT=${MAIN_PORT:-29555}
export CONFIG RUN_ID MAIN_IP MAIN_PORT

# one task per node; SLURM_NODEID (0, 1) is the machine rank. Single quotes: each node expands its own rank.
# shellcheck disable=SC2016
srun --kill-on-bad-exit=1 bash -c '
  .venv/bin/accelerate launch --config_file configs/accelerate/fsdp-2x8.yaml --machine_rank "$SLURM_NODEID" \
    --main_process_ip "$MAIN_IP" --main_process_port "$MAIN_PORT" \
    -m rods_lab.cli train --config "$CONFIG" --run-id "$RUN_ID"
'

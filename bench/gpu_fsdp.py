"""The GPU check's FSDP2 part (`python -m bench.gpu_check --fsdp`): what one GPU shows without vLLM, on a model of
more than 1B parameters built from a config (Qwen3's layout and vocabulary, random weights, nothing downloaded),
wrapped and checkpointed by accelerate's own FSDP2 functions as configs/accelerate/fsdp.yaml sets them, in a
one-process group (NCCL on the GPU, gloo on the CPU):
1. memory: `rods plan`'s rows (rods_core.memory_plan for configs/paper-qwen3-4b.yaml at this model, one GPU,
   fsdp2, no vLLM) beside torch's allocator per phase: the weights after sharding, the training state after an
   optimizer step, one micro-batch's forward and backward (the run's scoring function, TRL's fused LM head, and a
   clipped GRPO objective), AdamW's step, and the whole step's peak;
2. accumulation: the dtype the 1B model's decoder layer holds its gradient in under the run's FSDP setting (each
   micro-batch synced), and bench.fsdp_accumulation's exact comparison with and without syncing each batch;
3. checkpoint: one SHARDED_STATE_DICT checkpoint (accelerate's save_fsdp_model and save_fsdp_optimizer, which
   transformers' Trainer calls): its bytes on disk and save time beside the plan's checkpoint row.
`--smoke` runs the same path on the CPU with a tiny model; torch counts no CPU allocation, so the memory
comparison says it was skipped and why. A wall-clock budget bounds the whole (`--budget-s`).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from bench.fsdp_accumulation import accumulation_check, held
from rods_core import memory_plan
from rods_core.config import load_config
from rods_core.policy.precision import model_init_kwargs

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "configs" / "paper-qwen3-4b.yaml"
FSDP_LAUNCH = ROOT / "configs" / "accelerate" / "fsdp.yaml"
GiB = 1024**3
# Qwen3's layout (GQA, q/k norms, tied embeddings, its 151,936-token vocabulary) at 1.12B parameters, between
# Qwen3-0.6B and 1.7B: the LM head and the per-layer rows weigh against each other as they do at 4B
BILLION = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 8,
           "head_dim": 128, "intermediate_size": 6144, "vocab_size": 151936, "tie_word_embeddings": True}  # fmt: skip
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": True}  # fmt: skip
SMOKE_CONTEXT = 128  # tokens per rollout on the CPU
ACCUMULATE = 2  # micro-batches per optimizer step: the second backward adds to gradients already held
LOOSE = 1.25  # an estimate above the measured by more than this is loose: still a bound, but it refuses runs
CHECKPOINT_TOLERANCE = 0.10  # files beside the plan's row, which counts the tensors' bytes only
CHECKPOINT_SLACK = 2**20  # torch.distributed.checkpoint's .metadata and per-tensor headers (~2 KB a tensor)
# the plan's rows held between steps; its other training-state rows (the gathered bf16 layers and gradients before
# their reduce-scatter) live only while a micro-batch runs
PERSISTENT = ("weights", "gradients", "AdamW moments")
NO_CUDA = "no CUDA device: torch's allocator counters (max_memory_allocated) exist only on a GPU"


# ----- the model and the plan (pure: no GPU) -------------------------------------------------------------------
def write_model_config(folder: Path, size: dict) -> Path:
    """A Qwen3 config.json in `folder` (transformers' Qwen3Config fills what `size` leaves out)."""
    from transformers import Qwen3Config

    Qwen3Config(**size).save_pretrained(folder)
    return folder


def run_config(model: Path, micro_batch: int | None, context: int | None):
    """The paper config at this model, without vLLM; its micro-batch and context unless given."""

    over: dict = {"model.path": str(model), "grpo.use_vllm": False}
    if micro_batch:
        over["grpo.micro_batch"] = micro_batch
    if context:
        over["episode.max_context_tokens"] = context
    return load_config(PAPER, over)


@dataclass(frozen=True)
class Estimate:
    """`rods plan`'s figures for one GPU under fsdp2: the table, and the rows each measured phase is set beside."""

    table: str
    params: int
    weights: int  # the weights row
    state: int  # weights, gradients and AdamW moments
    pass_: int  # one micro-batch's gathered layers and gradients, activations and TRL's LM head
    checkpoint: int
    checkpoint_how: str


def estimate(cfg, memory: int) -> Estimate:
    """The plan `rods plan --gpus 1 --strategy fsdp2` prints for `cfg`, and its rows grouped by phase."""

    shape = memory_plan.read_model_shape(cfg.model.path)
    run = memory_plan.RunShape.from_config(cfg)
    plan = memory_plan.plan(shape, run, 1, memory, "fsdp2")
    rows = memory_plan.training_state(shape, run, 1, "fsdp2")
    state = [x for x in rows if x.name in PERSISTENT]
    pass_rows = [x for x in rows if x.name not in PERSISTENT] + memory_plan.pass_activations(shape, run, "fsdp2")
    size, how = memory_plan.checkpoint_size(shape, run, "fsdp2")
    return Estimate(
        table=memory_plan.render(plan, "1 GPU, fsdp2, no vLLM"),
        params=shape.params,
        weights=next(x.bytes for x in state if x.name == "weights"),
        state=sum(x.bytes for x in state),
        pass_=sum(x.bytes for x in pass_rows),
        checkpoint=size,
        checkpoint_how=how,
    )


def compare(phase: str, estimate_bytes: int, measured: int | None) -> dict:
    """One phase: the estimate beside the measured bytes, their ratio and a verdict (ok: the estimate covers the
    measured within LOOSE; fail: it is under; warn: it is loose)."""
    row = {"phase": phase, "estimate_gib": round(estimate_bytes / GiB, 3)}
    if measured is None:
        return row | {"measured_gib": None, "ratio": None, "verdict": f"skipped: {NO_CUDA}"}
    ratio = estimate_bytes / measured if measured > 0 else math.inf
    if ratio < 1:
        verdict = f"fail: the estimate is {1 - ratio:.0%} under the measured"
    elif ratio > LOOSE:
        verdict = f"warn: the estimate is {ratio:.2f}x the measured (more than {LOOSE}x)"
    else:
        verdict = "ok"
    return row | {"measured_gib": round(measured / GiB, 3), "ratio": round(ratio, 3), "verdict": verdict}


def checkpoint_verdict(measured: int, estimate_bytes: int) -> str:
    """ok when the files on disk are within CHECKPOINT_TOLERANCE of the plan's checkpoint row, plus CHECKPOINT_SLACK
    of metadata (which decides only for a tiny model)."""
    if abs(measured - estimate_bytes) <= CHECKPOINT_TOLERANCE * estimate_bytes + CHECKPOINT_SLACK:
        return "ok"
    return (f"fail: the files are {measured / estimate_bytes:.3f}x the plan's row (tolerance "
            f"{CHECKPOINT_TOLERANCE:.0%} + {CHECKPOINT_SLACK // 2**10} KiB)")  # fmt: skip


def overall(report: dict) -> str:
    """fail if any check failed, else warn if any warned, else ok (skipped checks say so in their own verdict)."""
    verdicts = [c.get("verdict", "") for c in report.values() if isinstance(c, dict)]
    for word in ("fail", "warn"):
        if any(v.startswith(word) for v in verdicts):
            return word
    return "ok"


class Budget:
    """The wall-clock budget of the whole check."""

    def __init__(self, seconds: float):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


# ----- measuring --------------------------------------------------------------------------------------------------
class Meter:
    """torch's CUDA allocator counters above a baseline; None on the CPU, where torch counts nothing."""

    def __init__(self, device):
        import torch

        self.torch, self.cuda = torch, device.type == "cuda"
        self.base = torch.cuda.memory_allocated() if self.cuda else 0

    def now(self) -> int | None:
        return self.torch.cuda.memory_allocated() - self.base if self.cuda else None

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()

    def peak(self) -> int | None:
        return self.torch.cuda.max_memory_allocated() - self.base if self.cuda else None

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()


def _above(peak: int | None, before: int | None) -> int | None:
    return None if peak is None else peak - before


@contextmanager
def one_process_group(device):
    """A default process group of one rank (NCCL on CUDA, gloo on the CPU), unless a launcher made one."""
    import torch
    import torch.distributed as dist

    made = not dist.is_initialized()
    if made:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        if made:
            dist.destroy_process_group()


def fsdp_plugin():
    """accelerate's FSDP plugin as `accelerate launch --config_file configs/accelerate/fsdp.yaml` makes it: the
    launcher hands each fsdp_config key to the process as an FSDP_* variable, which the plugin reads."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import FullyShardedDataParallelPlugin

    launch = load_config_from_file(str(FSDP_LAUNCH))
    env = {
        "FSDP_" + k.removeprefix("fsdp_").upper(): str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in launch.fsdp_config.items()
    }
    with mock.patch.dict(os.environ, env):
        plugin = FullyShardedDataParallelPlugin(mixed_precision_policy=launch.mixed_precision)
    # What accelerate's FSDP2 wrapping and checkpoint writers read of an Accelerator. A real one would not do on
    # the CPU: accelerate turns FSDP on for GPU processes only, so the dry path would not be this path.
    accelerator = SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin), mixed_precision=launch.mixed_precision,
                                  is_main_process=True, process_index=0, num_processes=1)  # fmt: skip
    return plugin, accelerator


def build_model(cfg, device):
    """The policy as a run holds it before accelerate wraps it: built from the config in model.dtype (no weights
    read), gradient checkpointing as grpo.gradient_checkpointing says, TRL's fused LM head added."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    kwargs = model_init_kwargs(cfg.model, cfg.grpo.trainer_args)
    kwargs.pop("trust_remote_code", None)  # a config of a known architecture: no code to trust
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg.model.path), **kwargs)
    if cfg.grpo.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    add_fused_lm_head(model, temperature=cfg.episode.sampling.temperature or 1.0, outputs=("log_probs", "entropy"))
    return model.train()


def trainer_optimizer(model, lr: float):
    """AdamW as transformers' Trainer makes it from GRPOConfig's defaults (adamw_torch_fused from torch 2.8, no
    weight decay), read from the dataclass's fields: making a GRPOConfig would set up devices of its own."""
    import dataclasses

    import torch
    from trl import GRPOConfig

    d = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    betas, fused = (d["adam_beta1"], d["adam_beta2"]), d["optim"] == "adamw_torch_fused"
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=d["adam_epsilon"],
                             weight_decay=d["weight_decay"], fused=fused)  # fmt: skip


def grpo_loss(model, ids, keep: int, epsilon: float):
    """A GRPO micro-batch's loss in the run's shape: the completion's log-probs (and entropies, as TRL computes
    them) scored by the run's function through TRL's fused LM head, and the clipped token-level objective."""
    import torch

    from rods_core.trainer import masked_position_logps

    logps, _ = masked_position_logps(model, ids, torch.ones_like(ids), keep, compute_entropy=True)
    advantages = torch.linspace(-1, 1, ids.size(0), device=ids.device)[:, None]
    ratio = torch.exp(logps - logps.detach())
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
    return -torch.min(ratio * advantages, clipped * advantages).mean()


def train_steps(model, optimizer, cfg, meter: Meter, steps: int, stop_at: float, budget: Budget) -> dict:
    """`steps` optimizer steps of ACCUMULATE micro-batches, each synced (the run's FSDP setting): the training
    state after each step, the largest forward/backward and AdamW step above what was held before them, the
    first micro-batch's gradient dtype, and the step's peak. Stops early once the budget falls to `stop_at`."""
    import torch

    micro, context = cfg.grpo.micro_batch, cfg.episode.max_context_tokens
    keep, vocab = context - context // 8, model.config.vocab_size  # a prompt of 1/8, the rest model tokens
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(0)
    out: dict = {"steps": [], "pass": None, "optimizer": None, "peak": None, "state": None, "held": None}
    meter.reset_peak()
    for step in range(steps):
        t0 = time.perf_counter()
        for _ in range(ACCUMULATE):
            ids = torch.randint(0, vocab, (micro, context), generator=gen).to(device)
            before = meter.now()
            meter.reset_peak()
            model.set_requires_gradient_sync(True)
            (grpo_loss(model, ids, keep, cfg.grpo.epsilon) / ACCUMULATE).backward()
            out["pass"] = _larger(out["pass"], _above(meter.peak(), before))
            out["held"] = out["held"] or held(model.model.layers[0])
            out["peak"] = _larger(out["peak"], meter.peak())
        before = meter.now()
        meter.reset_peak()
        optimizer.step()
        meter.sync()
        out["optimizer"] = _larger(out["optimizer"], _above(meter.peak(), before))
        out["peak"], out["state"] = _larger(out["peak"], meter.peak()), meter.now()
        optimizer.zero_grad(set_to_none=True)
        out["steps"].append({"step": step + 1, "seconds": round(time.perf_counter() - t0, 2)})
        if budget.left() < stop_at:
            break
    return out


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


# ----- the three checks -------------------------------------------------------------------------------------------
def memory_check(est: Estimate, weights: int | None, run: dict) -> dict:
    """Each phase's estimate beside its measure; the check's verdict is the whole step's."""
    phases = [
        compare("weights after sharding", est.weights, weights),
        compare("training state after an optimizer step", est.state, run["state"]),
        compare("one micro-batch's forward and backward, above the state", est.pass_, run["pass"]),
        compare("the step's peak (the plan's total without its runtime row)", est.state + est.pass_, run["peak"]),
    ]
    optimizer = run["optimizer"]
    return {
        "phases": phases,
        "optimizer_step_gib": None if optimizer is None else round(optimizer / GiB, 3),
        "optimizer_step_note": "AdamW's step above the state: the plan counts none",
        "steps": run["steps"],
        "verdict": phases[-1]["verdict"],
    }


def checkpoint_check(model, optimizer, plugin, accelerator, est: Estimate, meter: Meter, folder: Path) -> dict:
    """One checkpoint as transformers' Trainer writes it under FSDP (accelerate's save_fsdp_model and
    save_fsdp_optimizer; SHARDED_STATE_DICT: torch.distributed.checkpoint files): bytes per part, save time."""
    from accelerate import PartialState
    from accelerate.utils.fsdp_utils import save_fsdp_model, save_fsdp_optimizer

    PartialState()  # accelerate's logging refuses to log before its state exists
    meter.sync()
    t0 = time.perf_counter()
    save_fsdp_model(plugin, accelerator, model, str(folder))
    save_fsdp_optimizer(plugin, accelerator, optimizer, model, str(folder))
    meter.sync()
    seconds = time.perf_counter() - t0
    parts = {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in sorted(folder.iterdir())}
    total = sum(parts.values())
    return {
        "state_dict_type": str(plugin.state_dict_type),
        "parts_gib": {k: round(v / GiB, 4) for k, v in parts.items()},
        "files_gib": round(total / GiB, 4),
        "estimate_gib": round(est.checkpoint / GiB, 4),
        "estimate_how": est.checkpoint_how,
        "ratio": round(total / est.checkpoint, 4),
        "save_s": round(seconds, 2),
        "gib_per_s": round(total / GiB / max(seconds, 1e-9), 2),
        "verdict": checkpoint_verdict(total, est.checkpoint),
    }


def accumulation_report(on_model: dict, device) -> dict:
    """The first decoder layer's gradient under the run's setting (each micro-batch synced), and the MLP's exact
    comparison of both ways: ok when syncing each batch holds the gradient sharded in fp32 and sums it to fp32
    rounding."""

    ways = accumulation_check(device)
    each = ways["sync_each_batch"]
    fp32 = on_model in (None, {"unsharded": None, "sharded": "torch.float32"})  # None: the model did not train
    fp32 = fp32 and (each["unsharded"], each["sharded"]) == (None, "torch.float32") and each["error"] < 1e-5
    verdict = "ok" if fp32 else "fail: syncing each micro-batch does not accumulate in the fp32 shards"
    return {"decoder_layer": on_model, "mlp": ways, "verdict": verdict}


def run_checks(a) -> dict:
    """The three checks on one device (CUDA, or the CPU with --smoke) within a.budget_s seconds."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers loads: the model is built from a config
    import torch

    gpu = not a.smoke
    if gpu and not torch.cuda.is_available():
        raise SystemExit("gpu_check --fsdp: no CUDA GPU visible (run with --smoke for the CPU path)")
    device = torch.device("cuda", 0) if gpu else torch.device("cpu")
    budget, t0 = Budget(a.budget_s), time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rods-gpu-fsdp-"))
    report: dict = {"device": torch.cuda.get_device_name(device) if gpu else "cpu (smoke)", "torch": torch.__version__}
    try:
        context = a.context or (None if gpu else SMOKE_CONTEXT)
        cfg = run_config(write_model_config(work / "model", BILLION if gpu else TINY), a.micro_batch, context)
        memory = torch.cuda.get_device_properties(device).total_memory if gpu else 80 * GiB
        est = estimate(cfg, memory)
        print(est.table, file=sys.stderr)
        report["plan"] = {"config": str(PAPER.relative_to(ROOT)), "micro_batch": cfg.grpo.micro_batch,
                          "context": cfg.episode.max_context_tokens, "gpus": 1, "strategy": "fsdp2",
                          "table": est.table.splitlines()}  # fmt: skip
        with one_process_group(device):
            report |= _checks(cfg, est, device, a.steps, budget, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["verdict"] = overall(report)
    report["total_s"] = round(time.perf_counter() - t0, 1)
    return report


def _checks(cfg, est: Estimate, device, steps: int, budget: Budget, work: Path) -> dict:
    """The checks in order. An exception fails its own check (its type, message and last frames) and skips only
    the check that needs its result, so one GPU session still reports the rest."""
    meter, out = Meter(device), {}
    model = optimizer = None
    run: dict = {"held": None}
    try:
        model, optimizer, plugin, accelerator, out["model"] = _sharded_model(cfg, est, device, meter)
        weights = meter.now()
        # two fifths of the budget stay for the checkpoint and the accumulation comparison
        run = train_steps(model, optimizer, cfg, meter, steps, 0.4 * budget.seconds, budget)
        out["memory"] = memory_check(est, weights, run)
    except Exception as e:
        out["memory"], model = failed(e), None
    if model is None:
        out["checkpoint"] = {"verdict": "skipped: the model did not train (the memory check says why)"}
    elif budget.left() <= 0:
        out["checkpoint"] = {"verdict": "skipped: --budget-s spent"}
    else:
        folder = work / "checkpoint"
        out["checkpoint"] = guarded(checkpoint_check, model, optimizer, plugin, accelerator, est, meter, folder)
    del model, optimizer
    if budget.left() > 0:
        out["accumulation"] = guarded(accumulation_report, run["held"], device)
    else:
        out["accumulation"] = {"decoder_layer": run["held"], "verdict": "skipped: --budget-s spent"}
    return out


def _sharded_model(cfg, est: Estimate, device, meter: Meter) -> tuple:
    """The model built, wrapped by accelerate's FSDP2 and given the trainer's optimizer; facts for the report."""
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model

    t0 = time.perf_counter()
    model = build_model(cfg, device)
    params = sum(p.numel() for p in model.parameters())  # a tied head is one parameter
    plugin, accelerator = fsdp_plugin()
    model = fsdp2_prepare_model(accelerator, model)
    meter.sync()
    facts = {"params": params, "plan_params": est.params, "built_and_sharded_s": round(time.perf_counter() - t0, 1),
             "dtype": str(next(model.parameters()).dtype)}  # fmt: skip
    return model, trainer_optimizer(model, cfg.grpo.learning_rate), plugin, accelerator, facts


def failed(e: BaseException) -> dict:
    import traceback

    frames = traceback.format_exception(e)[-6:]
    return {"verdict": f"fail: {type(e).__name__}: {str(e)[:300]}", "traceback": "".join(frames)[-2000:]}


def guarded(check, *args) -> dict:
    try:
        return check(*args)
    except Exception as e:
        return failed(e)

"""A pre-flight estimate of one GPU's memory for a training run, from the model's own config.json and the run
config: it refuses a run that cannot fit, naming the setting to change, before any model is loaded.

Pure arithmetic, every row following what the engines allocate (docs/scaling.md says what each counts and leaves out):
- training state: weights and AdamW's two moments in the weights' dtype (model.dtype; ZeRO-3 keeps bf16 weights
  beside fp32 masters and moments), gradients as each engine holds them (FSDP2 syncing each micro-batch: fp32
  shards, plus the unsharded bf16 gradients of the layers being reduced; ZeRO-3: bf16 partitions; DDP: whole, plus
  its all-reduce buckets), sharded over the GPUs under FSDP2 and ZeRO-3; with LoRA only the adapter trains;
- one micro-batch's activations (grpo.micro_batch rollouts padded to episode.max_context_tokens) in the compute
  dtype (bf16 under FSDP2's and ZeRO-3's bf16 parameters; under DDP's autocast the residual stream keeps the fp32
  weights' dtype): what a decoder layer keeps for its backward, or each layer's input under gradient
  checkpointing plus one layer recomputed; and TRL's tiled LM head (trl/kernels/chunked_logprob.py: 4,096-token x
  32,768-vocabulary tiles and fp32 gradient accumulators, never the whole logits);
- the colocated vLLM engine's share (trainer_args.vllm_gpu_memory_utilization of the GPU, TRL's default 0.3):
  bf16 weights, a workspace, and the KV cache left for the step's episodes;
- without vLLM, the evaluation batch's KV cache (eval.max_batch episodes) and, when sharded, the whole weights
  gathered to generate;
- on disk, one checkpoint as the engine writes it (weights, optimizer state) times the checkpoints kept.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rods_core.config.inputs import DoorError, json_value, read_text
from rods_core.policy.model_folders import model_folder

Strategy = Literal["ddp", "fsdp2", "zero3"]
STRATEGIES: tuple[str, ...] = ("ddp", "fsdp2", "zero3")
GiB = 1024**3
TRL_VLLM_UTILIZATION = 0.3  # GRPOConfig.vllm_gpu_memory_utilization's default
RUNTIME_BYTES = 2 * GiB  # CUDA context, NCCL buffers, allocator slack: a rule of thumb, not a measurement
VLLM_WORKSPACE_BYTES = 2 * GiB  # vLLM's activations for its 4,096-token batches and CUDA graphs (rule of thumb)
TILE_TOKENS, TILE_VOCAB = 4096, 32768  # TRL's fused LM head tiles (TOKEN_CHUNK_SIZE, _CHUNKED_LOGPROB_CHUNK_SIZE)
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(GiB|GB|G|MiB|MB|M)?\s*", re.IGNORECASE)
# GPU memory is labelled in binary units ("80GB" cards hold 80 GiB), so GB reads as GiB here
_UNITS = {"gib": GiB, "g": GiB, "gb": GiB, "mib": 1024**2, "mb": 1024**2, "m": 1024**2}


class PlanError(DoorError):
    """The plan's inputs cannot be read (a model config without the sizes, a bad memory size)."""


def parse_size(text: str, field: str = "--gpu-memory") -> int:
    """'80GB', '80GiB', '80G' or a bare 80 -> 80 x 2^30 bytes (as GPUs are labelled); PlanError naming the field."""
    m = _SIZE.fullmatch(str(text))
    if not m or float(m.group(1)) <= 0:
        raise PlanError(f"{field}: {str(text)[:40]!r}: expected a size such as 80GB or 80GiB")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "GiB").lower()])


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's sizes (Llama / Qwen layout: GQA attention, a gated MLP, RMSNorm)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool
    qkv_bias: bool = False
    qk_norm: bool = False

    @classmethod
    def from_config(cls, doc: dict, source: str = "config.json") -> ModelShape:
        """From a transformers config.json (a multimodal model's text_config when it has one)."""
        doc = doc.get("text_config") or doc
        need = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
        missing = [k for k in need if not isinstance(doc.get(k), int)]
        if missing:
            raise PlanError(f"{source}: {', '.join(missing)}: missing (not a decoder-only transformer's config)")
        heads, model_type = doc["num_attention_heads"], str(doc.get("model_type", ""))
        return cls(
            hidden=doc["hidden_size"],
            layers=doc["num_hidden_layers"],
            heads=heads,
            kv_heads=doc.get("num_key_value_heads") or heads,
            head_dim=doc.get("head_dim") or doc["hidden_size"] // heads,
            ffn=doc["intermediate_size"],
            vocab=doc["vocab_size"],
            tied=bool(doc.get("tie_word_embeddings", False)),
            qkv_bias=bool(doc.get("attention_bias", model_type == "qwen2")),
            qk_norm=model_type.startswith("qwen3"),
        )

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer of one decoder layer, by its module name."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h, f = self.hidden, self.ffn
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, f),
            "up_proj": (h, f),
            "down_proj": (f, h),
        }

    @property
    def layer_params(self) -> int:
        weights = sum(i * o for i, o in self.linear_shapes().values())
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        norms = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        return weights + bias + norms

    @property
    def params(self) -> int:
        embed = self.vocab * self.hidden
        return embed * (1 if self.tied else 2) + self.layers * self.layer_params + self.hidden

    def lora_params(self, r: int, targets: list[str] | str) -> int:
        """A LoRA adapter's parameters: r x (in + out) for each adapted linear layer of every decoder layer."""
        names = LORA_MODULES if targets == "all-linear" else [t for t in targets if t in LORA_MODULES]
        shapes = self.linear_shapes()
        return self.layers * sum(r * sum(shapes[n]) for n in names)

    def kv_bytes_per_token(self, nbytes: int = 2) -> int:
        """Keys and values of one token in every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * nbytes

    @property
    def layer_activations_per_token(self) -> int:
        """Elements one decoder layer keeps for its backward per token: the two norms' inputs and outputs, the
        attention's q, k, v and output (a fused kernel: no seq x seq scores), and the MLP's gate, up, activation
        and product."""
        return 4 * self.hidden + 2 * self.heads * self.head_dim + 2 * self.kv_heads * self.head_dim + 4 * self.ffn


@dataclass(frozen=True)
class RunShape:
    """The settings of a run the estimate reads (rods_core.config.RunConfig, flattened by from_config)."""

    batch: int  # rollouts per process and step: tasks_per_step x num_generations
    micro_batch: int  # rollouts per forward/backward
    context: int  # episode.max_context_tokens: every pass is padded to it at worst
    checkpointing: bool
    bf16: bool
    dtype: str  # model.dtype
    use_vllm: bool
    colocate: bool
    vllm_utilization: float
    eval_batch: int
    lora_r: int | None = None
    lora_targets: list[str] | str = "all-linear"
    kept: int = 2  # grpo.save_total_limit: checkpoints kept on disk

    @classmethod
    def from_config(cls, cfg) -> RunShape:
        g = cfg.grpo
        batch = g.tasks_per_step * g.num_generations
        lora = cfg.model.lora
        return cls(
            batch=batch,
            micro_batch=g.micro_batch or batch,
            context=cfg.episode.max_context_tokens,
            checkpointing=g.gradient_checkpointing,
            bf16=g.bf16,
            dtype=cfg.model.dtype,
            use_vllm=g.use_vllm,
            colocate=g.vllm_mode == "colocate",
            vllm_utilization=float(g.trainer_args.get("vllm_gpu_memory_utilization", TRL_VLLM_UTILIZATION)),
            eval_batch=cfg.eval.max_batch,
            lora_r=lora.r if lora else None,
            lora_targets=lora.target_modules if lora else "all-linear",
            kept=g.save_total_limit,
        )

    @property
    def weight_bytes(self) -> int:
        """The weights' element size: fp32 masters for float32, else 2 (auto: a bf16 checkpoint, as Qwen's)."""
        return 4 if self.dtype == "float32" else 2

    @property
    def compute_bytes(self) -> int:
        """Activations' element size: bf16 under autocast or bf16/fp16 weights, else fp32."""
        return 2 if self.bf16 or self.weight_bytes == 2 else 4

    def stream_bytes(self, strategy: Strategy) -> int:
        """The residual stream's element size (a checkpointed layer's input): FSDP2 and ZeRO-3 run bf16 parameters
        under bf16, so the embedding's output and every residual sum are bf16; under DDP's autocast the embedding
        keeps the weights' dtype and each residual sum is promoted to it."""
        return 2 if strategy != "ddp" and self.bf16 else self.weight_bytes


@dataclass(frozen=True)
class Line:
    """One row of the table: what, bytes per GPU, how it was counted."""

    name: str
    bytes: int
    how: str


@dataclass(frozen=True)
class Plan:
    lines: list[Line]  # persistent rows, then the transient peak's rows
    total: int
    memory: int
    kv_tokens: int | None  # tokens the colocated vLLM's KV cache holds (None: no colocated vLLM)
    episodes: int  # rollouts per GPU and step
    context: int
    refusals: list[str]
    notes: list[str]
    checkpoint: int = 0  # bytes of one checkpoint on disk, all ranks' files together
    kept: int = 2

    @property
    def fits(self) -> bool:
        return not self.refusals


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


# ----- the estimate ------------------------------------------------------------------------------------------
def training_state(model: ModelShape, run: RunShape, gpus: int, strategy: Strategy) -> list[Line]:
    """Weights, gradients and optimizer state on one GPU, and the unsharded layers a sharded pass gathers."""
    shard = 1 if strategy == "ddp" else gpus
    where = "whole on every GPU (DDP)" if strategy == "ddp" else f"sharded over {gpus} GPU(s) ({strategy})"
    p = model.params
    root = model.vocab * model.hidden * (1 if model.tied else 2)  # embeddings and LM head
    b = 2 if run.bf16 else run.weight_bytes  # a gathered (compute) parameter's element size
    if run.lora_r:
        a = model.lora_params(run.lora_r, run.lora_targets)
        lines = [
            Line("frozen weights", p * run.weight_bytes // shard, f"{p:,} x {run.weight_bytes} B, {where}"),
            Line("LoRA adapter + grads + AdamW", a * 16 // shard, f"{a:,} trainable x 16 B (fp32), {where}"),
        ]
    elif strategy == "zero3":
        lines = [
            Line("weights", p * b // shard, f"{p:,} x {b} B, {where}"),
            Line("gradients", p * b // shard, f"{p:,} x {b} B partitions ({where}): DeepSpeed accumulates in the "
                 "weights' dtype unless data_types.grad_accum_dtype says fp32"),
            Line("AdamW + fp32 masters", p * (16 - 2 * b) // shard, f"{p:,} x {16 - 2 * b} B, {where}"),
        ]  # fmt: skip
    else:
        w = run.weight_bytes
        lines = [
            Line("weights", p * w // shard, f"{p:,} x {w} B (model.dtype {run.dtype}), {where}"),
            Line("gradients", p * w // shard, f"{p:,} x {w} B, {where}"
                 + (", each micro-batch reduce-scattered into them" if strategy != "ddp" else "")),
            Line("AdamW moments", 2 * p * w // shard, f"{p:,} x 2 x {w} B, {where}"),
        ]  # fmt: skip
        if strategy == "ddp" and gpus > 1:
            lines.append(Line("DDP gradient buckets", p * w, f"{p:,} x {w} B: the all-reduce's copy of the gradients"))
    if strategy != "ddp":  # on one GPU too: bf16 compute parameters are copies of the fp32 shards
        n = 2 * model.layer_params + root
        lines.append(Line("gathered layers", n * b, f"2 decoder layers + embeddings unsharded, {n:,} x {b} B"))
        if not run.lora_r:
            g = model.layer_params + root
            lines.append(Line("gradients before reduce-scatter", g * b, f"1 decoder layer + embeddings, {g:,} x {b} B"))
    return lines


def pass_activations(model: ModelShape, run: RunShape, strategy: Strategy = "ddp") -> list[Line]:
    """One micro-batch's forward/backward: activations kept for the backward, and TRL's tiled LM head."""
    tokens = run.micro_batch * run.context
    c = run.compute_bytes
    per_layer = tokens * model.layer_activations_per_token * c
    of = f"{run.micro_batch} rollout(s) x {run.context:,} tokens"
    if run.checkpointing:
        r = run.stream_bytes(strategy)
        kept = model.layers * tokens * model.hidden * r
        acts = Line("activations (checkpointed)", kept + per_layer,
                    f"{of}: each layer's input ({r} B) + 1 layer recomputed ({c} B)")  # fmt: skip
    else:
        acts = Line(
            "activations", model.layers * per_layer, f"{of} x {model.layers} layers x {c} B, nothing recomputed"
        )
    return [acts, lm_head(model, run, strategy, tokens)]


def lm_head(model: ModelShape, run: RunShape, strategy: Strategy, tokens: int) -> Line:
    """TRL's fused LM head in the backward (trl/kernels/chunked_logprob.py, the larger pass): one logits tile in the
    compute dtype, fp32 accumulators for the hidden states' and the head's gradients, the head's gradient cast to
    the head's dtype, and the final hidden states it keeps."""
    c = run.compute_bytes
    head = model.vocab * model.hidden
    head_b = 2 if strategy != "ddp" and run.bf16 else run.weight_bytes
    tile = min(tokens, TILE_TOKENS) * min(model.vocab, TILE_VOCAB) * c
    hidden = tokens * model.hidden * (4 + c)
    total = tile + hidden + head * (4 + head_b)
    how = (f"a {min(tokens, TILE_TOKENS):,} x {min(model.vocab, TILE_VOCAB):,} tile x {c} B, hidden states + their "
           f"fp32 gradient, the head's gradient {head:,} x (4 + {head_b}) B")  # fmt: skip
    return Line("LM head (TRL's tiled log-probs)", total, how)


def checkpoint_size(model: ModelShape, run: RunShape, strategy: Strategy) -> tuple[int, str]:
    """(bytes, what) of one checkpoint on disk as each engine writes it: FSDP2 (SHARDED_STATE_DICT, as
    configs/accelerate/fsdp.yaml sets it) the fp32 weights (a tied LM head twice) and AdamW's moments, each rank its
    shard; ZeRO-3 its bf16 partitions, fp32 masters and moments, and the 16-bit model it consolidates for
    from_pretrained; DDP and one GPU the model file and the optimizer; LoRA the adapter and its optimizer only."""
    p, w = model.params, run.weight_bytes
    if run.lora_r:
        a = model.lora_params(run.lora_r, run.lora_targets)
        return a * 12, f"the adapter {a:,} x 4 B + its AdamW state"
    if strategy == "zero3":
        return p * 16, f"{p:,} x (2 bf16 + 12 fp32 masters and moments + 2 for the 16-bit model file) B"
    if strategy == "fsdp2":
        # torch.distributed.checkpoint writes every state-dict key, so a tied LM head is written a second time
        tied = model.vocab * model.hidden * w if model.tied else 0
        head = f" + the tied LM head again {model.vocab * model.hidden:,} x {w} B" if tied else ""
        return p * 3 * w + tied, f"{p:,} x {w} B weights + 2 x {w} B AdamW moments{head}, sharded files"
    return p * 3 * w, f"{p:,} x {w} B model file + 2 x {w} B AdamW moments"


def evaluation(model: ModelShape, run: RunShape, gpus: int, strategy: Strategy) -> list[Line]:
    """Generation with transformers (no vLLM): the evaluation batch's KV cache and, when sharded, whole weights."""
    kv = run.eval_batch * run.context * model.kv_bytes_per_token(run.compute_bytes)
    lines = [Line("eval KV cache", kv, f"eval.max_batch {run.eval_batch} x {run.context:,} tokens (transformers)")]
    if strategy != "ddp" and gpus > 1:
        b = 2 if run.bf16 else run.weight_bytes
        whole = model.params * b * (gpus - 1) // gpus
        lines.append(Line("whole weights to generate", whole, f"the other {gpus - 1} shards gathered, x {b} B"))
    return lines


def _estimate(
    model: ModelShape, run: RunShape, gpus: int, memory: int, strategy: Strategy
) -> tuple[list[Line], int, int | None, int]:
    """(rows, total bytes per GPU, tokens the colocated vLLM's KV cache holds or None, bytes of vLLM's share).
    The persistent rows add up; the training pass and the evaluation never run at once: the larger counts."""
    lines = [*training_state(model, run, gpus, strategy), Line("runtime", RUNTIME_BYTES, "CUDA context, NCCL, slack")]
    kv_tokens, reserve = None, 0
    if run.use_vllm and run.colocate:
        reserve = int(run.vllm_utilization * memory)
        kv = reserve - model.params * 2 - VLLM_WORKSPACE_BYTES
        kv_tokens = max(0, kv) // model.kv_bytes_per_token(2)
        lines.append(
            Line("vLLM (colocated)", reserve, f"vllm_gpu_memory_utilization {run.vllm_utilization:g} of the GPU: "
                 f"bf16 weights {_gib(model.params * 2)}, KV cache {_gib(max(0, kv))}")
        )  # fmt: skip
    persistent = sum(x.bytes for x in lines)
    train = pass_activations(model, run, strategy)
    peaks = [train]
    if not run.use_vllm:
        peaks.append(evaluation(model, run, gpus, strategy))
    peak = max(peaks, key=lambda rows: sum(x.bytes for x in rows))
    for rows in peaks:
        lines += [dataclasses.replace(x, name=x.name + ("" if rows is peak else " (not at the peak)")) for x in rows]
    return lines, persistent + sum(x.bytes for x in peak), kv_tokens, reserve


def plan(model: ModelShape, run: RunShape, gpus: int, memory: int, strategy: Strategy = "fsdp2") -> Plan:
    """The estimate for one GPU of `gpus`, each with `memory` bytes, and why the run cannot start (refusals,
    each naming the settings that would make it fit), or nothing to refuse."""
    lines, total, kv_tokens, reserve = _estimate(model, run, gpus, memory, strategy)
    refusals, notes = [], []
    if total > memory:
        refusals.append(
            f"needs about {_gib(total)} of {_gib(memory)} per GPU; {_fixes(model, run, gpus, memory, strategy)}"
        )
    if kv_tokens is not None:
        room = math.floor((memory - (total - reserve)) / memory * 100) / 100
        if room > run.vllm_utilization:
            notes.append(f"vLLM's share could grow to vllm_gpu_memory_utilization {room:g} (nothing left over)")
        if kv_tokens < run.context:
            need = _utilization_for(model, run.context, memory)
            refusals.append(
                f"vLLM's KV cache holds {kv_tokens:,} tokens, less than one episode (episode.max_context_tokens "
                f"{run.context:,}), and vLLM will not start: raise grpo.trainer_args.vllm_gpu_memory_utilization "
                f"to {need:g} or more"
            )
        else:
            notes.append(
                f"vLLM's KV cache holds {kv_tokens / run.context:.1f} episodes at full context of the step's "
                f"{run.batch} per GPU; the rest wait their turn (vLLM schedules them as cache frees)"
            )
    size, what = checkpoint_size(model, run, strategy)
    notes.append(f"a checkpoint on disk: {_gib(size)} ({what}); x {run.kept} kept (grpo.save_total_limit) = "
                 f"{_gib(size * run.kept)} per run")  # fmt: skip
    return Plan(lines, total, memory, kv_tokens, run.batch, run.context, refusals, notes, size, run.kept)


def _utilization_for(model: ModelShape, tokens: int, memory: int) -> float:
    need = model.params * 2 + VLLM_WORKSPACE_BYTES + tokens * model.kv_bytes_per_token(2)
    return math.ceil(need / memory * 100) / 100


def _fits(model, run, gpus, memory, strategy) -> bool:
    return _estimate(model, run, gpus, memory, strategy)[1] <= memory


def _fixes(model: ModelShape, run: RunShape, gpus: int, memory: int, strategy: Strategy) -> str:
    """The changes, in order, that make the run fit: gradient checkpointing, a smaller micro-batch, a smaller
    evaluation batch, a smaller vLLM share; or what is left when none of them is enough."""
    steps: list[str] = []
    if not run.checkpointing:
        run = dataclasses.replace(run, checkpointing=True)
        steps.append("set grpo.gradient_checkpointing: true")
    if not _fits(model, run, gpus, memory, strategy):
        for m in sorted((d for d in range(1, run.micro_batch) if run.batch % d == 0), reverse=True):
            if _fits(model, dataclasses.replace(run, micro_batch=m), gpus, memory, strategy) or m == 1:
                steps.append(f"lower grpo.micro_batch from {run.micro_batch} to {m}")
                run = dataclasses.replace(run, micro_batch=m)
                break
    if not run.use_vllm and not _fits(model, run, gpus, memory, strategy):
        b = run.eval_batch
        while b > 1 and not _fits(model, dataclasses.replace(run, eval_batch=b), gpus, memory, strategy):
            b //= 2
        if b < run.eval_batch:
            steps.append(f"lower eval.max_batch from {run.eval_batch} to {b}")
            run = dataclasses.replace(run, eval_batch=b)
    if run.use_vllm and run.colocate and not _fits(model, run, gpus, memory, strategy):
        floor = _utilization_for(model, run.context, memory)
        u = run.vllm_utilization
        while u - 0.05 >= floor and not _fits(
            model, dataclasses.replace(run, vllm_utilization=u), gpus, memory, strategy
        ):
            u = round(u - 0.05, 2)
        if u < run.vllm_utilization:
            steps.append(f"lower grpo.trainer_args.vllm_gpu_memory_utilization from {run.vllm_utilization:g} to {u:g}")
            run = dataclasses.replace(run, vllm_utilization=u)
    if _fits(model, run, gpus, memory, strategy):
        return "to fit: " + ", then ".join(steps)
    tried = f" (even after: {', '.join(steps)})" if steps else ""
    return (
        f"no micro-batch, checkpointing, evaluation batch or vLLM share fits{tried}: shorten "
        "episode.max_context_tokens, shard the state (--strategy fsdp2 or zero3; configs/accelerate/fsdp.yaml), "
        "train a LoRA adapter (model.lora) or use more or larger GPUs"
    )


def render(p: Plan, title: str, refusals: bool = True) -> str:
    """The plan as a text table: each row's GiB and how it was counted, the total against the GPU's memory, the
    notes, and the refusals (unless the caller reports them itself)."""
    width = max(len(x.name) for x in p.lines)
    out = [title, f"{'':{width}}  {'GiB':>7}  counted as"]
    out += [f"{x.name:{width}}  {x.bytes / GiB:7.1f}  {x.how}" for x in p.lines]
    out.append(f"{'total (peak)':{width}}  {p.total / GiB:7.1f}  of {p.memory / GiB:.1f} GiB per GPU")
    out += [f"note: {n}" for n in p.notes]
    out += [f"refused: {r}" for r in p.refusals] if refusals else []
    if p.fits:
        out.append("fits (an estimate: docs/scaling.md says what it leaves out)")
    return "\n".join(out)


def strategy_from_env(environ) -> Strategy:
    """The sharding accelerate's launcher set up: FSDP -> fsdp2, DeepSpeed ZeRO-3 -> zero3, else ddp (ZeRO-1/2
    shard less than ZeRO-3: counted as DDP, an overestimate)."""
    if str(environ.get("ACCELERATE_USE_FSDP", "")).lower() == "true":
        return "fsdp2"
    if str(environ.get("ACCELERATE_USE_DEEPSPEED", "")).lower() == "true":
        return "zero3" if str(environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")) == "3" else "ddp"
    return "ddp"


def read_model_shape(path: str | Path, field: str = "model.path") -> ModelShape:
    """The sizes in a model's config.json: a local folder, or a hub id's snapshot in the local Hugging Face
    cache (never downloaded; a missing one is a DoorError saying how to fetch it)."""
    source = model_folder(path, field=field) / "config.json"
    try:
        doc = json_value(read_text(source, "model config"))
    except DoorError as e:
        raise PlanError(f"{field}: {e}") from None
    if not isinstance(doc, dict):
        raise PlanError(f"{field}: {source}: must be a JSON object")
    return ModelShape.from_config(doc, str(source))


def plan_run(cfg, gpus: int, memory: int, strategy: Strategy) -> Plan:
    """The plan for a RunConfig: its model's config.json and its settings."""
    return plan(read_model_shape(cfg.model.path), RunShape.from_config(cfg), gpus, memory, strategy)

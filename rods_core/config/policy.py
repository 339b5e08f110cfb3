"""The policy's sections of the run config: how episodes are played and sampled (`episode:`), the chat format,
and the tiny model and its SFT warm start (`model.tiny`, `model.sft`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SamplingConfig(BaseModel):
    """How one assistant message is sampled."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(1.0, ge=0.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    max_new_tokens: int = Field(192, ge=1, description="tokens per assistant message")


class PromptConfig(BaseModel):
    """How tasks are shown to a policy; stored in a model's rods_model.json so every stage agrees."""

    model_config = ConfigDict(extra="forbid")
    docs_mode: Literal["compact", "json"] = Field(
        "compact",
        description="how functions that arrive mid-episode (miss_func) are listed in the user note: compact "
        "`f(a, b?)` as the tiny template shows tools, or json (one tool schema per line, as Qwen-style "
        "templates show them); the turn-0 tools always reach the chat template as `tools=`",
    )
    result_chars: int | None = Field(
        120, ge=8, description="cut each tool result to this many characters (None keeps it whole)"
    )
    system_prompt: str = Field(
        "You are a tool-use agent. After the tool results, answer briefly.",
        description="the system message (the tools are added by the chat template); empty = no system message",
    )


class EpisodeConfig(BaseModel):
    """How episodes are played."""

    model_config = ConfigDict(extra="forbid")
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="sampling of each assistant message")
    max_steps_per_turn: int = Field(4, ge=1, description="tool-call messages per user turn before the turn is cut")
    max_context_tokens: int = Field(4096, ge=64, description="end an episode before its context exceeds this")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="chat format (from the model's card)")
    hints: bool = Field(False, description="corrective hints in error observations (env_augment baseline)")


class TinyModelConfig(BaseModel):
    """Size of the tiny model and its tokenizer; the defaults make the 3.9M-parameter demo model."""

    model_config = ConfigDict(extra="forbid")
    arch: Literal["qwen2", "qwen3"] = Field("qwen3", description="architecture family (config class)")
    hidden: int = Field(256, ge=16, description="hidden size")
    layers: int = Field(4, ge=1, description="decoder layers")
    heads: int = Field(4, ge=1, description="attention heads")
    kv_heads: int = Field(2, ge=1, description="key/value heads (grouped-query attention)")
    ffn: int = Field(768, ge=16, description="MLP intermediate size")
    vocab: int = Field(3000, ge=300, description="vocabulary size, special tokens and JSON_PIECES included")
    max_positions: int = Field(4096, ge=256, description="maximum sequence length")
    seed: int = Field(0, description="seed for weight initialisation")
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="chat format the model is trained on")


class SFTSettings(BaseModel):
    """Optimisation of the warm start; training ends at `loss_target` (epoch-mean loss) or `max_epochs`."""

    model_config = ConfigDict(extra="forbid")
    loss_target: float = Field(0.02, gt=0, description="stop once an epoch's mean training loss is at or below this")
    max_epochs: int = Field(60, ge=1, description="upper bound on epochs")
    learning_rate: float = Field(
        2e-3, gt=0, description="AdamW learning rate after warmup (its peak when lr_schedule decays)"
    )
    warmup_steps: int = Field(20, ge=0, description="linear warmup steps")
    lr_schedule: Literal["constant_with_warmup", "cosine", "linear"] = Field(
        "constant_with_warmup",
        description="the learning rate after warmup: constant, or decayed to 0 at the end of the token budget "
        "(cosine or linear; with no token_budget, at max_epochs)",
    )
    batch_size: int = Field(1, ge=1, description="conversations per step (1 avoids padding on CPU)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    seed: int = Field(0, description="data order and dropout seed")
    use_cpu: bool = Field(True, description="train on CPU even when a GPU is visible")
    bf16: bool = Field(False, description="bfloat16 mixed precision (GPU hosts); CPU runs keep fp32")
    gradient_checkpointing: bool = Field(False, description="recompute activations in backward (large models only)")
    token_budget: int | None = Field(
        None,
        ge=1,
        description="train on about this many tokens (all processes together), then stop, whatever the loss: "
        "compares warm starts of different data at equal compute; None = until loss_target or max_epochs",
    )

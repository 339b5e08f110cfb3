"""How the policy's weights are loaded and what precision its optimizer keeps, as TRL decides it for a model id.

TRL loads a policy it is given by name with `create_model_from_path(model_id, **model_init_kwargs)`: dtype
float32 unless `model_init_kwargs` says otherwise (transformers 5 alone would load the checkpoint's dtype, bf16
for Qwen), bf16 compute then coming from `bf16: true` (autocast). RODS hands TRL a loaded model (it needs the
tokenizer and the model card first), and TRL ignores `model_init_kwargs` for a model object, so RODS builds the
same keyword arguments here: `model.dtype` and `model.attn_implementation`, with `grpo.trainer_args.
model_init_kwargs` (TRL's own field) under them. Departure from TRL: none in the values; the dtype strings are
the run config's.

`optimizer_dtype` says which dtype the optimizer's parameters end up in under each accelerate launcher, from
accelerate's and DeepSpeed's own rules (read in their sources), so a test can check every shipped launcher
config without the GPUs they need.
"""

from __future__ import annotations

from typing import Any

# accelerate's `distributed_type` values, grouped by what they do to parameter dtypes
_FSDP, _DEEPSPEED = "FSDP", "DEEPSPEED"


def model_init_kwargs(model_settings, trainer_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """from_pretrained keyword arguments of a training load, as TRL's `create_model_from_path` receives them:
    `trainer_args.model_init_kwargs` first, `model.dtype` / `model.attn_implementation` where the run config
    sets them explicitly or TRL's kwargs leave them unset (model.dtype's default, float32, is TRL's default),
    the dtype string turned into a torch dtype as TRL does (auto stays auto). `trust_remote_code` follows
    GRPOConfig's field of that name, as in TRL."""
    import torch

    args = dict(trainer_args or {})
    kwargs = dict(args.get("model_init_kwargs") or {})
    explicit = model_settings.model_fields_set
    if "dtype" in explicit or "dtype" not in kwargs:
        kwargs["dtype"] = model_settings.dtype
    if model_settings.attn_implementation is not None:
        kwargs["attn_implementation"] = model_settings.attn_implementation
    kwargs.setdefault("trust_remote_code", bool(args.get("trust_remote_code", False)))
    dtype = kwargs["dtype"]
    if isinstance(dtype, str) and dtype != "auto":
        if dtype not in ("bfloat16", "float16", "float32"):
            raise ValueError(
                f"grpo.trainer_args.model_init_kwargs.dtype {dtype!r}: not a dtype TRL loads; use float32, "
                "bfloat16, float16 or auto (or set model.dtype)"
            )
        kwargs["dtype"] = getattr(torch, dtype)
    return kwargs


def optimizer_dtype(distributed_type: str, mixed_precision: str, loaded: str) -> str:
    """The dtype of the parameters the optimizer updates (its master weights), given an accelerate launcher's
    `distributed_type` and `mixed_precision` and the dtype the policy was loaded in ("float32", "bfloat16", ...).

    - DDP (MULTI_GPU), one process (NO) and CPU: the loaded dtype; mixed precision is autocast around the
      forward and never casts parameters (a bf16 load trains in pure bf16: AdamW's small updates round away).
    - FSDP2: accelerate's `fsdp2_prepare_model` upcasts every trainable parameter to float32 when
      mixed_precision is not "no" (its MixedPrecisionPolicy casts for compute); with "no", the loaded dtype.
    - DeepSpeed (ZeRO): with bf16 or fp16 enabled (accelerate writes `bf16.enabled` from mixed_precision),
      DeepSpeed casts the module to that dtype and its ZeRO optimizer keeps float32 master partitions, which
      are what the optimizer steps; without them, the loaded dtype.
    """
    if distributed_type == _FSDP:
        return "float32" if mixed_precision != "no" else loaded
    if distributed_type == _DEEPSPEED:
        return "float32" if mixed_precision in ("bf16", "fp16") else loaded
    return loaded


def inference_placement() -> tuple[str, dict[str, Any]]:
    """(device, from_pretrained kwargs) of an evaluation-only load (`rods eval`): the first GPU in bfloat16 when
    one is visible (inference needs no fp32 master weights), else the CPU with the checkpoint's own dtype."""
    import torch

    if torch.cuda.is_available():
        return "cuda", {"dtype": torch.bfloat16}
    return "cpu", {}

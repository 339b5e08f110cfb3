"""Pushing the trainer's weights into a colocated vLLM engine on a CPU host.

TRL 1.16's colocated sync calls the engine model's `load_weights` directly. vLLM's CPU backend repacks each
linear layer's weight into its GEMM kernel after loading and leaves an empty parameter behind (no
`weight_loader`), so that call fails on CPU ("'Parameter' object has no attribute 'weight_loader'"), and
writing the old parameter would not reach the kernel anyway. vLLM's own weight-transfer engines wrap the load
in its layerwise-reload lifecycle (restore the checkpoint-format parameters, load, re-run the post-load
processing); this does the same for the colocated engine.
"""

from __future__ import annotations


def sync_colocated_weights(vllm_generation) -> int:
    """Load the training model's current weights into TRL's colocated `vllm.LLM`; returns the tensors pushed.

    `vllm_generation` is the trainer's `trl.generation.vllm_generation.VLLMGeneration` in colocate mode."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

    engine = vllm_generation.llm.llm_engine
    model = engine.model_executor.driver_worker.model_runner.model
    pushed = 0
    lm_head = getattr(model, "lm_head", None)
    tied = [
        m for m in model.modules() if m is not lm_head and getattr(m, "weight", None) is getattr(lm_head, "weight", 0)
    ]
    with set_current_vllm_config(engine.vllm_config):
        initialize_layerwise_reload(model)
        # TRL's iterator names parameters as vLLM expects and gathers sharded ones (a collective: every rank runs it)
        for name, param in vllm_generation._iter_named_params():
            model.load_weights([(name, param)])
            pushed += 1
        finalize_layerwise_reload(model, engine.vllm_config.model_config)
        if tied:
            # A tied LM head is loaded through the embedding only, so the reload never re-processes it, and the CPU
            # backend's packed copy of its weight stays stale (vLLM's layerwise reload: "tied parameters will only
            # reflect processing from one of the parent layers"): re-tie it and re-run its post-load processing.
            lm_head.weight = tied[0].weight
            lm_head.quant_method.process_weights_after_loading(lm_head)
    vllm_generation.llm.reset_prefix_cache()
    return pushed

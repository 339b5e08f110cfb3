"""Pushing the trainer's weights into vLLM where TRL's own sync falls short: a colocated engine on a CPU host, and
a vLLM server (a checked cache reset and a barrier after the weights are in: `sync_server_weights`).

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


def sync_server_weights(vllm_generation, ranks) -> None:
    """TRL's server-mode weight sync, ended so that no rank generates on old or half-loaded weights.

    TRL streams the weights from rank 0 while the other ranks only take part in the gathers (under DDP, none: they
    return at once), then asks the server to drop its prefix cache and ignores the answer. So another rank's
    requests can reach the server while rank 0 still streams, and a refused reset (vLLM refuses while requests
    run) leaves KV computed with the old weights to be reused. Here rank 0 resets again and reads the answer, and
    every rank waits for rank 0's verdict (a broadcast: the barrier) before it generates; a refused reset is an
    error on every rank. `ranks`: the run's rods_core.ranks.Ranks."""
    vllm_generation.sync_weights()
    problem = _reset_problem(vllm_generation.vllm_client) if ranks.main else None
    problem = ranks.share(problem)
    if problem:
        raise RuntimeError(f"vLLM server: {problem}; the engine may hold KV of the previous weights")


def _reset_problem(client) -> str | None:
    """Why the server did not reset its prefix cache, or None: vLLM >= 0.26 answers {"success": bool}, earlier
    releases an empty body with status 200."""
    try:
        response = client.session.post(f"{client.base_url}/reset_prefix_cache")
    except Exception as e:  # any transport failure is a failed reset
        return f"the prefix-cache reset failed ({type(e).__name__}: {str(e)[:200]})"
    if response.status_code != 200:
        return f"the prefix-cache reset answered {response.status_code}: {response.text[:200]}"
    try:
        answer = response.json()
    except ValueError:
        return None
    if isinstance(answer, dict) and answer.get("success") is False:
        return "the server refused to reset its prefix cache (requests were still running on it)"
    return None

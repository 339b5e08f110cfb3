"""Evaluation that fits beside training: bounded batches (eval.max_batch), no full-vocabulary logits kept by
transformers' generation, log-probs of the chosen tokens only, and ZeRO-3 recognised for the gather."""

from __future__ import annotations

import torch

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.config import EpisodeConfig, RunConfig, SamplingConfig
from rods_core.evaluation import EvalConfig, evaluate
from rods_core.policy.generation import HFGenerator
from rods_core.policy.tiny import load_policy
from rods_core.policy.weights import whole_weights, zero3_partitioned
from tests.conftest import smoke_config


def _spy_generate(model, calls: list):
    real = model.generate

    def generate(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    model.generate = generate


def test_sampled_logprobs_are_the_chosen_tokens_without_keeping_every_steps_logits(tiny_model_dir):
    model, tok, _ = load_policy(tiny_model_dir)
    calls: list = []
    _spy_generate(model, calls)
    gen = HFGenerator(model, tok)
    ctx = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    torch.manual_seed(0)
    comps = gen.generate(ctx, SamplingConfig(temperature=0.7, max_new_tokens=6))
    assert not any(k.get("output_logits") or k.get("output_scores") for k in calls)
    for c, comp in zip(ctx, comps, strict=True):
        ids = torch.tensor([c + comp.ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(c) - 1 : -1].float() / 0.7
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(comp.ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(comp.logprobs), want, atol=1e-4)


def test_greedy_evaluation_generates_without_logprobs_and_the_same_tokens(tiny_model_dir):
    model, tok, _ = load_policy(tiny_model_dir)
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=6)
    ctx = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    with_lp = HFGenerator(model, tok).generate(ctx, greedy)
    without = HFGenerator(model, tok, logprobs=False).generate(ctx, greedy)
    assert [c.ids for c in with_lp] == [c.ids for c in without]
    assert all(c.logprobs is None for c in without) and all(len(c.logprobs) == len(c.ids) for c in with_lp)


def test_evaluation_plays_at_most_max_batch_episodes_together_with_the_same_results(tiny_model_dir):
    tasks = demo_seeds()[:5]
    model, tok, prompt = load_policy(tiny_model_dir)
    episode = EpisodeConfig(
        prompt=prompt, max_steps_per_turn=1, sampling=SamplingConfig(temperature=0.0, max_new_tokens=8)
    )
    results = {}
    for kv_cache in (True, False):
        for max_batch in (5, 2):
            calls: list = []
            _spy_generate(model, calls)
            cfg = EvalConfig(episode=episode, max_batch=max_batch, kv_cache=kv_cache)
            out = evaluate((model, tok), tasks, cfg)
            results[kv_cache, max_batch] = out["per_task"]
            del model.generate  # the instance attribute set by the spy
            if not kv_cache:  # transformers' generate: rows per call bounded
                assert calls and max(len(k["input_ids"]) for k in calls) <= max_batch
    assert len({str(r) for r in results.values()}) == 1


def test_a_runs_evaluation_batch_is_eval_max_batch(tmp_path, tiny_model_dir):
    assert EvalConfig().max_batch == RunConfig().eval.max_batch  # `rods eval` and a run bound alike by default
    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir, **{"eval.max_batch": 3}))
    from rods_core.loop import HeldOutEval, Policy
    from rods_core.ranks import Ranks
    from rods_core.recording import NullRecorder
    from rods_core.tasksets import run_benchmark

    policy = Policy.load(cfg, tiny_model_dir)
    held = HeldOutEval(cfg, policy, demo_seeds()[:2], NullRecorder(), None, Ranks(), print, run_benchmark(cfg), None)
    assert held.greedy.max_batch == 3


def test_zero3_partitioned_weights_are_recognised_and_plain_ones_are_left_alone(tiny_model_dir):
    """ZeRO-3 needs GPUs (accelerate enables DeepSpeed for GPU processes only): the decision is checked on the
    attribute DeepSpeed gives each partitioned parameter (`ds_id`), set here by hand on a real model."""
    model, _, _ = load_policy(tiny_model_dir)
    assert not zero3_partitioned(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with whole_weights(model):  # one process, no sharding: nothing to gather
        pass
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    next(model.parameters()).ds_id = 0
    assert zero3_partitioned(model)

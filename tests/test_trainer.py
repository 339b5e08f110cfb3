"""GRPO through TRL: the reward-matrix hook, draws at generation time, real weight updates, configs."""

from __future__ import annotations

import torch

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.config import EpisodeConfig, RunConfig
from rods_core.policy.tiny import load_policy
from rods_core.rollout import episode_benchmark
from rods_core.trainer import RodsGRPOTrainer
from tests.conftest import smoke_config


def _length_reward(prompts, completions, completion_ids, **kwargs):
    # A stand-in reward with variance: an untrained tiny model scores 0 progress on every rollout, so
    # GRPO would have no advantage to learn from. Only used to prove the optimizer path updates weights.
    return [len(c) / 1000.0 for c in completion_ids]


def test_two_grpo_steps_change_weights_and_hand_over_contiguous_groups(tmp_path, tiny_model_dir):
    cfg = RunConfig.model_validate(
        smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2, "grpo.num_generations": 3})
    )
    tasks = {t.id: t for t in demo_seeds()[:4]}
    ids = list(tasks)
    draws, seen = [], []

    def draw(n):
        batch = [ids[(len(draws) * n + i) % len(ids)] for i in range(n)]
        draws.append(batch)
        return batch

    model, tokenizer, prompt = load_policy(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(tmp_path / "ck"),
        draw=draw,
        task_of=tasks.__getitem__,
        on_rollout=seen.append,
        episode_cfg=EpisodeConfig(
            prompt=prompt,
            max_steps_per_turn=1,
            max_context_tokens=1024,
            sampling={"temperature": 1.0, "max_new_tokens": 16},
        ),
        reward_funcs=[_length_reward],
        benchmark=episode_benchmark(EpisodeConfig(prompt=prompt, max_steps_per_turn=1), "bfcl_multi_turn"),
    )
    trainer.train()
    assert len(seen) == 2 and len(draws) == 2  # one draw of the whole batch per generation step
    for report, drawn in zip(seen, draws, strict=True):
        assert [tid for tid, _ in report.groups] == drawn  # slot i is bound to the i-th drawn task
        assert all(len(r) == 3 for _, r in report.groups)  # G rewards per task, contiguous
        assert len(report.accuracy) == 6 and report.model_tokens > 0
        assert report.timings["time/gen_s"] > 0 and report.timings["time/rollout_s"] >= report.timings["time/gen_s"]
    changed = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())


def test_the_fused_lm_head_scores_only_completion_positions_on_cpu_with_unchanged_logprobs(tiny_model_dir):
    """The CPU speed-up (rods_core.trainer.score_completion_positions_only) patches a TRL internal: it must
    still exist, and the compact path must give the log-probs and gradients of TRL's every-position path."""
    import trl.trainer.utils as trl_utils

    from rods_core.trainer import score_completion_positions_only

    assert hasattr(trl_utils, "_use_triton"), "TRL no longer chooses compact scoring by _use_triton"
    score_completion_positions_only()
    patched = trl_utils._use_triton
    assert patched(torch.device("cpu")) and patched.rods_compact
    model, _, _ = load_policy(tiny_model_dir)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(3, model.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0))
    labels = ids.clone()
    labels[:, :25] = -100  # the prompt
    labels[1, 35:] = -100  # a shorter second completion

    def run(compact: bool):
        model.zero_grad()
        trl_utils._use_triton = patched if compact else (lambda device: False)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels, fused_lm_head=True)
        (out.log_probs.sum() + out.entropy.sum()).backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        return out.log_probs.detach(), out.entropy.detach(), grads

    try:
        every, compact = run(False), run(True)
    finally:
        trl_utils._use_triton = patched
    assert torch.allclose(every[0], compact[0], atol=1e-5) and torch.allclose(every[1], compact[1], atol=1e-5)
    assert (compact[0][:, :24] == 0).all() and (compact[0][:, 25:] != 0).any()
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(every[2], compact[2], strict=True))


def test_a_shared_prompt_pass_gives_trls_logprobs_entropies_and_gradients(tiny_model_dir):
    """grpo.shared_prompt runs each group's prompt once and its rollouts against the prompt's cache: the result
    must be TRL's own batched pass (left-padded prompts, right-padded completions) up to float rounding."""
    import contextlib
    import types

    import trl.trainer.utils as trl_utils
    from trl import GRPOTrainer

    from rods_core.trainer import score_completion_positions_only, shared_prompt_logps

    score_completion_positions_only()
    model, _, _ = load_policy(tiny_model_dir)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prompts = [torch.randint(3, vocab, (n,), generator=gen) for n in (9, 5, 1)]
    rows = [(0, 6), (0, 3), (1, 7), (1, 0), (0, 7), (2, 4)]  # (prompt, completion length), groups interleaved
    width, keep = 9, 7
    ids = torch.zeros(len(rows), width + keep, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, (p, n) in enumerate(rows):
        ids[r, width - len(prompts[p]) : width] = prompts[p]
        ids[r, width : width + n] = torch.randint(3, vocab, (n,), generator=gen)
        mask[r, width - len(prompts[p]) : width + n] = 1
    mask[4, width + 2] = 0  # a masked column inside a completion

    accelerator = types.SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True)
    trl_self = types.SimpleNamespace(accelerator=accelerator)  # what TRL's method reads of its trainer

    def run(shared: bool):
        model.zero_grad()
        if shared:
            logps, entropy = shared_prompt_logps(model, ids, mask, keep, compute_entropy=True)
        else:
            logps, entropy, _ = GRPOTrainer._get_per_token_logps_and_entropies(
                trl_self, model, ids, mask, keep, compute_entropy=True
            )
        (logps.sum() + entropy.sum()).backward()
        return logps.detach(), entropy.detach(), [p.grad.clone() for p in model.parameters()]

    trl_pass, shared_pass = run(False), run(True)
    scored = mask[:, width:].bool()
    assert scored.sum() == 26 and (shared_pass[0][~scored] == 0).all() and (shared_pass[0][scored] < 0).all()
    assert torch.allclose(trl_pass[0], shared_pass[0], atol=1e-4)
    assert torch.allclose(trl_pass[1], shared_pass[1], atol=1e-4)
    assert all(torch.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(trl_pass[2], shared_pass[2], strict=True))


def test_balance_spreads_the_drawn_tasks_so_each_rank_carries_about_equal_cost():
    from rods_core.ranks import balance

    cost = {"a": 400.0, "b": 380.0, "c": 100.0, "d": 90.0, "e": 60.0, "f": None, "g": 50.0, "h": 40.0}
    drawn = ["a", "b", "c", "d", "e", "f", "g", "h"]
    slots = [[0, 1, 2, 3], [4, 5, 6, 7]]  # TRL's contiguous halves: a, b, c, d on rank 0 is 970 vs 240

    def load(placed, r):
        return sum(cost[placed[s]] or 90.0 for s in slots[r])  # unknown: the median of the known (90)

    placed = balance(drawn, slots, cost.get)
    assert sorted(placed) == sorted(drawn)  # the same tasks, only placed differently
    assert abs(load(placed, 0) - load(placed, 1)) <= 60  # was 970 vs 240
    assert balance(drawn, slots, cost.get) == placed  # every rank computes the same placement
    assert balance(drawn, [[0, 2, 4, 6], [1, 3, 5, 7]], cost.get) != placed  # it follows the slots given
    assert balance(drawn, [[0, 1, 2], [4, 5, 6]], cost.get) == drawn  # not a partition: left as drawn
    assert balance(drawn, slots, lambda t: None) == drawn  # nothing known: nothing to balance


def test_the_rollout_report_counts_tokens_per_group_and_per_process():
    from rods_core.trainer import _report

    rows = [("a", 1.0, 1.0, 2, 10, 0), ("a", 0.0, 0.0, 2, 30, 0), ("b", 1.0, 1.0, 1, 5, 1), ("b", 1.0, 1.0, 1, 7, 1)]
    rep = _report(rows, 2, {})
    assert rep.groups == [("a", [1.0, 0.0]), ("b", [1.0, 1.0])]
    assert rep.group_tokens == [40, 12] and rep.rank_tokens == [40, 12] and rep.model_tokens == 52

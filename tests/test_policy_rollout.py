"""Multi-turn episodes: env_mask marks exactly the model's tokens, scripted ground truth scores 1,
doing nothing scores 0, step limits end turns, and the output fits TRL's rollout_func contract."""

from __future__ import annotations

import pytest
from policy_helpers import demo_texts, load_tokenizer, replay

from rods_core.config import EpisodeConfig
from rods_core.policy.generation import ScriptedGenerator
from rods_core.rollout import episode_benchmark, rollout_output, run_episodes

BFCL = episode_benchmark(EpisodeConfig(), "bfcl_multi_turn")  # its episodes: default prompt, no hints
PWD = '<tool_call>\n{"name": "pwd", "arguments": {}}\n</tool_call>'


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return load_tokenizer(tiny_model_dir)


def _pick(seeds, category, n=1):
    return [t for t in seeds if t.category == category][:n]


@pytest.mark.parametrize("category", ["base", "miss_func", "miss_param", "long_context"])
def test_scripted_ground_truth_scores_one(tok, train_seeds, category):
    task = _pick(train_seeds, category)[0]
    (ep,) = run_episodes([task], replay(tok, demo_texts(tok, task)[0]), EpisodeConfig(), benchmark=BFCL)
    assert ep.reward == 1.0 and ep.accuracy == 1.0, ep.verdicts
    assert ep.n_calls == task.n_calls and ep.parse_errors == 0


def test_env_mask_marks_model_tokens_only(tok, train_seeds):
    task = _pick(train_seeds, "base")[0]
    emitted: list[list[int]] = []
    texts = iter(demo_texts(tok, task)[0])

    def recording(ctx):
        text = next(texts)
        emitted.append(tok(text, add_special_tokens=False).input_ids + [tok.eos_token_id])
        return text

    (ep,) = run_episodes([task], ScriptedGenerator(tok, recording), EpisodeConfig(), benchmark=BFCL)
    assert len(ep.completion_ids) == len(ep.env_mask)
    # Spans of mask 1, in order, are exactly the generated messages.
    spans, cur = [], []
    for tid, m in zip(ep.completion_ids, ep.env_mask, strict=True):
        if m:
            cur.append(tid)
        elif cur:
            spans.append(cur)
            cur = []
    if cur:
        spans.append(cur)
    assert spans == emitted
    env_text = tok.decode(
        [t for t, m in zip(ep.completion_ids, ep.env_mask, strict=True) if not m], skip_special_tokens=False
    )
    assert "<|im_start|>tool\n" in env_text and task.user_texts[1] in env_text
    assert "<tool_call>" not in env_text  # calls are the model's, never the environment's
    assert ep.completion_ids[-1] == tok.eos_token_id and ep.env_mask[-1] == 1  # ends on the model's answer
    # The prompt is system + first user turn + generation prompt, nothing the model wrote.
    prompt = tok.decode(ep.prompt_ids, skip_special_tokens=False)
    assert prompt.endswith("<|im_start|>assistant\n") and task.user_texts[0] in prompt


def test_do_nothing_scores_zero(tok, train_seeds):
    tasks = [t for c in ("base", "miss_func", "miss_param", "long_context") for t in _pick(train_seeds, c, 2)]
    eps = run_episodes(tasks, ScriptedGenerator(tok, lambda ctx: "Done."), EpisodeConfig(), benchmark=BFCL)
    assert [e.reward for e in eps] == [0.0] * len(tasks)
    assert all(e.n_calls == 0 and e.valid_messages == e.n_messages for e in eps)
    assert [e.task_id for e in eps] == [t.id for t in tasks]


def test_step_limit_ends_turns(tok, train_seeds):
    task = _pick(train_seeds, "base")[0]
    gen = ScriptedGenerator(tok, lambda ctx: PWD)
    (ep,) = run_episodes(
        [task],
        gen,
        EpisodeConfig(max_steps_per_turn=2),
        benchmark=episode_benchmark(EpisodeConfig(max_steps_per_turn=2), "bfcl_multi_turn"),
    )
    assert ep.n_messages == 2 * task.n_turns and ep.n_calls == 2 * task.n_turns
    assert len(ep.verdicts) == task.n_turns


def test_parse_errors_come_back_as_tool_errors(tok, train_seeds):
    task = _pick(train_seeds, "base")[0]
    gen = ScriptedGenerator(tok, lambda ctx: '<tool_call>\n{"name": "cd", "arguments": {"folder": x}}\n</tool_call>')
    (ep,) = run_episodes(
        [task],
        gen,
        EpisodeConfig(max_steps_per_turn=1),
        benchmark=episode_benchmark(EpisodeConfig(max_steps_per_turn=1), "bfcl_multi_turn"),
    )
    assert ep.parse_errors == task.n_turns and ep.valid_messages == 0 and ep.reward == 0.0
    assert any(m["role"] == "tool" and "could not parse" in m["content"] for m in ep.transcript)


def test_context_limit_ends_the_episode_early(tok, train_seeds):
    task = _pick(train_seeds, "base")[0]
    gen = ScriptedGenerator(tok, lambda ctx: PWD)
    (ep,) = run_episodes([task], gen, EpisodeConfig(max_context_tokens=len_prompt(tok, task) + 300), benchmark=BFCL)
    assert ep.truncated and len(ep.verdicts) == task.n_turns and ep.reward == 0.0


def len_prompt(tok, task):
    (ep,) = run_episodes([task], ScriptedGenerator(tok, lambda ctx: "Done."), EpisodeConfig(), benchmark=BFCL)
    return len(ep.prompt_ids)


def test_rollout_output_fits_trl_contract(tok, train_seeds):
    tasks = _pick(train_seeds, "base", 2)
    eps = run_episodes(
        [t for t in tasks for _ in range(3)],
        ScriptedGenerator(tok, lambda ctx: "Done."),
        EpisodeConfig(),
        benchmark=BFCL,
    )
    out = rollout_output(eps)
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask"} <= out.keys()
    assert out["logprobs"] is None  # the scripted generator has no logprobs
    assert out["task_id"] == [tasks[0].id] * 3 + [tasks[1].id] * 3
    assert all(len(c) == len(m) for c, m in zip(out["completion_ids"], out["env_mask"], strict=True))


def test_hf_generator_batches_and_returns_logprobs(tiny_model_dir, train_seeds):
    from rods_core.config import SamplingConfig
    from rods_core.policy.generation import HFGenerator
    from rods_core.policy.tiny import load_policy

    model, tok, prompt = load_policy(tiny_model_dir)
    gen = HFGenerator(model, tok)
    cfg = EpisodeConfig(prompt=prompt, max_steps_per_turn=1, sampling=SamplingConfig(max_new_tokens=8))
    eps = run_episodes(_pick(train_seeds, "base", 3), gen, cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
    for ep in eps:
        assert len(ep.logprobs) == len(ep.completion_ids)
        assert all(lp <= 0 for lp, m in zip(ep.logprobs, ep.env_mask, strict=True) if m)
        assert all(lp == 0.0 for lp, m in zip(ep.logprobs, ep.env_mask, strict=True) if not m)
        assert 0 < ep.model_tokens <= 9 * ep.n_messages  # 8 new tokens (+ the closing stop token if cut)
    assert gen.stats.tokens > 0 and gen.stats.calls >= 1


def test_cached_generator_matches_plain_generate(tiny_model_dir, train_seeds):
    """Reusing KV caches across messages (with masked holes) must not change what the model generates."""
    from rods_core.config import SamplingConfig
    from rods_core.policy.cached_generation import CachedHFGenerator
    from rods_core.policy.generation import HFGenerator
    from rods_core.policy.tiny import load_policy

    model, tok, prompt = load_policy(tiny_model_dir)
    base = _pick(train_seeds, "base", 2)
    # a GRPO-like batch: a task repeated (its rows share one prefill of the prompt) beside distinct ones
    tasks = [base[0], base[0], base[1], base[0]] + _pick(train_seeds, "miss_func", 1)
    cfg = EpisodeConfig(prompt=prompt, max_steps_per_turn=2, sampling=SamplingConfig(temperature=0.0, max_new_tokens=6))
    plain = run_episodes(tasks, HFGenerator(model, tok), cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
    cached_gen = CachedHFGenerator(model, tok)
    fed = []  # tokens fed to each forward of the decoder
    forward = cached_gen._forward

    def counting_forward(ids, *args):
        fed.append(len(ids))
        return forward(ids, *args)

    cached_gen._forward = counting_forward
    cached = run_episodes(tasks, cached_gen, cfg, benchmark=episode_benchmark(cfg, "bfcl_multi_turn"))
    for a, b in zip(plain, cached, strict=True):
        assert a.completion_ids == b.completion_ids and a.env_mask == b.env_mask
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-3
    distinct_prompts = {tuple(ep.prompt_ids) for ep in cached}
    assert fed[0] == sum(len(p) for p in distinct_prompts) < sum(len(ep.prompt_ids) for ep in cached)


def test_the_decoders_sampler_draws_from_the_distribution_and_respects_top_p():
    import torch

    from rods_core.config import SamplingConfig
    from rods_core.policy.cached_generation import _sample

    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.1, 0.0, 0.6, 0.3]])).repeat(20_000, 1)
    tok, lp = _sample(logits, SamplingConfig(temperature=1.0), torch)
    freq = torch.bincount(tok, minlength=4) / 20_000
    assert torch.allclose(freq, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.015) and freq[1] == 0
    assert torch.allclose(lp, torch.log(torch.tensor([0.1, 1.0, 0.6, 0.3]))[tok])  # logprob of the drawn token
    tok, _ = _sample(logits, SamplingConfig(temperature=1.0, top_p=0.8), torch)
    freq = torch.bincount(tok, minlength=4) / 20_000
    assert freq[0] == 0 and abs(freq[2] - 2 / 3) < 0.015  # only 0.6 and 0.3 are kept, renormalised
    greedy, _ = _sample(logits[:3], SamplingConfig(temperature=0.0), torch)
    assert greedy.tolist() == [2, 2, 2]


def test_streaming_decoder_generates_what_plain_generate_does_round_by_round(tiny_model_dir):
    """Continuous batching (a row's next message starts as soon as its last is handed over, its new tokens fed in
    the same forward as other rows' next tokens; rows whose episode is over leave the cache) changes when tokens
    are computed, not which: greedy messages equal message for message to transformers' `generate` played in
    rounds."""
    import torch

    from rods_core.config import SamplingConfig
    from rods_core.policy.cached_generation import CachedHFGenerator
    from rods_core.policy.generation import HFGenerator
    from rods_core.policy.tiny import load_policy

    model, tok, _ = load_policy(tiny_model_dir)
    gen = CachedHFGenerator(model, tok)
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=10)
    g = torch.Generator().manual_seed(0)
    starts = [torch.randint(10, 900, (int(n),), generator=g).tolist() for n in torch.randint(5, 40, (8,), generator=g)]
    # an untrained model never says its end token (it repeats a token of its context): end messages at the token
    # the first row repeats instead, so that its messages end after one token while other rows decode on
    gen.stop_id = gen.generate(starts, sampling)[0].ids[0]
    plain = HFGenerator(model, tok)
    plain.stop_id = gen.stop_id
    assert [c.ids for c in gen.generate(starts, sampling)] == [c.ids for c in plain.generate(starts, sampling)]

    def play(step_all) -> list[list]:
        """Row i's episode: i % 4 + 2 messages, each followed by i % 3 + 1 'environment' tokens."""
        said: list[list] = [[] for _ in starts]
        contexts = [list(c) for c in starts]

        def on_message(i, comp):
            said[i].append(comp)
            if len(said[i]) == i % 4 + 2:
                return None
            contexts[i] += comp.ids + list(range(100, 100 + i % 3 + 1))
            return contexts[i]

        step_all(contexts, on_message)
        return said

    want = play(lambda contexts, on_message: plain.stream(contexts, on_message, sampling))
    mixed, widths = [], set()
    forward = gen._forward

    def watched(ids, rows, slot, pos, ks, *rest):
        fed = torch.bincount(rows, minlength=ks[0].shape[0])
        mixed.append(bool((fed > 1).any() and 4 * (fed > 1).sum() <= len(fed)))  # a few rows feed several tokens
        widths.add(ks[0].shape[0])
        return forward(ids, rows, slot, pos, ks, *rest)

    gen._forward = watched
    got = play(lambda contexts, on_message: gen.stream(contexts, on_message, sampling))
    assert [[c.ids for c in row] for row in got] == [[c.ids for c in row] for row in want]
    pairs = [(c, d) for x, y in zip(got, want, strict=True) for c, d in zip(x, y, strict=True)]
    lps = [(a, b) for c, d in pairs for a, b in zip(c.logprobs, d.logprobs, strict=True)]
    assert max(abs(a - b) for a, b in lps) < 1e-4  # the same distributions, not only the same argmax
    assert any(mixed)  # some rows fed a message's follow-up while others decoded
    assert min(widths) < 8  # finished episodes left the cache

"""The token path plays any benchmark: the registry names them, a memory episode's sessions share one
sequence with the tokens laid out as the chat template renders the whole conversation, tool results are cut
for every environment, evaluation groups through the benchmark, and `rods eval --benchmark` reports it."""

from __future__ import annotations

import json

import pytest
from policy_helpers import load_tokenizer, replay

from rods_core.benchmarks.memory.benchmark import BfclMemory
from rods_core.benchmarks.memory.env import AGENTIC_FORMAT, played_sessions
from rods_core.benchmarks.protocols import EpisodeScore, Step, demonstration, scripted_policy
from rods_core.benchmarks.registry import benchmark_names, make_benchmark
from rods_core.config import EpisodeConfig, PromptConfig
from rods_core.evaluation import metrics
from rods_core.policy.generation import ScriptedGenerator
from rods_core.policy.rendering import renderer_for
from rods_core.rollout import Episode, run_episodes

WHOLE = EpisodeConfig(max_context_tokens=10**6)


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return load_tokenizer(tiny_model_dir)


def test_the_registry_builds_every_named_benchmark_and_refuses_others():
    for name in benchmark_names():
        assert make_benchmark(name).name == name
    with pytest.raises(ValueError, match="unknown benchmark 'memory'; choose one of bfcl_multi_turn"):
        make_benchmark("memory")
    with pytest.raises(ValueError, match="hints .* bfcl_multi_turn only"):
        make_benchmark("bfcl_memory_kv", hints=True)
    assert make_benchmark("bfcl_memory_rec_sum", options={"prereq": "fact"}).prereq == "fact"


def _memory_texts(tok, bench, task, tmp_path) -> list[str]:
    """The reference path's assistant messages as the template renders them (what a policy would write)."""
    env = bench.environment(task, tmp_path)
    msgs, tools = demonstration(env, bench.reference_policy(task)), env.tools()
    r = renderer_for(tok)
    return [r.assistant_text(msgs[:i], m, tools) for i, m in enumerate(msgs) if m["role"] == "assistant"]


@pytest.mark.parametrize("backend", ["kv", "rec_sum"])
def test_a_memory_episode_plays_its_sessions_in_one_sequence(tok, tmp_path, backend):
    bench = BfclMemory(backend, prereq="fact")
    task = min(bench.seeds("train")[:20], key=lambda t: len(json.dumps(t.model_dump())))
    texts = _memory_texts(tok, bench, task, tmp_path / "demo")
    (ep,) = run_episodes([task], replay(tok, texts), WHOLE, benchmark=bench, workdir=tmp_path / "run")
    assert (ep.reward, ep.accuracy) == (1.0, 1.0), ep.verdicts
    # Two sessions (the fact's conversation, then the question), each opened by BFCL's memory system prompt:
    # the second arrives as environment tokens in the same sequence.
    systems = [m for m in ep.transcript if m["role"] == "system"]
    assert len(systems) == 2 and AGENTIC_FORMAT in systems[1]["content"]
    env_text = tok.decode([t for t, m in zip(ep.completion_ids, ep.env_mask, strict=True) if not m])
    assert AGENTIC_FORMAT in env_text and task.question in env_text
    # The layout is the whole conversation as the template renders it, the model's messages marked 1.
    tools = bench.environment(task, tmp_path / "tools").tools()
    whole = renderer_for(tok).encode(ep.transcript, tools)
    assert ep.prompt_ids + ep.completion_ids == whole.input_ids
    assert sum(ep.env_mask) == sum(whole.assistant_masks)
    assert ep.n_calls == 2 and ep.parse_errors == 0  # store, then retrieve
    assert list((tmp_path / "run").rglob("*.json")), "BFCL's snapshots are written under the given workdir"


def test_evaluation_starts_each_memory_session_in_a_fresh_context(tok, tmp_path):
    bench = BfclMemory("kv", prereq="fact")
    task = min(bench.seeds("train")[:20], key=lambda t: len(json.dumps(t.model_dump())))
    texts, contexts = iter(_memory_texts(tok, bench, task, tmp_path / "demo")), []

    def policy(ctx):
        contexts.append(tok.decode(ctx))
        return next(texts)

    gen = ScriptedGenerator(tok, policy)
    (ep,) = run_episodes([task], gen, WHOLE, benchmark=bench, workdir=tmp_path / "run", fresh_sessions=True)
    assert (ep.reward, ep.accuracy) == (1.0, 1.0), ep.verdicts
    (played,) = played_sessions(task, "fact")
    question = [c for c in contexts if task.question in c]
    assert question and all(AGENTIC_FORMAT in c and c.count("<|im_start|>system") == 1 for c in question)
    assert any(played[0] in c for c in contexts)
    assert not any(played[0] in c for c in question)  # the fact's conversation is not in the question's context
    assert task.question in tok.decode(ep.prompt_ids)  # the tokens hold the last session only


def test_an_opening_longer_than_the_context_is_not_generated_from(tok, tmp_path):
    """A task whose first turn alone fills the context (a hostile or long task) ends before any generation:
    a backend would overrun its positions or refuse the prompt (vLLM's max_model_len) and stop the run."""
    bench = BfclMemory("kv", prereq="fact")
    seed = bench.seeds("train")[0]
    long = seed.model_copy(update={"id": "long_1", "sessions": [["word " * 3000 + seed.answers[0] + "."]]})
    assert bench.verify(long, tmp_path / "verify").ok  # a valid task: only its length is the problem
    asked: list[int] = []
    gen = ScriptedGenerator(tok, lambda ctx: asked.append(len(ctx)) or "Noted.")
    cfg = EpisodeConfig(max_context_tokens=1024)
    short, cut = run_episodes([seed, long], gen, cfg, benchmark=bench, workdir=tmp_path / "run")
    assert asked and all(n <= cfg.max_context_tokens for n in asked)  # only the short task was played
    assert cut.truncated and (cut.reward, cut.accuracy) == (0.0, 0.0)
    assert cut.completion_ids == [gen.stop_id] and cut.env_mask == [0]  # one token, as TRL needs one
    assert len(cut.prompt_ids) > cfg.max_context_tokens and short.n_messages >= 1


def test_the_cached_decoder_restarts_a_row_whose_next_context_is_fresh(tiny_model_dir):
    """A context that does not extend the row's is played from position 0: the same greedy messages as
    transformers' `generate` in rounds."""
    import torch

    from rods_core.policy.cached_generation import CachedHFGenerator
    from rods_core.policy.generation import HFGenerator, SamplingConfig
    from rods_core.policy.tiny import load_policy

    model, tok, _ = load_policy(tiny_model_dir)
    g = torch.Generator().manual_seed(1)
    starts = [torch.randint(10, 900, (n,), generator=g).tolist() for n in (30, 12, 21)]
    fresh = [torch.randint(10, 900, (n,), generator=g).tolist() for n in (9, 40, 17)]

    def play(gen) -> list[list[int]]:
        said: list[list[int]] = []

        def on_message(i, comp):
            said.append((i, comp.ids))
            return fresh[i] if sum(j == i for j, _ in said) == 1 else None

        gen.stream([list(s) for s in starts], on_message, SamplingConfig(temperature=0.0, max_new_tokens=6))
        return sorted(said)

    assert play(CachedHFGenerator(model, tok)) == play(HFGenerator(model, tok))


class _LongResults:
    """A benchmark whose only tool returns 500 characters: shows the cut applies to any environment."""

    name, task_type, synthesizer = "long_results", dict, None

    class Env:
        def tools(self):
            return [{"type": "function", "function": {"name": "read", "parameters": {"properties": {}}}}]

        def reset(self):
            return [{"role": "user", "content": "Read it."}]

        def step(self, message):
            if "<tool_call>" in message["content"]:
                return Step([{"role": "tool", "content": "x" * 500}], False)
            return Step([], True)

        def finish(self):
            pass

        def score(self):
            return EpisodeScore(1.0, True)

    def environment(self, task, workdir):
        return self.Env()


def test_tool_results_are_cut_for_every_environment(tok):
    call = '<tool_call>\n{"name": "read", "arguments": {}}\n</tool_call>'
    cfg = WHOLE.model_copy(update={"prompt": PromptConfig(result_chars=40)})
    (ep,) = run_episodes([type("T", (), {"id": "t0"})()], replay(tok, [call, "ok"]), cfg, benchmark=_LongResults())
    (tool,) = [m for m in ep.transcript if m["role"] == "tool"]
    assert tool["content"] == "x" * 37 + "..."
    assert ep.n_calls == 1 and ep.reward == 1.0


def test_metrics_group_through_the_benchmark():
    bench = BfclMemory("kv")
    tasks = [t for s in ("customer", "finance") for t in bench.seeds("train") if t.scenario == s][:50]
    tasks = [next(t for t in tasks if t.scenario == "customer"), next(t for t in tasks if t.scenario == "finance")]
    eps = [Episode(t.id, [1], reward=r, accuracy=r) for t, r in zip(tasks, (1.0, 0.0), strict=True)]
    out = metrics(eps, tasks, benchmark=bench)
    assert out["eval/accuracy"] == 0.5
    assert (out["eval/accuracy/customer"], out["eval/accuracy/finance"]) == (1.0, 0.0)
    assert not any(k.endswith("/base") for k in out)


def test_rods_eval_refuses_bad_benchmark_input(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    runner = CliRunner()
    base = ["eval", "--model", str(tiny_model_dir)]
    r = runner.invoke(app, [*base, "--benchmark", "memory"])
    assert r.exit_code == 2 and "'memory' is not one of" in r.output
    r = runner.invoke(app, [*base, "--benchmark", "bfcl_memory_kv", "--categories", "base"])
    assert r.exit_code == 2 and "--categories and --tasks are BFCL multi-turn's" in r.output
    r = runner.invoke(app, [*base, "--benchmark", "bfcl_memory_kv", "--out", str(tmp_path / "no" / "r.json")])
    assert r.exit_code == 2 and "does not exist" in r.output
    # a folder as --out is refused before any episode is played, not with a traceback after all of them
    r = runner.invoke(app, [*base, "--benchmark", "bfcl_memory_kv", "--limit", "1", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "is a folder" in r.output, r.output
    r = runner.invoke(app, [*base, "--prereq", "some"])
    assert r.exit_code == 2 and "'some' is not one of" in r.output
    sft = ["sft", *base[1:], "--out", str(tmp_path / "o"), "--demo", "--variants", "1", "--max-epochs", "1"]
    for command in ([*base, "--limit", "1"], sft):
        r = runner.invoke(app, [*command, "--prereq", "fact"])  # memory's option, on BFCL multi-turn
        assert r.exit_code == 2 and "benchmark bfcl_multi_turn has no option prereq" in r.output, r.output


def test_rods_eval_reports_a_memory_benchmark_per_scenario(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    out = tmp_path / "memory.json"
    args = ["eval", "--model", str(tiny_model_dir), "--benchmark", "bfcl_memory_rec_sum", "--prereq", "fact"]
    r = CliRunner().invoke(app, [*args, "--split", "test", "--limit", "2", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(out.read_text())
    assert report["benchmark"] == "bfcl_memory_rec_sum" and report["prereq"] == "fact"
    assert report["eval/tasks"] == 2 and 0.0 <= report["eval/accuracy"] <= 1.0
    scenarios = {t.scenario for t in BfclMemory("rec_sum").seeds("test")[:2]}
    assert {k.removeprefix("eval/accuracy/") for k in report if k.startswith("eval/accuracy/")} == scenarios


def test_scripted_policy_and_demonstration_keep_every_session():
    """demonstration() keeps all sessions in order, where play() hands the policy only the current one."""
    seen: list[int] = []

    class TwoSessions:
        def __init__(self):
            self.n = 0

        def tools(self):
            return []

        def reset(self):
            return [{"role": "user", "content": "first"}]

        def step(self, message):
            self.n += 1
            if self.n == 1:
                return Step([{"role": "user", "content": "second"}], False, new_session=True)
            return Step([], True)

        def finish(self):
            pass

        def score(self):
            return EpisodeScore(1.0, True)

    inner = scripted_policy([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}])

    def policy(convo):
        seen.append(len(convo))
        return inner(convo)

    msgs = demonstration(TwoSessions(), policy)
    assert [m["content"] for m in msgs] == ["first", "a", "second", "b"]
    assert seen == [1, 1]

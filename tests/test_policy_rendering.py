"""Rendering through any chat template: the tiny template and a Qwen3-style template written for these tests
(tests/fixtures) both round-trip render -> scripted text -> parse -> execute, and a rollout's tokens equal
the whole conversation rendered in one piece; a template that cannot be used incrementally is refused with
a clear error before anything is generated; the fast path is switched on only where the probe allows it."""

from __future__ import annotations

import pytest
from policy_helpers import FIXTURE_TEMPLATE, demo_texts, load_tokenizer, replay

from rods_core.benchmarks.bfcl.environment import BfclEnvironment
from rods_core.benchmarks.toolcalls.chat import parse_assistant
from rods_core.benchmarks.toolcalls.parsing import parse_calls
from rods_core.config import EpisodeConfig, PromptConfig
from rods_core.policy.generation import ScriptedGenerator
from rods_core.policy.rendering import TemplateError, renderer_for
from rods_core.rollout import episode_benchmark, run_episodes

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
ASSISTANT_OPEN = "{{- '<|im_start|>assistant\\n' ~ (message.content or '') -}}"
# The fixture's system prompt holds every tool's full JSON doc (thousands of tokens with the tiny tokenizer).
LONG = EpisodeConfig(max_context_tokens=200_000)


@pytest.fixture(scope="module")
def toks(tiny_model_dir):
    return {"tiny": load_tokenizer(tiny_model_dir), "qwen3_style": load_tokenizer(tiny_model_dir, FIXTURE_TEMPLATE)}


def _task(seeds, category):
    return next(t for t in seeds if t.category == category and t.n_calls >= 2)


def test_fixture_renders_qwen3_style(toks, train_seeds):
    tok = toks["qwen3_style"]
    task = _task(train_seeds, "base")
    _, msgs, tools = demo_texts(tok, task)
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
    system = text.split("<|im_end|>")[0]
    lines = system.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert len(lines) == len(tools) and lines[0].startswith('{"type": "function", "function": {"name": ')
    assert system.startswith(f"<|im_start|>system\n{PromptConfig().system_prompt}\n\n")
    # A message's results are grouped into one user turn, one <tool_response> block each.
    first = next(i for i, m in enumerate(msgs) if len(m.get("tool_calls", [])) >= 2) + 1
    results = [m["content"] for m in msgs[first : first + len(msgs[first - 1]["tool_calls"])]]
    blocks = "".join(f"\n<tool_response>\n{r}\n</tool_response>" for r in results)
    assert f"<|im_start|>user{blocks}<|im_end|>\n" in text
    assert "<|im_start|>tool" not in text


@pytest.mark.parametrize("template", ["tiny", "qwen3_style"])
def test_round_trip_render_parse_execute(toks, train_seeds, template):
    """The template's rendering of the ground truth is what a policy writes; it parses back and runs."""
    tok = toks[template]
    task = _task(train_seeds, "base")
    texts, msgs, _ = demo_texts(tok, task)
    env = BfclEnvironment(task)
    results, want = [], []  # what the parsed calls return; what the ground truth returns
    for text, msg in zip(texts, [m for m in msgs if m["role"] == "assistant"], strict=True):
        parsed = parse_assistant(text)
        assert parsed.valid and parsed.is_tool_call == bool(msg.get("tool_calls"))
        if parsed.is_tool_call:
            assert [{"name": c.name, "arguments": c.kwargs} for c in parsed.calls] == [
                tc["function"] for tc in msg["tool_calls"]
            ]
            results += [env.execute_call(c).result for c in parsed.calls]
    replayed = BfclEnvironment(task)
    for turn in task.ground_truth:
        want += [replayed.execute_call(c).result for s in turn for c in parse_calls(s)]
    assert results == want and len(results) == task.n_calls


@pytest.mark.parametrize("template", ["tiny", "qwen3_style"])
@pytest.mark.parametrize("category", CATEGORIES)
def test_rollout_tokens_equal_the_whole_conversation(toks, train_seeds, template, category):
    tok = toks[template]
    task = _task(train_seeds, category)
    texts, msgs, tools = demo_texts(tok, task)
    (ep,) = run_episodes([task], replay(tok, texts), LONG, benchmark=episode_benchmark(LONG, "bfcl_multi_turn"))
    assert ep.reward == 1.0 and not ep.truncated, ep.verdicts
    seq = ep.prompt_ids + ep.completion_ids
    whole = tok(tok.apply_chat_template(msgs, tools=tools, tokenize=False), add_special_tokens=False).input_ids
    assert whole[: len(seq)] == seq
    assert tok.decode(whole[len(seq) :]) == renderer_for(tok).tail  # only the separator after the last answer
    # SFT trains on the same tokens, and its mask is the rollout's env_mask.
    enc = renderer_for(tok).encode(msgs, tools)
    assert enc.input_ids == seq and enc.assistant_masks == [0] * len(ep.prompt_ids) + ep.env_mask


def test_both_templates_get_the_fast_path_after_the_probe(toks):
    assert renderer_for(toks["tiny"]).fast and renderer_for(toks["qwen3_style"]).fast
    assert renderer_for(toks["tiny"]).tail == "" and renderer_for(toks["qwen3_style"]).tail == "\n"


def test_a_template_the_fast_path_would_get_wrong_stays_exact(tiny_model_dir, train_seeds):
    """Like Qwen2.5's template, this one adds a default system message when none is given, so rendering the
    appended messages alone would insert it mid-conversation: the probe must turn the fast path off."""
    default_system = (
        "{%- if not (messages | length > 0 and messages[0].role == 'system') and not tools -%}"
        "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}{%- endif -%}\n"
    )
    tok = load_tokenizer(tiny_model_dir, default_system + FIXTURE_TEMPLATE)
    assert not renderer_for(tok).fast
    task = _task(train_seeds, "miss_func")
    texts, msgs, tools = demo_texts(tok, task)
    (ep,) = run_episodes([task], replay(tok, texts), LONG, benchmark=episode_benchmark(LONG, "bfcl_multi_turn"))
    whole = tok(tok.apply_chat_template(msgs, tools=tools, tokenize=False), add_special_tokens=False).input_ids
    assert (
        ep.reward == 1.0 and whole[: len(ep.prompt_ids) + len(ep.completion_ids)] == ep.prompt_ids + ep.completion_ids
    )


def _never_called(ctx):
    raise AssertionError("nothing may be generated with a template that cannot give exact tokens")


@pytest.mark.parametrize(
    ("change", "error"),
    [
        # Like hybrid reasoning templates: the last answer gets an empty thinking block that later turns drop.
        (
            "{{- '<|im_start|>assistant\\n' ~ ('<think>\\n\\n</think>\\n\\n' if loop.last else '') ~ (message.content or '') -}}",
            "renders earlier messages differently once",
        ),
        # Assistant messages end with a token other than the tokenizer's eos, at which generation stops.
        ("{{- '<|im_end|>\\n' -}}\n    {%- else -%}", "does not end assistant messages with the tokenizer's eos token"),
    ],
)
def test_a_template_that_cannot_be_used_incrementally_is_refused(tiny_model_dir, train_seeds, change, error):
    if change.startswith("{{- '<|im_start|>assistant"):
        template = FIXTURE_TEMPLATE.replace(ASSISTANT_OPEN, change)
    else:  # the assistant branch's closing: end it with the pad token instead
        head, tail = FIXTURE_TEMPLATE.split(ASSISTANT_OPEN)
        template = head + ASSISTANT_OPEN + tail.replace(change, "{{- '<|endoftext|>\\n' -}}\n    {%- else -%}", 1)
    assert template != FIXTURE_TEMPLATE
    tok = load_tokenizer(tiny_model_dir, template)
    with pytest.raises(TemplateError, match=error):
        renderer_for(tok)
    with pytest.raises(TemplateError, match=error):
        run_episodes(
            [_task(train_seeds, "base")],
            ScriptedGenerator(tok, _never_called),
            LONG,
            benchmark=episode_benchmark(LONG, "bfcl_multi_turn"),
        )


def test_a_template_that_refuses_tool_messages_says_so(tiny_model_dir):
    refusing = (
        "{%- for m in messages if m.role == 'tool' -%}{{ raise_exception('tool role not supported') }}{%- endfor -%}"
    )
    tok = load_tokenizer(tiny_model_dir, refusing + FIXTURE_TEMPLATE)
    with pytest.raises(TemplateError, match="refused a conversation .*tool role not supported"):
        renderer_for(tok)


def test_an_old_format_model_folder_is_refused(tiny_model_dir, tmp_path):
    import json
    import shutil

    from rods_core.policy.tiny import MODEL_CARD, ModelFolderError, load_policy

    old = tmp_path / "old"
    shutil.copytree(tiny_model_dir, old)
    card = json.loads((old / MODEL_CARD).read_text())
    card.pop("chat_format")
    (old / MODEL_CARD).write_text(json.dumps(card))
    with pytest.raises(ModelFolderError, match="older chat format .*rebuild it"):
        load_policy(old)

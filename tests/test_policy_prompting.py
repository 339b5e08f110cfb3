"""The chat format: tools and calls render through the tokenizer's template, parse back, and tokenize
identically whole or message by message; miss_func tools appear exactly at their turn."""

from __future__ import annotations

import pytest

from rods_core.envs.bfcl import BfclEnvironment
from rods_core.envs.parsing import parse_calls
from rods_core.policy.prompting import (
    ADDED_FUNCTIONS_NOTE,
    PromptConfig,
    compact_docs,
    demonstration,
    initial_messages,
    parse_assistant,
    tool_message,
    turn_messages,
)


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(tiny_model_dir))


def _task(seeds, category, pred=lambda t: True):
    return next(t for t in seeds if t.category == category and pred(t))


def test_compact_docs_mark_optional_parameters():
    line = compact_docs(["cd", "ls", "tail"])
    assert line == "GorillaFileSystem: cd(folder) ls(a?) tail(file_name, lines?)"


def test_template_renders_tool_calls_that_parse_back_to_the_ground_truth(tok, train_seeds):
    task = _task(train_seeds, "base", lambda t: len(t.ground_truth[0]) >= 2)
    msgs = demonstration(task)
    text = tok.apply_chat_template(msgs, tokenize=False)
    first_call_msg = next(m for m in msgs if m.get("tool_calls"))
    rendered = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    parsed = parse_assistant(rendered)
    assert parsed.valid and parsed.is_tool_call
    expected = [c for s in task.ground_truth[0] for c in parse_calls(s)]
    assert [c.name for c in parsed.calls] == [c.name for c in expected]
    assert [c.kwargs for c in parsed.calls] == [tc["function"]["arguments"] for tc in first_call_msg["tool_calls"]]


def test_template_renders_tools_through_apply_chat_template(tok):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "cd",
                "description": "change dir",
                "parameters": {"type": "object", "properties": {"folder": {"type": "string"}}},
            },
        }
    ]
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "cd", "arguments": {"folder": "x"}}}],
    }
    text = tok.apply_chat_template([{"role": "user", "content": "go"}, call], tools=tools, tokenize=False)
    assert text.startswith('<|im_start|>system\n# Tools\n{"name": "cd"')
    assert '<tool_call>[cd(folder="x")]</tool_call><|im_end|>' in text
    gen = tok.apply_chat_template([{"role": "user", "content": "go"}], tokenize=False, add_generation_prompt=True)
    assert gen.endswith("<|im_start|>assistant\n")


def test_assistant_mask_covers_assistant_content_and_stop_token_only(tok, train_seeds):
    from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

    assert has_generation_markers(tok.chat_template) and is_chat_template_stop_token_trained(tok)
    msgs = demonstration(_task(train_seeds, "base"))
    enc = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    masked = tok.decode([i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m])
    assert "<|im_start|>" not in masked and "Done.<|im_end|>" in masked
    n_answers = sum(m["role"] == "assistant" for m in msgs)
    assert masked.count("<|im_end|>") == n_answers


def test_whole_and_piecewise_tokenization_agree(tok, train_seeds):
    """Rollouts append messages one at a time; SFT tokenizes whole conversations: tokens must match."""
    for cat in ("base", "miss_func", "long_context"):
        msgs = demonstration(_task(train_seeds, cat))
        whole = tok.apply_chat_template(msgs, tokenize=True, return_dict=True)["input_ids"]
        pieces = []
        for m in msgs:
            pieces += tok(tok.apply_chat_template([m], tokenize=False), add_special_tokens=False).input_ids
        assert pieces == list(whole)


def test_miss_func_tools_appear_at_their_turn(train_seeds):
    task = _task(train_seeds, "miss_func")
    ((turn, fns),) = task.missed_function.items()
    env = BfclEnvironment(task)
    system = initial_messages(task, env, PromptConfig())[0]["content"]
    for fn in fns:
        assert f" {fn}(" not in system
    for t in range(task.n_turns):
        text = "\n".join(m["content"] for m in turn_messages(task, t, PromptConfig()))
        assert all(f"{fn}(" in text for fn in fns) == (t == turn)
        assert (ADDED_FUNCTIONS_NOTE in text) == (t == turn)
    demo = demonstration(task)
    note_idx = next(i for i, m in enumerate(demo) if ADDED_FUNCTIONS_NOTE in (m.get("content") or ""))
    used_before = [tc["function"]["name"] for m in demo[:note_idx] for tc in m.get("tool_calls", [])]
    assert not set(fns) & set(used_before)


def test_json_docs_mode_lists_full_docs(train_seeds):
    task = _task(train_seeds, "base")
    content = initial_messages(task, BfclEnvironment(task), PromptConfig(docs_mode="json"))[0]["content"]
    assert '"description"' in content and '"parameters"' in content


def test_tool_results_are_cut_for_tiny_models():
    assert len(tool_message("x" * 500, PromptConfig(result_chars=120))["content"]) == 120
    assert tool_message("x" * 500, PromptConfig(result_chars=None))["content"] == "x" * 500


@pytest.mark.parametrize(
    ("text", "valid", "is_call", "n"),
    [
        ("Done.", True, False, 0),
        ('<tool_call>[cd(folder="a"), ls()]</tool_call>', True, True, 2),
        ('<tool_call>[cd(folder="a")]', True, True, 1),  # cut before the closing tag: still readable
        ('<tool_call>[cd(folder="a")', False, True, 0),  # cut inside the list
        ("<tool_call>[cd(folder=__import__('os'))]</tool_call>", False, True, 0),
        ("<tool_call>[]</tool_call>", False, True, 0),
        ('[cd(folder="a")]', False, True, 0),  # calls without the markup are a format error
    ],
)
def test_parse_assistant(text, valid, is_call, n):
    p = parse_assistant(text)
    assert (p.valid, p.is_tool_call, len(p.calls)) == (valid, is_call, n)

"""The chat format: BFCL tools reach the template as JSON schemas, the tiny template shows them compactly and
renders Qwen3-style calls that parse back; SFT masks cover exactly the assistant's tokens; miss_func tools
appear exactly at their turn; hostile or malformed calls are refused with a reason."""

from __future__ import annotations

import json

import pytest
from policy_helpers import load_tokenizer

from rods_core.benchmarks.bfcl.benchmark import BfclMultiTurn, call_to_tool_call
from rods_core.benchmarks.bfcl.environment import function_docs
from rods_core.benchmarks.bfcl.prompting import (
    ADDED_FUNCTIONS_NOTE,
    compact_docs,
    initial_messages,
    tool_schemas,
    turn_messages,
)
from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_core.benchmarks.protocols import demonstration
from rods_core.benchmarks.toolcalls.chat import parse_assistant, tool_message
from rods_core.benchmarks.toolcalls.parsing import parse_calls
from rods_core.config import PromptConfig
from rods_core.policy.rendering import renderer_for


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return load_tokenizer(tiny_model_dir)


def _task(seeds, category, pred=lambda t: True):
    return next(t for t in seeds if t.category == category and pred(t))


def _demo(task, cfg: PromptConfig | None = None) -> tuple[list[dict], list[dict]]:
    """(the reference policy's whole conversation, the episode's tools), as SFT renders them."""
    bench = BfclMultiTurn(cfg)
    env = bench.environment(task, None)  # BFCL multi-turn writes nothing
    return demonstration(env, bench.reference_policy(task)), env.tools()


def test_tool_schemas_are_json_schema():
    schemas = tool_schemas(list(function_docs()))
    assert len(schemas) == 128 and all(s["type"] == "function" for s in schemas)
    types = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                types.add(node["type"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for s in schemas:
        f = s["function"]
        assert set(f) == {"name", "description", "parameters"}  # BFCL's `response` is not shown
        assert f["parameters"]["type"] == "object" and set(f["parameters"]["required"]) <= set(
            f["parameters"]["properties"]
        )
        walk(f["parameters"])
    assert types <= {"object", "string", "integer", "number", "boolean", "array"}  # no BFCL `dict`/`float`


def test_tiny_template_shows_tools_compactly_as_compact_docs(tok):
    names = ["cd", "ls", "tail", "pwd"]
    assert compact_docs(names) == "cd(folder) ls(a?) tail(file_name, lines?) pwd()"
    text = tok.apply_chat_template([{"role": "user", "content": "go"}], tools=tool_schemas(names), tokenize=False)
    assert text.startswith(f"<|im_start|>system\nTools: {compact_docs(names)}<|im_end|><|im_start|>user\ngo")
    with_system = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}],
        tools=tool_schemas(names),
        tokenize=False,
    )
    assert with_system.startswith(f"<|im_start|>system\nBe brief.\nTools: {compact_docs(names)}<|im_end|>")


def test_tiny_template_renders_qwen3_tool_calls_that_parse_back(tok, train_seeds):
    task = _task(train_seeds, "base", lambda t: len(t.ground_truth[0]) >= 2)
    msgs, tools = _demo(task)
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
    first_call_msg = next(m for m in msgs if m.get("tool_calls"))
    rendered = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    blocks = rendered.split("\n")
    assert rendered.count("<tool_call>\n{") == len(first_call_msg["tool_calls"]) >= 2  # one JSON call per block
    assert json.loads(blocks[1]) == {k: first_call_msg["tool_calls"][0]["function"][k] for k in ("name", "arguments")}
    parsed = parse_assistant(rendered)
    assert parsed.valid and parsed.is_tool_call
    expected = [c for s in task.ground_truth[0] for c in parse_calls(s)]
    assert [c.name for c in parsed.calls] == [c.name for c in expected]
    assert [c.kwargs for c in parsed.calls] == [tc["function"]["arguments"] for tc in first_call_msg["tool_calls"]]


def test_arguments_given_as_a_json_string_render_the_same(tok):
    def call(arguments):
        fn = {"name": "cd", "arguments": arguments}
        return [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": fn}]}]

    as_dict = tok.apply_chat_template(call({"folder": "x"}), tokenize=False)
    assert as_dict == tok.apply_chat_template(call('{"folder": "x"}'), tokenize=False)
    assert '<tool_call>\n{"name": "cd", "arguments": {"folder": "x"}}\n</tool_call><|im_end|>' in as_dict


def test_assistant_mask_covers_assistant_content_and_stop_token_only(tok, train_seeds):
    from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

    assert has_generation_markers(tok.chat_template) and is_chat_template_stop_token_trained(tok)
    task = _task(train_seeds, "base")
    msgs, tools = _demo(task)
    enc = renderer_for(tok).encode(msgs, tools)
    masked = tok.decode([i for i, m in zip(enc.input_ids, enc.assistant_masks, strict=True) if m])
    assert "<|im_start|>" not in masked and "Done.<|im_end|>" in masked
    assert masked.count("<|im_end|>") == sum(m["role"] == "assistant" for m in msgs)
    # The template's {% generation %} markers (TRL's assistant_only_loss) mark exactly the same tokens.
    marked = tok.apply_chat_template(
        msgs, tools=tools, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assert list(marked["input_ids"]) == enc.input_ids and list(marked["assistant_masks"]) == enc.assistant_masks


def test_whole_and_piecewise_tokenization_agree(tok, train_seeds):
    """Rollouts and SFT build tokens message by message; they must equal the whole conversation's."""
    for cat in ("base", "miss_func", "long_context"):
        task = _task(train_seeds, cat)
        msgs, tools = _demo(task)
        whole = tok.apply_chat_template(msgs, tools=tools, tokenize=True, return_dict=True)["input_ids"]
        assert renderer_for(tok).encode(msgs, tools).input_ids == list(whole)


@pytest.mark.parametrize("docs_mode", ["compact", "json"])
def test_miss_func_tools_appear_at_their_turn(train_seeds, docs_mode):
    cfg = PromptConfig(docs_mode=docs_mode)
    task = _task(train_seeds, "miss_func")
    ((turn, fns),) = task.missed_function.items()
    tools = [s["function"]["name"] for s in _demo(task)[1]]
    assert not set(fns) & set(tools)  # not in the template's tools: they arrive later
    for t in range(task.n_turns):
        text = "\n".join(m["content"] for m in turn_messages(task, t, cfg))
        listed = all((f"{fn}(" if docs_mode == "compact" else f'"name": "{fn}"') in text for fn in fns)
        assert listed == (t == turn) and (ADDED_FUNCTIONS_NOTE in text) == (t == turn)
    note = next(m for m in turn_messages(task, turn, cfg) if ADDED_FUNCTIONS_NOTE in m["content"])
    listing = note["content"].split("\n", 1)[1]
    if docs_mode == "json":  # one tool schema per line, the objects the template gets as `tools`
        assert [json.loads(line) for line in listing.splitlines()] == tool_schemas(fns)
    else:
        assert listing == compact_docs(fns)
    demo = _demo(task, cfg)[0]
    note_idx = next(i for i, m in enumerate(demo) if ADDED_FUNCTIONS_NOTE in (m.get("content") or ""))
    used_before = [tc["function"]["name"] for m in demo[:note_idx] for tc in m.get("tool_calls", [])]
    assert not set(fns) & set(used_before)


def test_system_message_is_short_or_absent(train_seeds):
    task = _task(train_seeds, "base")
    msgs = initial_messages(task, PromptConfig())
    assert msgs[0]["role"] == "system" and "Tools" not in msgs[0]["content"]  # the template adds the tools
    assert [m["role"] for m in initial_messages(task, PromptConfig(system_prompt=""))] == ["user"]
    assert _demo(task, PromptConfig(system_prompt=""))[0][0]["role"] == "user"


def test_tool_results_are_cut_for_tiny_models():
    assert len(tool_message("x" * 500, 120)["content"]) == 120
    assert tool_message("x" * 500, None)["content"] == "x" * 500


CD = '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>'
LS = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'


@pytest.mark.parametrize(
    ("text", "valid", "is_call", "n"),
    [
        ("Done.", True, False, 0),
        (CD, True, True, 1),
        (f"{CD}\n{LS}", True, True, 2),  # one block per call (Qwen3)
        (f"Sure.\n{CD}", True, True, 1),  # text before the calls
        ('<tool_call>\n{"name": "cd", "arguments": "{\\"folder\\": \\"a\\"}"}\n</tool_call>', True, True, 1),
        ('<tool_call>[cd(folder="a"), ls()]</tool_call>', True, True, 2),  # a Python call list still reads
        ('<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}', True, True, 1),  # cut before the closing tag
        ('<tool_call>\n{"name": "cd", "arguments": {"folder": "a"', False, True, 0),  # cut inside the JSON
        ('<tool_call>\n{"name": "__import__", "arguments": {}}\n</tool_call>', False, True, 0),
        ('<tool_call>\n{"name": "cd", "arguments": [1]}\n</tool_call>', False, True, 0),
        ("<tool_call>[cd(folder=__import__('os'))]</tool_call>", False, True, 0),
        ("<tool_call>[]</tool_call>", False, True, 0),
        ('[cd(folder="a")]', True, True, 1),  # a message that is nothing but calls (BFCL's prompt format)
        ('{"name": "cd", "parameters": {"folder": "a"}}', True, True, 1),  # Llama 3.x's JSON calls
        ('[cd(folder="a"), ', False, True, 0),  # starts like calls without the markup: a format error
        ('{"name": "cd", "parameters": {"folder": x}}', False, True, 0),
        ("[Done]", True, False, 0),
    ],
)
def test_parse_assistant(text, valid, is_call, n):
    p = parse_assistant(text)
    assert (p.valid, p.is_tool_call, len(p.calls)) == (valid, is_call, n), p.error


def test_a_demonstration_shows_each_call_as_the_ground_truth_wrote_it():
    # TwitterAPI.mention appends to its list argument when executed: the message must not share that list.
    task = next(t for s in ("train", "test") for t in load_seeds(s) if t.id == "multi_turn_base_90")
    shown = [c for m in _demo(task)[0] if m.get("tool_calls") for c in m["tool_calls"]]
    truth = [call_to_tool_call(c) for turn in task.ground_truth for s in turn for c in parse_calls(s)]
    assert any(c["function"]["name"] == "mention" for c in truth)
    assert shown == truth

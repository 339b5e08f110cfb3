"""The tool-call chat format every benchmark's policy speaks: Qwen3-style tool calls inside `<tool_call>` blocks,
tool results in the `tool` role (cut to `result_chars` for tiny models), and the tiny model's chat template.

Shared by the benchmarks that prompt a chat model with tools (BFCL multi-turn, memory) and the policy side that
reads their messages back (rollouts count valid messages and calls as `parse_assistant` reads them). Departure
from BFCL: BFCL's tool results are never cut (the cut keeps tiny models' contexts short and is configurable).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rods_core.benchmarks.toolcalls.parsing import Call, CallParseError, parse_calls

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
# Recorded in a tiny model's card: a model trained on another format (e.g. Python-list calls) must be
# rebuilt, not silently prompted in a format it never saw.
CHAT_FORMAT = "qwen3-json-tool-calls/v1"

# The tiny model's template. ChatML-like, with no separator between messages so a conversation rendered in
# one piece and rendered message by message tokenize the same. Tools are shown compactly (one
# `name(req, opt?)` per function) to keep contexts short; calls follow Qwen3's convention. Assistant
# content and its end-of-turn token sit inside {% generation %} so TRL's assistant_only_loss masks the rest.
CHAT_TEMPLATE = (
    "{%- set nl = '\\n' -%}"
    "{%- set has_system = messages | length > 0 and messages[0].role == 'system' -%}"
    "{%- if has_system or tools -%}"
    "<|im_start|>system{{ nl }}"
    "{%- if has_system -%}{{ messages[0].content }}{{ nl if tools }}{%- endif -%}"
    "{%- if tools -%}Tools:"
    "{%- for tool in tools -%}{%- set f = tool.function if tool.function is defined else tool -%}"
    "{%- set p = f.parameters if f.parameters is defined else {} -%}"
    "{{ ' ' ~ f.name }}("
    "{%- for name in (p.properties or {}) -%}"
    "{{ name }}{{ '' if name in (p.required or []) else '?' }}{{ ', ' if not loop.last }}"
    "{%- endfor -%})"
    "{%- endfor -%}"
    "{%- endif -%}<|im_end|>"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and message.role == 'system' -%}"
    "{%- elif message.role == 'assistant' -%}"
    "<|im_start|>assistant{{ nl }}{%- generation -%}{{ message.content or '' }}"
    "{%- for tc in (message.tool_calls or []) -%}{%- set f = tc.function if tc.function is defined else tc -%}"
    "{{ nl if (message.content or not loop.first) }}<tool_call>{{ nl }}"
    '{"name": {{ f.name | tojson }}, "arguments": '
    "{{ f.arguments if f.arguments is string else f.arguments | tojson }}}{{ nl }}</tool_call>"
    "{%- endfor -%}<|im_end|>{%- endgeneration -%}"
    "{%- else -%}"
    "<|im_start|>{{ message.role }}{{ nl }}{{ message.content or '' }}<|im_end|>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ nl }}{%- endif -%}"
)

_TOOL_CALL_RE = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.S)


def tool_message(result: str, result_chars: int | None) -> dict:
    """A tool result as the policy reads it: cut to `result_chars` characters (PromptConfig.result_chars; None:
    whole), a cut result ending in "..."."""
    content = result if result_chars is None or len(result) <= result_chars else result[: result_chars - 3] + "..."
    return {"role": "tool", "content": content}


# ----- reading assistant messages ---------------------------------------------------------------
class ParsedMessage(BaseModel):
    """An assistant message read back: its calls, or why they did not parse, or a plain answer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    text: str
    calls: list[Any] = Field(default_factory=list, description="parsed Call objects")
    is_tool_call: bool = Field(False, description="the message tries to call tools (it may still fail to parse)")
    error: str | None = None

    @property
    def valid(self) -> bool:
        """Parseable tool calls, or a plain answer."""
        return self.error is None


def _read_calls(text: str, payloads: list[str]) -> ParsedMessage:
    calls: list[Call] = []
    for payload in payloads:
        try:
            calls.extend(parse_calls(payload))
        except CallParseError as e:
            return ParsedMessage(text=text, is_tool_call=True, error=str(e))
    if not calls:
        return ParsedMessage(text=text, is_tool_call=True, error="empty tool call list")
    return ParsedMessage(text=text, calls=calls, is_tool_call=True)


def parse_assistant(text: str) -> ParsedMessage:
    """Read a generated assistant message (stop token already removed). Never executes anything.

    Each `<tool_call>` block holds one JSON call (Qwen3) or a list of calls; a block cut before its closing
    tag is read as it stands. Without the markup, a message that is nothing but calls (Llama 3.x answers
    with a bare `{"name": ..., "parameters": {...}}`, Llama 3.2 and BFCL's prompt format with a Python
    list) is read as calls too; one that starts like calls but does not parse is a format error, not an
    answer, so a broken call never passes silently.
    """
    blocks = _TOOL_CALL_RE.findall(text)
    if blocks:
        return _read_calls(text, blocks)
    bare = text.strip()
    if (bare.startswith("[") and "(" in bare) or (bare.startswith(("{", "[")) and '"name"' in bare):
        return _read_calls(text, [bare])
    return ParsedMessage(text=text)


# ----- listing tools -----------------------------------------------------------------------------
def compact_tools(schemas: list[dict]) -> str:
    """`f(req, opt?) g()`: tool schemas as CHAT_TEMPLATE renders them (a test holds them equal)."""
    out = []
    for s in schemas:
        f = s["function"]
        params = f.get("parameters", {})
        required = params.get("required", [])
        out.append(
            f"{f['name']}({', '.join(p + ('' if p in required else '?') for p in params.get('properties', {}))})"
        )
    return " ".join(out)


def json_tools(schemas: list[dict]) -> str:
    """One tool schema per line, as Qwen-style templates list `tools`."""
    return "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)

"""The chat format of a policy: BFCL tools as JSON schemas through the model's own chat template, Qwen3-style
tool calls, tool results in the `tool` role.

One format serves demonstrations (SFT), rollouts (GRPO, eval) and any HF instruct model folder:
- tools: the functions available at turn 0, as `{"type": "function", "function": {name, description,
  parameters}}` schemas passed to `apply_chat_template(tools=...)`; the template decides how they read
  (the tiny model's template, CHAT_TEMPLATE below, shows them compactly: `cd(folder) ls(a?)`, `?` = optional);
- system: a short instruction (PromptConfig.system_prompt; empty = no system message, for templates
  that bring their own);
- assistant: each call one `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` block (Qwen3's
  convention), and a short plain answer ("Done.") that closes each user turn;
- tool: one message per executed call, its result cut to `result_chars` characters for tiny models;
- miss_func: functions held back arrive as a user note listing them (see `turn_messages` for why).
Departures from BFCL's prompting: BFCL's tool results are never cut (the cut keeps tiny models' contexts
short and is configurable); BFCL's function-calling handlers add held-back functions to `tools`, where a
note keeps the rendered conversation a growing prefix.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rods_core.benchmarks.bfcl.environment import function_docs, json_schema
from rods_core.benchmarks.bfcl.parsing import Call, CallParseError, parse_calls
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.config import PromptConfig

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
ADDED_FUNCTIONS_NOTE = "I have updated some more functions you can choose from. What about now?"  # BFCL's words
DONE_ANSWER = "Done."
NOTHING_TO_DO_ANSWER = "I cannot do this with the information and tools I have."
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
# BFCL's parameter types that are not JSON-schema types (BFCL's own FC handlers map them the same way).


# ----- tool docs ---------------------------------------------------------------------------------
def tool_schemas(names: list[str]) -> list[dict]:
    """The functions as OpenAI-style tool schemas, the form `apply_chat_template(tools=...)` expects."""
    docs = function_docs()
    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": docs[n].doc.get("description", ""),
                "parameters": json_schema(docs[n].doc.get("parameters", {"type": "object", "properties": {}})),
            },
        }
        for n in names
    ]


def compact_docs(names: list[str]) -> str:
    """`f(req, opt?) g()`: the functions as CHAT_TEMPLATE renders its tools (a test holds them equal)."""
    docs = function_docs()
    return " ".join(
        f"{n}({', '.join(p + ('' if p in docs[n].required else '?') for p in docs[n].params)})" for n in names
    )


def json_docs(names: list[str]) -> str:
    """One tool schema per line, as Qwen-style templates list `tools`."""
    return "\n".join(json.dumps(s, ensure_ascii=False) for s in tool_schemas(names))


def render_docs(names: list[str], cfg: PromptConfig) -> str:
    return compact_docs(names) if cfg.docs_mode == "compact" else json_docs(names)


def turn_messages(task: Task, turn: int, cfg: PromptConfig) -> list[dict]:
    """What the user side says at the start of a turn: the arrival note of miss_func tools, then the user's words.

    Functions that arrive in a later turn are listed in a user note (BFCL's words, then the functions in
    `cfg.docs_mode`), not added to `tools=`: a template renders `tools` into the system message, so a
    changed tool list would rewrite tokens the model already consumed (no token-exact rollout, no KV-cache
    reuse). BFCL's own prompting handlers list added functions in the user message the same way.
    """
    msgs = []
    arriving = task.missed_function.get(turn, [])
    if arriving:
        msgs.append({"role": "user", "content": f"{ADDED_FUNCTIONS_NOTE}\n{render_docs(arriving, cfg)}"})
    text = task.user_texts[turn]
    if text or not msgs:
        msgs.append({"role": "user", "content": text})
    return msgs


def tool_message(result: str, cfg: PromptConfig) -> dict:
    cut = cfg.result_chars
    content = result if cut is None or len(result) <= cut else result[: cut - 3] + "..."
    return {"role": "tool", "content": content}


def system_messages(cfg: PromptConfig) -> list[dict]:
    """The system message, or none when `system_prompt` is empty (the template may bring its own)."""
    return [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []


def initial_messages(task: Task, cfg: PromptConfig) -> list[dict]:
    """System + first user turn: the prompt of an episode; the tools go to the template apart."""
    return [*system_messages(cfg), *turn_messages(task, 0, cfg)]


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

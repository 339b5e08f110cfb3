"""The chat format of a policy: tools in the system message, calls as BFCL Python lists, tool results.

One format serves demonstrations (SFT), rollouts (GRPO, eval) and the chat template that TRL renders:
- system: a short instruction and the task's tools, as BFCL's JSON docs or, for tiny models, a compact
  line per class (`GorillaFileSystem: cd(folder) ls(a?) ...`, `?` = optional);
- assistant: calls as one Python list inside the template's markup, `<tool_call>[cd(folder="x"), ls()]</tool_call>`,
  and a short plain answer ("Done.") that closes each user turn;
- tool: one message per executed call, its result cut to `result_chars` characters for tiny models;
- miss_func: functions held back arrive as a user note that lists them, in the turn they arrive (BFCL's
  own wording), so the tool list the model sees is re-rendered exactly when it changes.
Departure from BFCL's prompting: BFCL puts every call of a turn in one assistant message too, but its
tool results are never cut; the cut keeps tiny models' contexts short and is configurable.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rods_core.envs.bfcl import BfclEnvironment, _signature, function_docs
from rods_core.envs.parsing import Call, CallParseError, parse_calls
from rods_core.tasks import Task

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
ADDED_FUNCTIONS_NOTE = "I have updated some more functions you can choose from. What about now?"  # BFCL's words
DONE_ANSWER = "Done."
NOTHING_TO_DO_ANSWER = "I cannot do this with the information and tools I have."

# ChatML-like, with no separator between messages so that a conversation rendered in one piece and the
# same conversation rendered message by message (as rollouts append them) give identical tokens.
# Assistant content and its end-of-turn token sit inside {% generation %} so TRL's
# assistant_only_loss masks everything else. Tool-call arguments must be a dict (not a JSON string).
CHAT_TEMPLATE = (
    "{%- set nl = '\\n' -%}"
    "{%- if tools and (messages | length == 0 or messages[0].role != 'system') -%}"
    "<|im_start|>system{{ nl }}# Tools"
    "{%- for tool in tools -%}{{ nl }}{{ (tool.function if tool.function is defined else tool) | tojson }}{%- endfor -%}"
    "<|im_end|>"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'assistant' -%}"
    "<|im_start|>assistant{{ nl }}{%- generation -%}{{ message.content or '' }}"
    "{%- if message.tool_calls -%}<tool_call>["
    "{%- for tc in message.tool_calls -%}{%- set f = tc.function if tc.function is defined else tc -%}"
    "{{ f.name }}("
    "{%- for k, v in f.arguments.items() -%}{{ k }}={{ v | tojson }}{{ ', ' if not loop.last }}{%- endfor -%}"
    "){{ ', ' if not loop.last }}"
    "{%- endfor -%}]</tool_call>"
    "{%- endif -%}<|im_end|>{%- endgeneration -%}"
    "{%- else -%}"
    "<|im_start|>{{ message.role }}{{ nl }}{{ message.content or '' }}"
    "{%- if loop.first and message.role == 'system' and tools -%}{{ nl }}# Tools"
    "{%- for tool in tools -%}{{ nl }}{{ (tool.function if tool.function is defined else tool) | tojson }}{%- endfor -%}"
    "{%- endif -%}<|im_end|>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ nl }}{%- endif -%}"
)

_TOOL_CALL_RE = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.S)


class PromptConfig(BaseModel):
    """How tasks are shown to a policy; stored in a model's rods_model.json so every stage agrees."""

    model_config = ConfigDict(extra="forbid")
    docs_mode: Literal["compact", "json"] = Field(
        "compact", description="compact: one line per class with names and parameters; json: BFCL's full docs"
    )
    result_chars: int | None = Field(
        120, ge=8, description="cut each tool result to this many characters (None keeps it whole)"
    )
    system_prompt: str = Field(
        "You are a tool-use agent. Call tools as <tool_call>[f(a=1), g()]</tool_call>; "
        "after the results, answer briefly.",
        description="instruction placed before the tool list",
    )


# ----- tool docs ---------------------------------------------------------------------------------
def compact_docs(names: list[str]) -> str:
    """One line per class: `Cls: f(req, opt?) g()`, in the docs' order."""
    docs, lines = function_docs(), {}
    for n in names:
        d = docs[n]
        req = set(d.required)
        params = " ".join(f"{p}{'' if p in req else '?'}" for p in d.params)
        lines.setdefault(d.cls, []).append(f"{n}({params.replace(' ', ', ')})")
    return "\n".join(f"{cls}: {' '.join(fns)}" for cls, fns in lines.items())


def json_docs(names: list[str]) -> str:
    import json

    docs = function_docs()
    return "\n".join(json.dumps({k: v for k, v in docs[n].doc.items() if k != "response"}) for n in names)


def render_docs(names: list[str], cfg: PromptConfig) -> str:
    return compact_docs(names) if cfg.docs_mode == "compact" else json_docs(names)


def system_message(env: BfclEnvironment, cfg: PromptConfig) -> dict:
    """The system message with the tools available at turn 0."""
    return {"role": "system", "content": f"{cfg.system_prompt}\nTools:\n{render_docs(env.available_functions(0), cfg)}"}


def turn_messages(task: Task, turn: int, cfg: PromptConfig) -> list[dict]:
    """What the user side says at the start of a turn: the arrival note of miss_func tools, then the user's words."""
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


def initial_messages(task: Task, env: BfclEnvironment, cfg: PromptConfig) -> list[dict]:
    """System + first user turn: the prompt of an episode."""
    return [system_message(env, cfg), *turn_messages(task, 0, cfg)]


# ----- tool calls --------------------------------------------------------------------------------
def call_to_tool_call(call: Call) -> dict:
    """A parsed call as an OpenAI-style tool call with named arguments (positional ones bound by name)."""
    doc = function_docs().get(call.name)
    kwargs = dict(call.kwargs)
    if call.args:
        if doc is None:
            raise ValueError(f"{call.name}: positional arguments of an unknown function cannot be named")
        kwargs = dict(_signature(doc.cls, call.name).bind(*call.args, **call.kwargs).arguments)
    return {"type": "function", "function": {"name": call.name, "arguments": kwargs}}


def format_tool_calls(tool_calls: list[dict]) -> str:
    """The text the chat template renders for an assistant message's tool calls (kept in step with it)."""
    import json

    parts = [
        f"{c['function']['name']}("
        + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in c["function"]["arguments"].items())
        + ")"
        for c in tool_calls
    ]
    return f"{TOOL_CALL_OPEN}[{', '.join(parts)}]{TOOL_CALL_CLOSE}"


def format_calls(calls: list[Call]) -> str:
    return format_tool_calls([call_to_tool_call(c) for c in calls])


class ParsedMessage(BaseModel):
    """An assistant message read back: its calls, or why they did not parse, or a plain answer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    text: str
    calls: list[Any] = Field(default_factory=list, description="parsed Call objects")
    has_markup: bool = False
    error: str | None = None

    @property
    def is_tool_call(self) -> bool:
        return self.has_markup

    @property
    def valid(self) -> bool:
        """Parseable tool calls, or a plain answer."""
        return self.error is None


def parse_assistant(text: str) -> ParsedMessage:
    """Read a generated assistant message (special tokens already stripped). Never executes anything."""
    blocks = _TOOL_CALL_RE.findall(text)
    if not blocks:
        # A bare call list without the markup is a format error, not an answer: it would pass silently.
        bare = text.strip()
        if bare.startswith("[") and "(" in bare:
            return ParsedMessage(text=text, has_markup=True, error="tool calls outside <tool_call> markup")
        return ParsedMessage(text=text)
    calls: list[Call] = []
    for block in blocks:
        try:
            calls.extend(parse_calls(block))
        except CallParseError as e:
            return ParsedMessage(text=text, has_markup=True, error=str(e))
    if not calls:
        return ParsedMessage(text=text, has_markup=True, error="empty tool call list")
    return ParsedMessage(text=text, calls=calls, has_markup=True)


# ----- demonstrations ----------------------------------------------------------------------------
def demonstration(task: Task, cfg: PromptConfig | None = None) -> list[dict]:
    """The task's ground truth as a full conversation, tool results from a real environment run.

    Per turn: the user side, one assistant message with the turn's calls (if any), their results, and a
    short answer. Turns with an empty ground truth (miss_param asks, miss_func's missing tool) get the
    plain refusal answer.
    """
    cfg = cfg or PromptConfig()
    env = BfclEnvironment(task)
    msgs = [system_message(env, cfg)]
    for t in range(task.n_turns):
        env.start_turn(t)
        msgs.extend(turn_messages(task, t, cfg))
        calls = [c for s in task.ground_truth[t] for c in parse_calls(s)]
        if calls:
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call_to_tool_call(c) for c in calls]})
            msgs.extend(tool_message(env.execute_call(c).result, cfg) for c in calls)
        msgs.append({"role": "assistant", "content": DONE_ANSWER if calls else NOTHING_TO_DO_ANSWER})
    return msgs

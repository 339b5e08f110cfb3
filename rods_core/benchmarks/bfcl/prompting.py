"""BFCL multi-turn's messages in the shared tool-call chat format (rods_core.benchmarks.toolcalls.chat): its
tools as JSON schemas through the model's own chat template, its system and user turns, its closing answers.

- tools: the functions available at turn 0, as `{"type": "function", "function": {name, description,
  parameters}}` schemas passed to `apply_chat_template(tools=...)`; the template decides how they read
  (the tiny model's template, CHAT_TEMPLATE, shows them compactly: `cd(folder) ls(a?)`, `?` = optional);
- system: a short instruction (PromptConfig.system_prompt; empty = no system message, for templates
  that bring their own);
- assistant: its calls as the chat format writes them, and a short plain answer ("Done.") that closes each
  user turn;
- miss_func: functions held back arrive as a user note listing them (see `turn_messages` for why).
Departure from BFCL's prompting: BFCL's function-calling handlers add held-back functions to `tools`, where a
note keeps the rendered conversation a growing prefix.
"""

from __future__ import annotations

from rods_core.benchmarks.bfcl.environment import function_docs
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.toolcalls.chat import compact_tools, json_tools
from rods_core.benchmarks.toolcalls.dispatch import json_schema
from rods_core.config import PromptConfig

ADDED_FUNCTIONS_NOTE = "I have updated some more functions you can choose from. What about now?"  # BFCL's words
DONE_ANSWER = "Done."
NOTHING_TO_DO_ANSWER = "I cannot do this with the information and tools I have."


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
    """`f(req, opt?) g()`: the functions as CHAT_TEMPLATE renders its tools."""
    return compact_tools(tool_schemas(names))


def json_docs(names: list[str]) -> str:
    """One tool schema per line, as Qwen-style templates list `tools`."""
    return json_tools(tool_schemas(names))


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


def system_messages(cfg: PromptConfig) -> list[dict]:
    """The system message, or none when `system_prompt` is empty (the template may bring its own)."""
    return [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []


def initial_messages(task: Task, cfg: PromptConfig) -> list[dict]:
    """System + first user turn: the prompt of an episode; the tools go to the template apart."""
    return [*system_messages(cfg), *turn_messages(task, 0, cfg)]

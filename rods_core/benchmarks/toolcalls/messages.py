"""Reading an assistant message into tool calls, the same way for every benchmark: structured `tool_calls`
(OpenAI-style dicts or BFCL call strings) or, without them, the text as the rollout reads it. Never executes."""

from __future__ import annotations

from typing import Any

from rods_core.benchmarks.toolcalls.chat import ParsedMessage, parse_assistant
from rods_core.benchmarks.toolcalls.parsing import CallParseError, parse_calls


def read_message(message: dict[str, Any]) -> ParsedMessage:
    """An assistant message's calls: its structured `tool_calls` if any, else its text as the rollout reads it."""
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    structured = message.get("tool_calls") or []
    if isinstance(structured, (str, dict)):  # one call given bare rather than as a list
        structured = [structured]
    if not structured:
        return parse_assistant(text)
    calls = []
    for tc in structured:
        try:
            calls.extend(parse_calls(tc))
        except CallParseError as e:
            return ParsedMessage(text=text, is_tool_call=True, error=str(e))
        except Exception as e:  # noqa: BLE001 - hostile input must never escape the environment
            return ParsedMessage(text=text, is_tool_call=True, error=type(e).__name__)
    if not calls:
        return ParsedMessage(text=text, is_tool_call=True, error="empty tool call list")
    return ParsedMessage(text=text, calls=calls, is_tool_call=True)

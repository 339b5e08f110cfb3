"""Executing parsed calls on an environment's own instances: only documented methods, bound to their
signature, arguments type-checked against the doc, results formatted as BFCL formats them. Never evals.

The same rules and bounds as envs.bfcl's executor (its argument_type_error and bounded_args: MAX_INT_ARG,
MAX_PRECISION, a documented float given as an int passed as a float): a call is a name looked up in a fixed
table, never an attribute path.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rods_core.envs.bfcl import ERROR_PREFIX, argument_type_error, bounded_args, format_result, json_schema
from rods_core.envs.parsing import Call


@dataclass(frozen=True)
class ToolDoc:
    """One documented tool: its name and BFCL's JSON doc (parameters in BFCL's type names)."""

    name: str
    doc: dict

    @property
    def params(self) -> dict[str, dict]:
        return self.doc.get("parameters", {}).get("properties", {})


def load_docs(doc_file: str) -> dict[str, ToolDoc]:
    """BFCL's docs of one API class (`data/multi_turn_func_doc/<doc_file>`, JSON lines) by name."""
    path = resources.files("bfcl_eval").joinpath("data", "multi_turn_func_doc", doc_file)
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {d["name"]: ToolDoc(d["name"], d) for d in docs}


def tool_schema(doc: ToolDoc) -> dict:
    """An OpenAI-style tool schema, the form `apply_chat_template(tools=...)` expects."""
    params = doc.doc.get("parameters", {"type": "object", "properties": {}})
    return {
        "type": "function",
        "function": {
            "name": doc.name,
            "description": doc.doc.get("description", ""),
            "parameters": json_schema(params),
        },
    }


def execute(instance: Any, docs: dict[str, ToolDoc], call: Call) -> tuple[str, bool]:
    """Run one parsed call on `instance` if `docs` names it; (result text, ok). Every failure is text."""
    doc = docs.get(call.name)
    if doc is None:
        return f"{ERROR_PREFIX}function {call.name!r} is not available.", False
    method: Callable = getattr(instance, doc.name)
    try:
        bound = inspect.signature(method).bind(*call.args, **call.kwargs)
    except TypeError as e:
        return f"{ERROR_PREFIX}{call.name}(): {e}.", False
    problem = argument_type_error(doc.params, bound) or bounded_args(doc.params, bound)
    if problem:
        return f"{ERROR_PREFIX}{call.name}(): {problem}", False
    try:
        return format_result(method(*bound.args, **bound.kwargs)), True
    except Exception as e:  # noqa: BLE001 - the API classes raise freely; BFCL reports it as text
        return ERROR_PREFIX + str(e), False

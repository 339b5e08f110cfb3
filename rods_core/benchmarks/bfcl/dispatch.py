"""Executing parsed calls on an environment's own instances: only documented methods, bound to their
signature, arguments type-checked against the doc, results formatted as BFCL formats them. Never evals.

The one executor is environment's `run_call` (its argument_type_error and bounded_args: MAX_INT_ARG,
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

from rods_core.benchmarks.bfcl.environment import ERROR_PREFIX, json_schema, run_call
from rods_core.benchmarks.bfcl.parsing import Call


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
    return run_call(method, inspect.signature(method), doc.params, call)

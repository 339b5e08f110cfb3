"""Executing parsed calls on an environment's own instances, for every benchmark whose tools BFCL documents:
only documented methods, bound to their signature, arguments type-checked against the doc, results formatted as
BFCL formats them (str as is, dict as JSON, anything else `str()`, errors as "Error during execution: ..."), so a
checker's execution-result comparison means what it means in BFCL. Never evals.

The one executor is `run_call` (argument_type_error and bounded_args: MAX_INT_ARG, MAX_PRECISION, a documented
float given as an int passed as a float): a call is a name looked up in a fixed table, never an attribute path.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rods_core.benchmarks.toolcalls.parsing import Call

ERROR_PREFIX = "Error during execution: "

PY_TYPES: dict[str, tuple[type, ...]] = {  # BFCL's parameter types as Python types
    "string": (str,),
    "integer": (int,),
    "float": (int, float),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "tuple": (list, tuple),
    "dict": (dict,),
    "object": (dict,),
}


def format_result(value: Any) -> str:
    """BFCL's formatting of an execution result (multi_turn_utils.execute_multi_turn_func_call)."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def argument_type_error(params: dict[str, dict], bound: inspect.BoundArguments) -> str | None:
    """Why a bound argument does not have the type its BFCL doc (`params`: name -> spec) gives, else None."""
    for pname, value in bound.arguments.items():
        spec = params.get(pname)
        if spec is None or value is None:
            continue
        expected = PY_TYPES.get(spec.get("type", ""))
        if expected is None:
            continue
        if isinstance(value, bool) and bool not in expected:
            return f"argument {pname!r} must be {spec['type']}, got bool"
        if not isinstance(value, expected):
            return f"argument {pname!r} must be {spec['type']}, got {type(value).__name__}"
    return None


# Bounds on numbers a call may carry. Python integers are unbounded, so a documented float given as an
# integer literal (`power(base=10, exponent=10000000)`) would compute a ten-million-digit integer, and an
# mpmath `precision` sets the digits of the arithmetic: both ran for tens of seconds in one tool call.
MAX_INT_ARG = 10**15  # beyond any id, amount or count a BFCL scenario uses
MAX_PRECISION = 1_000  # digits for MathAPI's logarithm / square_root (BFCL's tasks use <= 10)


def bounded_args(params: dict[str, dict], bound: inspect.BoundArguments) -> str | None:
    """Refuse numbers that would make one call run for seconds; a documented float given as an int
    is passed on as a float (its documented type: `**` then overflows to an error, not a huge integer).
    `params`: the BFCL doc's parameters (name -> spec); every benchmark's executor applies these bounds."""
    for pname, value in bound.arguments.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if abs(value) > MAX_INT_ARG:
            return f"argument {pname!r} is too large (at most {MAX_INT_ARG:.0e} in magnitude)"
        if pname == "precision" and value > MAX_PRECISION:
            return f"argument 'precision' is at most {MAX_PRECISION} digits"
        if params.get(pname, {}).get("type") in ("float", "number"):
            bound.arguments[pname] = float(value)
    return None


def run_call(
    method: Callable, sig: inspect.Signature, params: dict[str, dict], call: Call, *, hint: str = "", lock=None
) -> tuple[str, bool]:
    """The one executor of a documented call, every benchmark's: bound to `sig`, its arguments checked against
    the doc's `params` (argument_type_error, then bounded_args), run (under `lock` when given), its result
    formatted as BFCL formats it; (result text, ok), every failure as error text. `hint` follows a binding error
    (the env_augment baseline's)."""
    try:
        bound = sig.bind(*call.args, **call.kwargs)
    except TypeError as e:
        return f"{ERROR_PREFIX}{call.name}(): {e}.{hint}", False
    problem = argument_type_error(params, bound) or bounded_args(params, bound)
    if problem:
        return f"{ERROR_PREFIX}{call.name}(): {problem}", False
    try:
        with lock or contextlib.nullcontext():
            return format_result(method(*bound.args, **bound.kwargs)), True
    except Exception as e:  # noqa: BLE001 - the API classes raise freely; BFCL reports it as text
        return ERROR_PREFIX + str(e), False


_JSON_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def json_schema(node: Any) -> Any:
    """A BFCL parameter doc as JSON Schema: BFCL's type names (dict, float, tuple, any) mapped to JSON's."""
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items()}
    if isinstance(out.get("type"), str):  # a parameter named "type" has a dict here, not a type name
        out["type"] = _JSON_SCHEMA_TYPES.get(out["type"], out["type"])
    return out


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

"""Safe parsing of tool calls: model output is hostile input, so it is parsed, never executed.

Accepts BFCL's Python-call strings (`cd(folder='x')`, or a list `[cd(folder='x'), ls()]`) and JSON tool
calls (`{"name": ..., "arguments": {...}}`, a list of them, or arguments as a JSON string). Only a bare
function name and literal arguments pass: attribute access, nested calls, names, comprehensions,
lambdas, f-strings and anything else are refused with a reason. Nothing here calls `eval`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any

MAX_CALL_CHARS = 20_000  # a whole assistant message of calls; BFCL's longest ground-truth call is ~600
MAX_LITERAL_DEPTH = 12  # nesting of lists/dicts inside one argument
MAX_INT_DIGITS = 30  # bigger integers only serve to hang `base ** exponent`


@dataclass(frozen=True)
class Call:
    """One parsed call: a bare function name, positional and keyword literal arguments."""

    name: str
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def to_string(self) -> str:
        """BFCL's call-string form, e.g. `mv(source='a', destination='b')`."""
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


class CallParseError(ValueError):
    """The text is not a list of safe, literal function calls; the message says why."""


def _literal(node: ast.AST, depth: int = 0) -> Any:
    if depth > MAX_LITERAL_DEPTH:
        raise CallParseError("argument nested too deeply")
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, (str, int, float, bool)) or v is None:
            if isinstance(v, int) and not isinstance(v, bool) and len(str(abs(v))) > MAX_INT_DIGITS:
                raise CallParseError("integer literal too large")
            return v
        raise CallParseError(f"unsupported constant {type(v).__name__}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _literal(node.operand, depth + 1)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise CallParseError("a sign applies to numbers only")
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e, depth + 1) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise CallParseError("'**' unpacking is not allowed")
        keys = [_literal(k, depth + 1) for k in node.keys]
        if not all(isinstance(k, (str, int, float, bool)) or k is None for k in keys):
            raise CallParseError("dict keys must be plain literals")
        return dict(zip(keys, [_literal(v, depth + 1) for v in node.values], strict=True))
    if isinstance(node, ast.Name):
        # JSON spellings are accepted as the literals they mean; any other name is a reference.
        alias = {"true": True, "false": False, "null": None}
        if node.id in alias:
            return alias[node.id]
        raise CallParseError(f"argument refers to the name {node.id!r}; only literal values are allowed")
    if isinstance(node, ast.Call):
        raise CallParseError("nested calls are not allowed; call functions one at a time")
    raise CallParseError(f"argument is a {type(node).__name__} expression; only literal values are allowed")


def _call(node: ast.AST) -> Call:
    if not isinstance(node, ast.Call):
        raise CallParseError(f"expected a function call, got a {type(node).__name__}")
    if isinstance(node.func, ast.Attribute):
        raise CallParseError("attribute access is not allowed; call the function by its bare name")
    if not isinstance(node.func, ast.Name):
        raise CallParseError("the called object must be a bare function name")
    name = node.func.id
    if name.startswith("_"):
        raise CallParseError(f"{name!r}: names starting with '_' are not callable")
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise CallParseError("'*' and '**' unpacking are not allowed")
    kwargs = {}
    for kw in node.keywords:
        if kw.arg in kwargs:
            raise CallParseError(f"argument {kw.arg!r} given twice")
        kwargs[kw.arg] = _literal(kw.value)
    return Call(name, tuple(_literal(a) for a in node.args), kwargs)


def parse_python_calls(text: str) -> list[Call]:
    """Parse `f(a=1)`, `f(a=1), g()` or `[f(a=1), g()]` into calls, refusing anything but literals."""
    text = text.strip()
    if len(text) > MAX_CALL_CHARS:
        raise CallParseError(f"tool call text is {len(text)} characters; the limit is {MAX_CALL_CHARS}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise CallParseError(f"not a Python call expression: {type(e).__name__}") from None
    body = tree.body
    nodes = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    return [_call(n) for n in nodes]


def _json_call(obj: Any) -> Call:
    if not isinstance(obj, dict):
        raise CallParseError("a JSON tool call must be an object with 'name' and 'arguments'")
    if "function" in obj and isinstance(obj["function"], dict):  # OpenAI's {"type": "function", ...}
        obj = obj["function"]
    name, args = obj.get("name"), obj.get("arguments", obj.get("parameters", {}))
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise CallParseError(f"invalid function name {name!r}")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise CallParseError("'arguments' is a string that is not JSON") from None
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise CallParseError("'arguments' must be an object of named arguments")
    # Route values through the same literal check as Python calls (depth, integer size).
    return Call(name, (), {k: _literal(ast.parse(json.dumps(v), mode="eval").body) for k, v in args.items()})


def parse_calls(payload: str | dict | list) -> list[Call]:
    """Parse any supported form of tool calls; raises CallParseError with a reason on anything else."""
    if isinstance(payload, (dict, list)):
        items = payload if isinstance(payload, list) else [payload]
        return [_json_call(i) for i in items]
    if not isinstance(payload, str):
        raise CallParseError(f"tool calls must be text or JSON, got {type(payload).__name__}")
    stripped = payload.strip()
    if len(stripped) > MAX_CALL_CHARS:
        raise CallParseError(f"tool call text is {len(stripped)} characters; the limit is {MAX_CALL_CHARS}")
    if stripped.startswith("{") or (stripped.startswith("[") and stripped[1:].lstrip().startswith("{")):
        try:
            return parse_calls(json.loads(stripped))
        except json.JSONDecodeError:
            pass  # maybe a Python dict literal call list; fall through to the Python parser
        except RecursionError:
            raise CallParseError("tool call JSON nested too deeply") from None
    return parse_python_calls(stripped)

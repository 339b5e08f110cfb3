"""The BFCL multi-turn environment: the eight API classes from `bfcl-eval`, run safely and in isolation.

Departs from the package's own executor on purpose: that one `eval()`s each call string and caches
instances in module globals forever. Here every environment owns fresh instances built from a deep
copy of the task's initial config, calls are parsed with `ast` (toolcalls.parsing) and dispatched by name
to the documented methods of this environment's own instances. Results are formatted exactly as BFCL
formats them (str as is, dict as JSON, anything else `str()`, errors as "Error during execution: ..."),
so the checker's execution-result comparison means what it means in BFCL.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.toolcalls.dispatch import ERROR_PREFIX, run_call
from rods_core.benchmarks.toolcalls.parsing import Call, CallParseError, parse_calls

_BACKEND = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
CLASS_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS_CLASSES = {"MathAPI"}  # built without a scenario, as BFCL does

# VehicleControlAPI (long context) writes into and returns a module-level dict; calls of that class
# run under this lock and their result is serialised before the lock is released.
_SHARED_MODULE_STATE = {"VehicleControlAPI"}
_module_state_lock = threading.Lock()


@dataclass(frozen=True)
class FunctionDoc:
    """One documented tool: its class, name, JSON-schema doc, and parameter types."""

    cls: str
    name: str
    doc: dict

    @property
    def params(self) -> dict[str, dict]:
        return self.doc.get("parameters", {}).get("properties", {})

    @property
    def required(self) -> list[str]:
        return list(self.doc.get("parameters", {}).get("required", []))


@cache
def function_docs() -> dict[str, FunctionDoc]:
    """All 128 documented multi-turn functions by name (no name is shared across classes)."""
    docs: dict[str, FunctionDoc] = {}
    root = resources.files("bfcl_eval").joinpath("data/multi_turn_func_doc")
    for cls, module in CLASS_MODULES.items():
        fname = {"TwitterAPI": "posting_api", "TravelAPI": "travel_booking"}.get(cls, module)
        for line in root.joinpath(f"{fname}.json").read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                docs[d["name"]] = FunctionDoc(cls, d["name"], d)
    return docs


@cache
def api_class(name: str) -> type:
    if name not in CLASS_MODULES:
        raise KeyError(f"unknown API class {name!r}")
    return getattr(importlib.import_module(f"{_BACKEND}.{CLASS_MODULES[name]}"), name)


@cache
def _signature(cls: str, fn: str) -> inspect.Signature:
    sig = inspect.signature(getattr(api_class(cls), fn))
    return sig.replace(parameters=list(sig.parameters.values())[1:])  # drop `self`


def named_arguments(call: Call) -> dict[str, Any]:
    """A call's arguments by name: positional ones bound through the documented method's signature."""
    if not call.args:
        return dict(call.kwargs)
    doc = function_docs().get(call.name)
    if doc is None:
        raise ValueError(f"{call.name}: positional arguments of an unknown function cannot be named")
    return dict(_signature(doc.cls, call.name).bind(*call.args, **call.kwargs).arguments)


@dataclass
class Observation:
    """What the agent sees for one call; `call` is None when the text could not be parsed."""

    call: Call | None
    result: str
    ok: bool

    @property
    def text(self) -> str:
        return self.result


class BfclEnvironment:
    """Fresh, isolated instances of one task's API classes; executes parsed calls, never code.

    `hints=True` adds a corrective hint to error observations (the env_augment baseline, after
    EnvTuning); it changes only what the agent reads, never the state or the checker.
    """

    def __init__(self, task: Task, *, long_context: bool | None = None, hints: bool = False):
        self.task = task
        self.hints = hints
        self.long_context = task.category == "long_context" if long_context is None else long_context
        self.instances: dict[str, Any] = {}
        for cls in task.involved_classes:
            inst = api_class(cls)()
            if cls not in STATELESS_CLASSES:
                inst._load_scenario(copy.deepcopy(task.initial_config.get(cls, {})), long_context=self.long_context)
                # Detach from module-level objects the scenario loader may have linked in (travel
                # booking and credit-card extensions), so no two environments share mutable state.
                for k, v in list(vars(inst).items()):
                    if isinstance(v, (dict, list)):
                        setattr(inst, k, copy.deepcopy(v))
            self.instances[cls] = inst
        docs = function_docs()
        self._functions = {n: d for n, d in docs.items() if d.cls in self.instances}
        self._held = task.held_back_until()
        self.turn = 0
        self.calls_made = 0

    # ----- what the agent may call ------------------------------------------------------------
    def available_functions(self, turn: int | None = None) -> list[str]:
        """Documented functions of this task's classes, minus those still held back (miss_func)."""
        t = self.turn if turn is None else turn
        return [n for n in self._functions if n not in self.task.excluded_function and self._held.get(n, 0) <= t]

    def tool_docs(self, turn: int | None = None) -> list[dict]:
        return [self._functions[n].doc for n in self.available_functions(turn)]

    def start_turn(self, turn: int) -> None:
        self.turn = turn

    # ----- execution --------------------------------------------------------------------------
    def execute(self, payload: str | dict | list) -> list[Observation]:
        """Parse and run a message's tool calls in order; every problem becomes an error observation."""
        try:
            calls = parse_calls(payload)
        except CallParseError as e:
            return [Observation(None, self._err(f"could not parse tool call: {e}"), False)]
        except Exception as e:  # noqa: BLE001 - hostile input must never escape the environment
            return [Observation(None, self._err(f"could not parse tool call: {type(e).__name__}"), False)]
        if not calls:
            return [Observation(None, self._err("no function call found"), False)]
        return [self.execute_call(c) for c in calls]

    def execute_call(self, call: Call) -> Observation:
        self.calls_made += 1
        doc = self._functions.get(call.name)
        if doc is None or call.name not in self.available_functions():
            hint = f" Available: {', '.join(self.available_functions())}." if self.hints else ""
            return Observation(call, self._err(f"function {call.name!r} is not available.{hint}"), False)
        hint = f" Parameters: {', '.join(doc.params)}; required: {', '.join(doc.required)}." if self.hints else ""
        method = getattr(self.instances[doc.cls], call.name)
        lock = _module_state_lock if doc.cls in _SHARED_MODULE_STATE else None
        text, ok = run_call(method, _signature(doc.cls, call.name), doc.params, call, hint=hint, lock=lock)
        return Observation(call, text, ok)

    def _err(self, msg: str) -> str:
        return ERROR_PREFIX + msg

    # ----- state ------------------------------------------------------------------------------
    def public_state(self) -> dict[str, dict]:
        """The attributes BFCL's state checker compares (public ones), per class."""
        return {c: {k: v for k, v in vars(i).items() if not k.startswith("_")} for c, i in self.instances.items()}

"""Stage 2, Execute: run the plan in a fresh environment, verify every call did its job, record the ground truth.

This is where the plan runs (Plan only dry-runs calls to draw values). A new environment is built from
the planned initial config; each value that comes from an earlier result is read here, from this run's
results, at the place the parent read it. A candidate is rejected when a value cannot be read, a call
errors or its result says it failed ({"error": ...}, `booking_status: false`), a read returns nothing
where the parent's returned data (grep for a word the file lacks), or a state change changes nothing
where the parent's did (release a brake that is already released). The ground truth is written in
BFCL's call-string form.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from rods_core.benchmarks.bfcl.environment import BfclEnvironment, function_docs
from rods_core.benchmarks.bfcl.signature import skill_of
from rods_core.benchmarks.bfcl.synth.plan import Plan
from rods_core.benchmarks.bfcl.synth.values import INFORMATIVE_SKILLS, looks_failed, resolve_dep, returns_nothing
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.synthesis import StageError
from rods_core.benchmarks.toolcalls.parsing import Call


@dataclass
class Execution:
    """The verified calls of a plan: per base-form turn the call strings, and each call's result."""

    ground_truth: list[list[str]]
    calls: list[Call]
    results: list[str]


def base_task(plan: Plan, initial_config: dict | None = None) -> Task:
    """The plan as a task in base form, with the parent's words (Rewrite replaces them)."""
    cfg = plan.initial_config if initial_config is None else initial_config
    return plan.base.task.model_copy(update={"initial_config": cfg}, deep=True)


def _state_of(env: BfclEnvironment, function: str) -> dict | None:
    """A copy of the public state of the function's class; None for the file system: its no-op writes
    already fail (touch or mkdir of an existing name, a move onto itself) and copying its tree before
    every write was about half of Execute's time when profiled."""
    cls = function_docs()[function].cls
    inst = env.instances.get(cls)
    if inst is None or cls == "GorillaFileSystem":
        return None
    return copy.deepcopy({k: v for k, v in vars(inst).items() if not k.startswith("_")})


def execute(plan: Plan, initial_config: dict | None = None) -> Execution:
    """Run `plan` (from `initial_config`, by default the plan's); raises StageError('execute', why)."""
    env = BfclEnvironment(base_task(plan, initial_config))
    gt: list[list[str]] = [[] for _ in range(plan.n_turns)]
    calls: list[Call] = []
    results: list[str] = []
    for pc in plan.calls:
        env.start_turn(pc.turn)
        name = pc.call.name
        kwargs = {k: (list(v) if isinstance(v, list) else v) for k, v in pc.call.kwargs.items()}
        for (param, idx), (producer, path) in pc.deps.items():
            old = pc.parent.kwargs[param] if idx is None else pc.parent.kwargs[param][idx]
            ok, value = resolve_dep(plan.calls[producer].parent.result, results[producer], old, path)
            if not ok:
                raise StageError(
                    "execute", f"call {pc.index} {name}(): {param} is not in the result of call {producer}"
                )
            if idx is None:
                kwargs[param] = value
            else:
                kwargs[param][idx] = value
        call = Call(name, (), kwargs)
        before = _state_of(env, name) if pc.parent.changed_state else None
        obs = env.execute_call(call)
        failed = (None if obs.ok else obs.result) or looks_failed(obs.result)
        if failed:
            raise StageError("execute", f"call {pc.index} {name}() failed: {failed[:100]}")
        if (
            skill_of(name) in INFORMATIVE_SKILLS
            and returns_nothing(obs.result)
            and not returns_nothing(pc.parent.result)
        ):
            raise StageError("execute", f"call {pc.index} {name}() returns nothing where the parent's returned data")
        if before is not None and _state_of(env, name) == before:
            raise StageError(
                "execute", f"call {pc.index} {name}() changes nothing where the parent's changed the state"
            )
        gt[pc.turn].append(call.to_string())
        calls.append(call)
        results.append(obs.result)
    return Execution(gt, calls, results)

"""Stage 2, Execute: run a plan in a fresh environment; every call must succeed; record the ground truth.

Independent of Plan's scratch run: a new environment is built from the planned initial config, each
value that comes from an earlier result is read again from this run's results, and a call fails the
candidate when the environment reports an error or the result says it failed ({"error": ...},
`booking_status: false`). The ground truth is written in BFCL's call-string form.
"""

from __future__ import annotations

from dataclasses import dataclass

from rods_core.envs.bfcl import BfclEnvironment
from rods_core.envs.parsing import Call
from rods_core.synth.plan import Plan
from rods_core.synth.stages import StageError
from rods_core.synth.values import looks_failed, resolve_dep
from rods_core.tasks import Task


@dataclass
class Execution:
    """The verified calls of a plan: per base-form turn the call strings, and each call's result."""

    ground_truth: list[list[str]]
    calls: list[Call]
    results: list[str]


def base_task(plan: Plan) -> Task:
    """The plan as a task in base form, with the parent's words (Rewrite replaces them)."""
    return plan.base.task.model_copy(update={"initial_config": plan.initial_config}, deep=True)


def execute(plan: Plan) -> Execution:
    env = BfclEnvironment(base_task(plan))
    gt: list[list[str]] = [[] for _ in range(plan.n_turns)]
    calls: list[Call] = []
    results: list[str] = []
    for pc in plan.calls:
        env.start_turn(pc.turn)
        kwargs = {k: (list(v) if isinstance(v, list) else v) for k, v in pc.call.kwargs.items()}
        for (param, idx), (producer, path) in pc.deps.items():
            old = pc.parent.kwargs[param] if idx is None else pc.parent.kwargs[param][idx]
            ok, value = resolve_dep(plan.calls[producer].parent.result, results[producer], old, path)
            if not ok:
                raise StageError("execute", f"call {pc.index}: dependency on call {producer} lost")
            planned = pc.call.kwargs[param] if idx is None else pc.call.kwargs[param][idx]
            if value != planned:
                raise StageError("execute", f"call {pc.index}: dependency value differs from the plan's")
        call = Call(pc.call.name, (), kwargs)
        obs = env.execute_call(call)
        failed = None if obs.ok else obs.result
        failed = failed or looks_failed(obs.result)
        if failed:
            raise StageError("execute", f"call {pc.index} {call.name}() failed: {failed[:100]}")
        gt[pc.turn].append(call.to_string())
        calls.append(call)
        results.append(obs.result)
    return Execution(gt, calls, results)

"""The environment and checker agree with bfcl-eval's own multi-turn checker, and replay is exact."""

from __future__ import annotations

import random

import pytest
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.toolcalls.parsing import Call, parse_calls


def test_ground_truth_of_all_800_tasks_passes(all_seeds):
    assert len(all_seeds) == 800
    failed = [t.id for t in all_seeds if score_calls(t, t.ground_truth).accuracy != 1.0]
    assert failed == []


def test_doing_nothing_scores_zero_progress(all_seeds):
    rewards = [score_calls(t, [[] for _ in t.ground_truth]).progress for t in all_seeds[::7]]
    assert max(rewards) == 0.0


def _perturb(task, rng: random.Random) -> tuple[str, list[list[str]]]:
    """One random perturbation. Calls are never moved before the turn their function arrives at: our
    environment refuses a held-back function (BFCL's miss_func semantics), while BFCL's executor, which
    never sees it offered to a model, would run it."""
    turns = [list(t) for t in task.ground_truth]
    held = task.held_back_until()
    filled = [i for i, t in enumerate(turns) if t]
    i = rng.choice(filled)
    kind = rng.choice(["drop", "reorder", "argument", "add", "add_other_turn"])
    calls = turns[i]
    if kind == "drop":
        calls.pop(rng.randrange(len(calls)))
    elif kind == "reorder" and len(calls) > 1:
        calls.reverse()
    elif kind == "argument":
        j = rng.randrange(len(calls))
        c = parse_calls(calls[j])[0]
        kw = dict(c.kwargs)
        for k, v in kw.items():
            if isinstance(v, str):
                kw[k] = v + "_x"
                break
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                kw[k] = v + 1
                break
        calls[j] = Call(c.name, c.args, kw).to_string()
    elif kind == "add":
        calls.insert(rng.randrange(len(calls) + 1), rng.choice(calls))
    else:
        call = rng.choice(calls)
        earliest = held.get(call.split("(")[0], 0)
        turns[rng.choice(range(earliest, len(turns)))].append(call)
    return kind, turns


def _bfcl_accuracy(task, turns, tag: str) -> bool:
    q, a = task.to_bfcl()
    q["involved_classes"] = task.involved_classes
    decoded = [[t] if t else [] for t in turns]
    return multi_turn_checker(decoded, a["ground_truth"], q, task.category, f"rods_agree_{tag}")["valid"]


@pytest.mark.parametrize("chunk", range(4))
def test_agrees_with_bfcl_checker_on_ground_truth_and_perturbed_answers(all_seeds, chunk):
    """800 ground-truth answers and 800 perturbed ones (drop, reorder, change, add calls)."""
    rng = random.Random(1234 + chunk)
    disagreements, perturbed_fails = [], 0
    for k, task in enumerate(all_seeds[chunk::4]):
        kind, bad = _perturb(task, rng)
        for tag, answer in (("gt", task.ground_truth), (kind, bad)):
            ours = score_calls(task, answer).accuracy == 1.0
            theirs = _bfcl_accuracy(task, answer, f"{chunk}_{k}_{tag}")
            if ours != theirs:
                disagreements.append((task.id, tag, ours, theirs))
            perturbed_fails += tag != "gt" and not ours
    assert disagreements == []
    assert perturbed_fails > 50  # the perturbations really do break most answers

"""The learning-pool design's pre-registered criteria (rods_lab.experiments.criteria) on synthetic run tables whose right
verdict is known: every verdict reachable (supported, refuted, inconclusive, not evaluable; the gate holding and
failing), the gate said beside a verdict and never blocking it, and a pilot of rods and static at K = 2 deciding only the gate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rods_lab.experiments.criteria import GATE_RISE, criteria, gate, markdown, side_checks

STEPS = 11  # evaluations at steps 0, 10, ..., 100 of 48 trajectories a step


def _curve(start: float, end: float, early: bool = False) -> list[float]:
    """A held-out curve from start to end: linear, or (early) at its end from the first evaluation after step 0."""
    if early:
        return [start] + [end] * (STEPS - 1)
    return list(np.linspace(start, end, STEPS))


def experiment(arms: dict[str, float], k: int = 6, static_rise: float = 0.05, early=(), noise: float = 0.004):
    """(runs, evals): arm -> its final H1 gain over static's final; seeds share a level (spread 0.05) so only a
    paired test sees small effects; every arm starts at the seed's level."""
    rng = np.random.default_rng(7)
    level = rng.normal(0.30, 0.05, size=k)
    ev, runs = [], []
    for arm, gain in arms.items():
        for s in range(k):
            start = float(level[s])
            end = start + static_rise + gain + float(rng.normal(0, noise))
            ys = _curve(start, end, arm in early)
            for j, y in enumerate(ys):
                step = 10 * j
                ev.append({"run": f"{arm}_r{s}", "method": arm, "seed": s, "step": step, "trajectories": 48.0 * step,
                           "progress": y})  # fmt: skip
            runs.append({"run": f"{arm}_r{s}", "method": arm, "seed": s, "initial_progress": ys[0],
                         "final_progress": ys[-1]})  # fmt: skip
    return pd.DataFrame(runs), pd.DataFrame(ev)


def verdicts(runs, evals) -> dict[str, str]:
    return {c.name: c.verdict for c in criteria(runs, evals, boots=300)}


def test_a_rods_that_wins_everywhere_is_supported_on_every_support_criterion():
    runs, ev = experiment(
        {"static": 0.0, "rods": 0.08, "uniform_parents": 0.03, "offline_small": 0.075, "offline_large": 0.02},
        early=("rods",),
    )
    v = verdicts(runs, ev)
    assert v == {"gate": "holds", "S1": "supported", "S2": "supported", "S3": "supported", "S4": "supported",
                 "R1": "inconclusive", "R2": "inconclusive", "R3": "inconclusive"}  # fmt: skip


def test_a_rods_no_better_than_static_uniform_parents_or_offline_is_refuted_on_every_refutation_criterion():
    runs, ev = experiment(
        {"static": 0.0, "rods": 0.0, "uniform_parents": 0.05, "offline_small": 0.05, "offline_large": 0.08}
    )
    v = verdicts(runs, ev)
    assert v == {"gate": "holds", "S1": "inconclusive", "S2": "inconclusive", "S3": "inconclusive",
                 "S4": "inconclusive", "R1": "refuted", "R2": "refuted", "R3": "refuted"}  # fmt: skip
    found = {c.name: c for c in criteria(runs, ev, boots=300)}
    r1 = found["R1"].numbers["comparison"]
    assert r1["paired"] and r1["n"] == 6 and r1["hi"] < 0.02 and found["R1"].p_holm >= r1["p"]
    assert found["R3"].p_holm == found["R3"].numbers["offline_large"]["p_holm"]  # the arm furthest above rods


def test_a_noisy_small_difference_is_inconclusive_both_ways():
    runs, ev = experiment({"static": 0.0, "rods": 0.02}, noise=0.03)
    v = verdicts(runs, ev)
    assert (v["S1"], v["R1"]) == ("inconclusive", "inconclusive")
    assert {v[n] for n in ("S2", "S3", "S4", "R2", "R3")} == {"not evaluable"}


def test_when_statics_held_out_does_not_rise_the_verdict_stands_and_the_figures_say_the_gate_failed():
    runs, ev = experiment({"static": 0.0, "rods": 0.08}, static_rise=0.0)
    found = {c.name: c for c in criteria(runs, ev, boots=300)}
    assert found["gate"].verdict == "fails"
    s1 = found["S1"]  # the gate never blocks a verdict: the comparison decides, the gate's outcome is said beside it
    assert s1.holds is True and s1.verdict == "supported" and "the gate failed" in s1.figures
    # a rise on average that falls in one seed fails the gate too
    runs.loc[(runs.method == "static") & (runs.seed == 0), "final_progress"] -= 0.5
    runs.loc[(runs.method == "static") & (runs.seed != 0), "final_progress"] += 0.2
    g = gate(runs)
    assert g.numbers["mean_rise"] >= GATE_RISE and g.verdict == "fails"


def test_a_pilot_of_rods_and_static_at_k_2_decides_only_the_gate():
    runs, ev = experiment({"rods": 0.02, "static": 0.0}, k=2, static_rise=0.035)
    found = {c.name: c for c in criteria(runs, ev, boots=300)}
    assert found["gate"].verdict == "holds" and found["gate"].numbers["mean_rise"] == pytest.approx(0.035, abs=0.01)
    assert all(c.verdict == "not evaluable" for n, c in found.items() if n != "gate")
    assert "2 run seeds paired; at least 3 needed" in found["S1"].figures
    assert found["S2"].figures == "no uniform_parents runs" and "offline_large" in found["S4"].figures
    md = "\n".join(markdown([c.as_dict() for c in found.values()]))
    assert (
        "| gate |" in md
        and "**holds**" in md
        and "Outcome: not evaluable: S1, S2, S3, S4, R1, R2, R3; holds: gate." in md
    )


def test_without_static_the_gate_is_not_evaluable():
    runs, ev = experiment({"rods": 0.0})
    assert gate(runs).verdict == "not evaluable" and verdicts(runs, ev)["S1"] == "not evaluable"


def test_the_checks_that_do_not_gate_say_whether_p_max_bound_and_count_held_out_collisions():
    runs, _ = experiment({"rods": 0.0, "static": 0.0}, k=2)
    none = pd.DataFrame(columns=["run", "method", "step", "task_id", "reason"])
    hits = pd.DataFrame([{"run": "rods_r0", "method": "rods", "set": "H1", "n": 3}])
    p_max, held = side_checks(runs, none, hits)
    assert p_max["holds"] is False and p_max["figures"].endswith("(rods_r0 0, rods_r1 0): P_max did not bind")
    assert held["figures"].endswith("rejected before training: rods H1 3")
    refused = pd.DataFrame([{"run": "rods_r1", "method": "rods", "step": 3, "task_id": "v", "reason": "offer/budget"}])
    assert side_checks(runs, refused, hits.iloc[0:0])[0]["holds"] is True

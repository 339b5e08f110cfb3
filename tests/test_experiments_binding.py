"""Binding checks of the ablations (rods_lab.experiments.binding) on synthetic frames: the demo design's no-ops
(single_layer with streaks of 1 and no staleness within the run; no_budget with P_max never reached) are said
to be no-ops, an ablation that fired binds, and runs identical to rods' on every seed are a no-op."""

from __future__ import annotations

import pandas as pd

from rods_lab.experiments.binding import binding_checks, identical_to_rods

RODS = {
    "method": "rods",
    "name": "rods",
    "buffer": {"p_max": 24, "mastered_streak": 1, "hard_streak": 1, "stale_steps": 100},
}


def _cfg(**buffer) -> dict:
    return {**RODS, "name": "x", "buffer": {**RODS["buffer"], **buffer}}


def _steps(arms: dict[str, list[float]], seeds=(0, 1)) -> pd.DataFrame:
    rows = []
    for arm, shares in arms.items():
        for seed in seeds:
            for step, share in enumerate(shares, start=1):
                rows.append(
                    {"run": f"{arm}_r{seed}", "method": arm, "seed": seed, "step": step, "informative_share": share,
                     "pool_active": 10.0, "pool_staged": 4.0, "reward": 0.5}
                )  # fmt: skip
    return pd.DataFrame(rows)


def _buffer(rows: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame([{"run": f"{m}_r0", "method": m, "step": 1, "task_id": "t", "reason": r} for m, r in rows])


def test_the_demo_designs_no_op_ablations_are_found_and_working_ones_bind():
    configs = {
        "rods": RODS,
        "single_layer": _cfg(retirement="single"),
        "no_budget": _cfg(expansion_budget=False),
        "direct_injection": _cfg(injection="direct"),
        "paper_streaks": _cfg(mastered_streak=2, hard_streak=3),
    }
    steps = _steps({a: [0.5, 0.4, 0.3 + 0.01 * i] for i, a in enumerate(configs)})  # every arm's runs differ
    buffer = _buffer([("direct_injection", "offer/direct"), ("rods", "retire/mastered")])
    said = {b.arm: b for b in binding_checks(configs, buffer, steps, pd.DataFrame(), max_steps=30)}
    assert (
        said["single_layer"].binds is False and "layered retirement is the single rule" in said["single_layer"].evidence
    )
    assert said["no_budget"].binds is False and "P_max 24 never bound" in said["no_budget"].evidence
    assert said["direct_injection"].binds is True and said["paper_streaks"].binds is True
    # the same rule over a run longer than stale_steps can differ: staleness retires only in layered
    longer = {b.arm: b for b in binding_checks(configs, buffer, steps, pd.DataFrame(), max_steps=200)}
    assert longer["single_layer"].binds is True
    # P_max that refused offers binds
    refused = pd.concat([buffer, _buffer([("rods", "offer/budget")])])
    assert {b.arm: b.binds for b in binding_checks(configs, refused, steps, pd.DataFrame(), 30)}["no_budget"] is True


def test_runs_identical_to_rods_on_every_seed_or_an_equal_config_are_no_ops():
    steps = _steps({"rods": [0.5, 0.4], "paper_streaks": [0.5, 0.4], "uniform_parents": [0.5, 0.3]})
    assert identical_to_rods(steps, "paper_streaks") is True and identical_to_rods(steps, "uniform_parents") is False
    configs = {
        "rods": RODS,
        "paper_streaks": _cfg(mastered_streak=2),
        "uniform_parents": {**RODS, "name": "uniform_parents"},
    }
    said = {b.arm: b for b in binding_checks(configs, _buffer([]), steps, pd.DataFrame(), 30)}
    assert said["paper_streaks"].binds is False and "identical to rods" in said["paper_streaks"].evidence
    assert said["uniform_parents"].binds is False and said["uniform_parents"].evidence == "its run config equals rods'"
    assert binding_checks({"static": {"method": "static"}}, _buffer([]), steps, pd.DataFrame(), 30) == []


def test_the_ablation_table_marks_a_no_op_arm():
    from rods_lab.experiments.ablation import display_table

    table = pd.DataFrame(
        [{"arm": a, "runs": 4, **{f"{m}{x}": v for m in ("informative_share_last_half",) for x, v in (("", 0.5), ("_ci95", 0.1))}}
         for a in ("rods", "no_budget")]
    )  # fmt: skip
    table["no_op"] = table.arm.map({"no_budget": "P_max never bound"})
    for m in ("final_progress", "progress_equal_tokens", "progress_equal_train_s", "landing_share"):
        table[m], table[f"{m}_ci95"] = 0.3, None
    assert list(display_table(table).arm) == ["rods", "no_budget (no-op)"]

"""The demo bench's collapse detector and headline on synthetic run tables (the runs themselves: `rods bench demo`)."""

from __future__ import annotations

import pandas as pd

from rods_lab.experiments.demo import FLAT_STEPS, collapses, run_collapses
from storage.events import EventLog


def _steps(rewards, shares=None):
    shares = shares if shares is not None else [0.5] * len(rewards)
    return pd.DataFrame({"step": range(1, len(rewards) + 1), "reward": rewards, "informative_share": shares})


def _stats(rows):
    return pd.DataFrame(rows, columns=["task_id", "step", "mean"])


def test_a_healthy_run_is_no_collapse():
    assert (
        collapses(
            _steps([0.3, 0.4, 0.5, 0.6]), _stats([("multi_turn_base_38", 1, 0.6), ("multi_turn_base_38", 3, 0.2)])
        )
        == []
    )


def test_an_informative_share_at_zero_for_five_steps_is_a_collapse_and_four_is_not():
    four = [0.5, 0, 0, 0, 0, 0.5]
    assert collapses(_steps([0.3] * 6, four), _stats([])) == []
    five = [0.5, 0, 0, 0, 0, 0, 0.5]
    assert collapses(_steps([0.3] * 7, five), _stats([])) == [f"informative_share 0 for {FLAT_STEPS} steps from step 2"]


def test_a_run_without_synthesis_whose_share_sits_at_zero_ran_dry_and_its_reward_at_zero_is_a_collapse():
    """Static's share at 0 at a steady reward (static on run seed 8000: 0.71) is the depletion the demo shows."""
    five = [0.5, 0, 0, 0, 0, 0, 0.5]
    assert collapses(_steps([0.71] * 7, five), _stats([]), synthesizes=False) == []
    flat = [0.3, 0, 0, 0, 0, 0, 0.3]
    assert collapses(_steps(flat, five), _stats([]), synthesizes=False) == [
        f"reward 0 for {FLAT_STEPS} steps from step 2"
    ]


def test_a_solved_seed_that_falls_to_zero_is_a_collapse_but_a_variant_is_not():
    rows = [
        ("multi_turn_base_38", 1, 0.63),
        ("multi_turn_base_38", 2, 0.0),
        ("multi_turn_base_38_g1_3df04854", 1, 0.8),  # a synthesized variant: may be retired, not a collapse
        ("multi_turn_base_38_g1_3df04854", 2, 0.0),
        ("multi_turn_base_12", 1, 0.4),  # never solved: falling to 0 is no collapse
        ("multi_turn_base_12", 2, 0.0),
    ]
    assert collapses(_steps([0.4, 0.3]), _stats(rows)) == ["multi_turn_base_38 0.63 at step 1, 0 at step 2"]


def _frames(shares: dict[tuple[str, int], tuple[float, float]], gains: dict[tuple[str, int], float]):
    """Frames of 4-step runs: (method, seed) -> (first-half share, last-half share) and held-out gain."""
    from rods_lab.results import Frames

    steps, evals = [], []
    for (method, seed), (first, last) in shares.items():
        run = f"{method}_s{seed}"
        for step in range(1, 5):
            share = first if step <= 2 else last
            steps.append({"run": run, "method": method, "seed": seed, "step": step, "informative_share": share,
                          "reward": 0.4, "trajectories_total": 48.0 * step})  # fmt: skip
        for step, progress in ((0, 0.3), (4, 0.3 + gains[(method, seed)])):
            evals.append(
                {"run": run, "method": method, "seed": seed, "step": step, "progress": progress, "accuracy": 0.0}
            )
    empty = pd.DataFrame(columns=["run", "method", "seed", "region", "mean_var", "n"])
    return Frames(pd.DataFrame(evals), pd.DataFrame(steps), empty, pd.DataFrame(columns=["run"]))


def test_the_headline_pairs_runs_by_seed_and_holds_only_without_collapse():
    from rods_lab.experiments.demo import headline

    shares = {("rods", s): (0.6, 0.5 + 0.02 * s) for s in range(4)}
    shares |= {("static", s): (0.55, 0.2 + 0.01 * s) for s in range(4)}
    gains = {(m, s): (0.05 if m == "rods" else 0.0) + 0.01 * s for m in ("rods", "static") for s in range(4)}
    h = headline(_frames(shares, gains), {})
    assert h.seeds == [0, 1, 2, 3] and h.k == 4
    assert abs(h.ratio[0] - (0.53 / 0.215)) < 1e-9 and h.ratio[1] > 1
    assert abs(h.gain_diff["mean"] - 0.05) < 1e-9  # the same +0.05 in every seed: no spread, an exact p
    assert h.gain_diff["p"] > 0 and "exact" in h.gain_diff["method"]
    assert h.static_fall["mean"] < 0 and h.holds
    collapsed = headline(
        _frames(shares, gains), {"rods_s0": _stats([("multi_turn_base_38", 1, 0.6), ("multi_turn_base_38", 3, 0.0)])}
    )
    assert not collapsed.holds and list(collapsed.collapses) == ["rods_s0"]


def test_a_run_folder_is_read_into_the_same_check(tmp_path):
    """run_collapses reads a run's step rows and task_stats from its event log (`rods bench pilot-length --runs`)."""
    log = EventLog(tmp_path / "r")
    shares = [0.5, 0, 0, 0, 0, 0, 0.5]
    log.append(
        "step", [{"step": i, "reward/mean": 0.3, "boundary/informative_share": v} for i, v in enumerate(shares, 1)]
    )
    log.append("task_stats", [{"step": 1, "task_id": "multi_turn_base_38", "n": 6, "mean": 0.6},
                              {"step": 4, "task_id": "multi_turn_base_38", "n": 6, "mean": 0.0}])  # fmt: skip
    log.flush()
    log.close()
    assert run_collapses(tmp_path / "r") == [
        f"informative_share 0 for {FLAT_STEPS} steps from step 2",
        "multi_turn_base_38 0.60 at step 1, 0 at step 4",
    ]
    (tmp_path / "r" / "config.yaml").write_text("method: static\n")  # the run's own method decides
    assert run_collapses(tmp_path / "r") == ["multi_turn_base_38 0.60 at step 1, 0 at step 4"]

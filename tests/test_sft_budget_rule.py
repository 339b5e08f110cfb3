"""The rule that picks the demo warm start's budget (bench/sft_budget.py), on made-up scores: paired intervals
against the full build, the sampled share against its Wilson interval, the targets, and the smallest budget
from which every larger one passes."""

from __future__ import annotations

import pytest

from bench.sft_budget import Scored, budget_table, failures, paired_upper, pick_budget, wilson_low

N = 32
BASE = [0.5] * 16 + [1.0] * 8 + [0.25] * 8  # progress 0.5625, accuracy 0.25 (the tasks at 1.0)


def tasks(progress: list[float], accuracy: list[int] | None = None, valid: list[int] | None = None) -> dict:
    """Per-task figures for N tasks: 4 messages each, `valid` of them well formed (default all)."""
    accuracy = accuracy or [int(p == 1.0) for p in BASE]
    valid = valid or [4] * len(progress)
    return {
        f"t{i}": {"progress": p, "accuracy": a, "messages": 4, "valid_messages": v}
        for i, (p, a, v) in enumerate(zip(progress, accuracy, valid, strict=True))
    }


def scored(step: int, progress: list[float] = BASE, share: float = 0.72, **kw) -> Scored:
    per = tasks(progress, **kw)
    return Scored(step / 100, step, step * 1000, {"seeds": per, "heldout": per}, share, N)


def test_wilson_low_matches_the_textbook_interval():
    assert wilson_low(16 / 32, 32) == pytest.approx(0.336, abs=1e-3)  # Wilson 95% for 16 of 32: 0.336-0.664
    assert wilson_low(0.0, 10) == pytest.approx(0.0)
    assert wilson_low(1.0, 10) == pytest.approx(0.722, abs=1e-3)


def test_paired_interval_is_zero_for_equal_scores_and_the_shift_for_a_uniform_drop():
    full = tasks(BASE)
    assert paired_upper(full, full, "progress") == 0.0
    lower = tasks([p - 0.1 for p in BASE])
    assert paired_upper(lower, full, "progress") == pytest.approx(-0.1)


@pytest.mark.parametrize(
    ("budget", "fails"),
    [
        (scored(100), []),  # the same quality
        (scored(100, [p - 0.1 for p in BASE]), ["seeds/progress", "heldout/progress"]),  # lower on every task
        # lower on one task of 32: within noise
        (scored(100, [0.25] + BASE[1:]), []),
        (scored(100, valid=[3] * N), ["seeds/format_valid", "heldout/format_valid", "target seeds/format_valid"]),
        (scored(100, share=0.40), ["sampled/share_differing", "target sampled/share_differing"]),
        (scored(100, share=0.60), []),  # above the lower end of 0.72's Wilson interval (0.55)
        # not sampled (its greedy figures failed first): the share fails too
        (scored(100, share=None), ["sampled/share_differing", "target sampled/share_differing"]),
    ],
)
def test_a_budget_fails_on_the_figures_lower_beyond_noise_or_below_target(budget, fails):
    assert failures(budget, scored(1000)) == fails


def test_the_smallest_budget_from_which_every_larger_one_passes_is_chosen():
    low = [p - 0.2 for p in BASE]
    runs = [scored(100, low), scored(200), scored(300, low), scored(400), scored(500), scored(1000)]
    verdict = pick_budget(runs)
    assert verdict.chosen.step == 400  # 200 passed, but 300 after it did not: a lucky snapshot, not a budget
    assert verdict.as_dict()["tokens_ratio"] == 0.4
    assert verdict.failures[300] == ["seeds/progress", "heldout/progress"]
    assert [r["step"] for r in budget_table(runs)] == [100, 200, 300, 400, 500, 1000]


def test_no_budget_is_chosen_when_the_full_build_misses_a_target():
    poor = [0.2] * N  # greedy progress 0.2: below the warm start's 0.3
    verdict = pick_budget([scored(100, poor), scored(1000, poor)])
    assert verdict.chosen is None and verdict.failures[1000] == ["target seeds/progress"]

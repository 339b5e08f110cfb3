"""Paired and unpaired comparisons of two arms (rods_lab.experiments.comparisons) and the ablation table's verdicts on
synthetic data whose right answer is known: a textbook paired interval, a paired effect hidden by between-seed
spread, identical differences that are no evidence at few seeds. The arithmetic itself: tests/test_statistics.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rods_lab.experiments.ablation import comparisons
from rods_lab.experiments.comparisons import compare, decide, paired, unpaired


def test_paired_differences_give_the_textbook_interval_and_p():
    base = {0: 0.30, 1: 0.10, 2: 0.50, 3: 0.20}  # a large spread between seeds
    a = {s: v + d for (s, v), d in zip(base.items(), (0.01, 0.02, 0.03, 0.04), strict=True)}
    c = paired(a, base, boots=2000)
    # differences 0.01..0.04: mean 0.025, sd 0.012910, se 0.006455, t_{0.975,3} 3.182
    assert c.paired and c.n == 4 and c.diff == pytest.approx(0.025)
    assert (c.lo, c.hi) == (
        pytest.approx(0.025 - 3.182 * 0.0064550, abs=1e-5),
        pytest.approx(0.025 + 0.0205403, abs=1e-5),
    )
    # t = 3.873 on 3 df gives 0.0305, but 4 seeds cannot check the t-test's normality: the exact sign-flip p
    assert c.p == pytest.approx(2 / 16) and c.p_method == "exact sign-flip (n < 6)"
    assert (c.boot_lo, c.boot_hi) == (c.lo, c.hi) and c.boot_method.startswith("t-interval")  # no bootstrap at K 4
    assert (c.above, c.below, c.p_sign) == (4, 0, pytest.approx(0.125))


def test_a_paired_effect_that_the_unpaired_test_misses_is_found_only_paired():
    rng = np.random.default_rng(1)
    level = rng.normal(0.3, 0.1, size=6)  # seed-to-seed spread 0.1, effect 0.03, within-seed noise 0.005
    b = {s: float(v) for s, v in enumerate(level)}
    a = {s: float(v + 0.03 + rng.normal(0, 0.005)) for s, v in enumerate(level)}
    p, u = compare(a, b, boots=2000), unpaired(list(a.values()), list(b.values()), boots=2000)
    assert p.paired and p.lo > 0 and p.p < 0.001 and p.above == 6 and p.p_method == "paired t"
    assert p.boot_method == "BCa bootstrap" and p.boot_lo < p.diff < p.boot_hi
    assert not u.paired and u.lo < 0 < u.hi and u.p > 0.3
    assert compare(a, {s + 10: v for s, v in b.items()}, boots=500).paired is False  # no seed in common


def test_identical_differences_at_three_seeds_are_no_win():
    # +0.1 on every seed: no spread, so no t statistic; the exact p is 2/8 (it was 0, and "beats", before)
    c = paired({0: 0.2, 1: 0.3, 2: 0.4}, {0: 0.1, 1: 0.2, 2: 0.3})
    assert c.p == pytest.approx(0.25) and c.p_method == "exact sign-flip (differences all equal)"
    assert decide(c, c.p, 3) == "does not beat"
    assert unpaired([0.2, 0.2, 0.2], [0.1, 0.1, 0.1]).p == pytest.approx(0.1)  # Welch with no spread: permutation


def test_decisions_need_a_corrected_p_and_an_interval_on_one_side():
    c = paired({0: 0.2, 1: 0.3, 2: 0.4, 3: 0.5}, {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.4})  # +0.1 on every seed
    assert decide(c, 0.001, 3) == "beats" and decide(c, 0.2, 3) == "does not beat"
    assert decide(c, 0.001, 5) == "cannot be compared (n < 5) with" and decide(None, 0.0, 3) == "not measured"


def test_the_ablation_table_pairs_by_seed_corrects_across_it_and_compares_every_arm_with_static():
    rng = np.random.default_rng(2)
    level = rng.normal(0.3, 0.1, size=8)
    rows = []
    for arm, effect in (("rods", 0.0), ("static", 0.0), ("uniform_parents", 0.06), ("single_layer", 0.0)):
        for s, v in enumerate(level):
            noise = rng.normal(0, 0.005) if effect else 0.0
            rows.append({"run": f"{arm}_r{s}", "method": arm, "seed": s, "final_progress": v + effect + noise})
    runs = pd.DataFrame(rows).assign(informative_share_last_half=0.5)
    comps = comparisons(runs, pd.DataFrame(), boots=500, no_ops={"single_layer": "the same rule as rods"})
    by = {(c["arm"], c["other"], c["metric"]): c for c in comps}
    up = by[("uniform_parents", "static", "final_progress")]
    assert up["paired"] and up["diff"] == pytest.approx(0.06, abs=0.005) and up["verdict"] == "beats"
    assert up["p_holm"] >= up["p"] and up["above"] == 8
    assert by[("rods", "uniform_parents", "final_progress")]["verdict"] == "is beaten by"
    assert by[("rods", "static", "final_progress")]["verdict"] == "does not beat"
    assert by[("rods", "static", "final_progress")]["p"] == 1.0  # identical runs: the exact p, no t statistic
    noop = by[("rods", "single_layer", "final_progress")]
    assert noop["verdict"].startswith("could not differ (no-op: the same rule as rods)") and math.isnan(noop["p_holm"])

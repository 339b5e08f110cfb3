"""The project's statistics (rods_core.statistics) on data whose answer is known: Student's t table, the sleep data's
paired t-test, exact sign and sign-flip tails, K = 3 identical differences (p 0.25, never 0), BCa coverage in a
seeded simulation, Fieller's ratio paired by seed, Holm within a declared family, Wilson and the paired t power."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rods_core import statistics as st

# Student (1908), R's `sleep`: extra sleep under drug 2 minus drug 1 for ten patients. R's t.test(paired = TRUE):
# t = 4.0621, df = 9, p = 0.002833, 95% CI 0.7001142 .. 2.4598858, mean 1.58.
SLEEP = [1.2, 2.4, 1.3, 1.3, 0.0, 1.0, 1.8, 0.8, 4.6, 1.4]


@pytest.mark.parametrize("df, q", [(1, 12.706), (2, 4.303), (3, 3.182), (10, 2.228), (30, 2.042), (120, 1.980)])
def test_t_quantiles_match_the_table_and_invert_the_cdf(df, q):
    assert st.t_quantile(0.975, df) == pytest.approx(q, abs=5e-4)
    assert st.t_quantile(0.025, df) == pytest.approx(-q, abs=5e-4)
    assert st.t_cdf(st.t_quantile(0.9, df), df) == pytest.approx(0.9, abs=1e-10)
    assert st.t_two_sided_p(q, df) == pytest.approx(0.05, abs=2e-4)
    assert st.t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)


def test_the_paired_t_test_on_the_sleep_data_matches_r():
    r = st.paired_t(SLEEP)
    assert (r.n, r.mean, r.method) == (10, pytest.approx(1.58), "paired t")
    assert (r.lo, r.hi) == (pytest.approx(0.7001142, abs=1e-6), pytest.approx(2.4598858, abs=1e-6))
    assert r.p == r.p_t == pytest.approx(0.002833, abs=1e-6)
    assert st.paired_t(SLEEP, alternative="greater").p == pytest.approx(0.002833 / 2, abs=1e-6)
    assert st.t_interval(SLEEP)[1] == pytest.approx(2.4598858 - 1.58, abs=1e-6)


def test_three_identical_differences_give_the_exact_p_of_a_quarter_never_zero():
    r = st.paired_t([0.05, 0.05, 0.05])
    assert (r.lo, r.hi, r.sd) == (pytest.approx(0.05), pytest.approx(0.05), 0.0)
    assert r.p == r.p_exact == pytest.approx(0.25) and math.isnan(r.p_t)
    assert "all equal" in r.method
    assert st.sign_test_p(3, 0) == pytest.approx(0.25) and st.sign_test_p(3, 0, "greater") == pytest.approx(0.125)
    # equal differences computed apart differ in the last bits: still no spread, still not a t statistic
    base = [0.31, 0.17, 0.52, 0.44, 0.29, 0.38, 0.61]
    r = st.paired_t([b + 0.06 - b for b in base])
    assert r.p == pytest.approx(2 / 2**7) and "all equal" in r.method
    assert st.paired_t([0.0, 0.0, 0.0]).p == 1.0


def test_a_far_upper_tail_keeps_its_digits_and_is_never_zero():
    # Student's t on 1 df is Cauchy's: P(T >= t) = atan(1 / t) / pi; 1 - cdf would give 0 at t = 1e17
    for t in (3.0, 1e6, 1e17):
        assert st.t_p(t, 1, "greater") == pytest.approx(math.atan(1 / t) / math.pi, rel=1e-9, abs=0)
        assert st.t_p(-t, 1, "less") == pytest.approx(math.atan(1 / t) / math.pi, rel=1e-9, abs=0)
    assert st.t_p(100, 15, "greater") > 0
    nearly_equal = [0.05, 0.0501, 0.05, 0.0502, 0.05, 0.05, 0.0501, 0.05]
    assert 0 < st.paired_t(nearly_equal, alternative="greater").p < 1e-12


def test_few_differences_take_the_exact_p_and_keep_the_t_p_beside_it():
    r = st.paired_t([0.01, 0.02, 0.03, 0.04])  # t = 3.873 on 3 df
    assert r.p_t == pytest.approx(0.0305, abs=1e-4)
    assert r.p == r.p_exact == pytest.approx(2 / 16) and r.method == "exact sign-flip (n < 6)"
    assert st.paired_t([0.01, 0.02, 0.03, 0.04], exact_below=2).p == pytest.approx(0.0305, abs=1e-4)
    assert math.isnan(st.paired_t([0.3]).p) and st.paired_t([]).n == 0


def test_the_sign_flip_test_is_the_exact_randomization_tail():
    # flips of (1, 2, 3): sums 6, 4, 2, 0, 0, -2, -4, -6; |sum| >= 6 twice, >= 2 six times
    assert st.sign_flip_p([1, 2, 3]) == pytest.approx(2 / 8)
    assert st.sign_flip_p([1, 2, 3], "greater") == pytest.approx(1 / 8)
    assert st.sign_flip_p([-1, 2, 3]) == pytest.approx(4 / 8)  # |sum| >= 4: 6, 4, -4, -6
    assert st.sign_flip_p([1, 2, 3], "less") == pytest.approx(1.0)
    # above the exact limit it draws flips, and on normal data it agrees with the t-test
    d = np.random.default_rng(3).normal(0.4, 1.0, size=30)
    assert st.sign_flip_p(d) == pytest.approx(st.paired_t(d).p_t, abs=0.02)


def test_the_sign_test_is_the_exact_binomial_tail():
    assert st.sign_test_p(4, 0) == pytest.approx(2 / 16) and st.sign_test_p(6, 0) == pytest.approx(2 / 64)
    assert st.sign_test_p(3, 1) == pytest.approx(2 * 5 / 16) and st.sign_test_p(1, 3, "less") == pytest.approx(5 / 16)
    assert st.sign_test_p(2, 2) == 1.0 and st.sign_test_p(0, 0) == 1.0


def test_welch_without_any_spread_falls_back_to_the_permutation_p():
    assert st.welch_p([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]) == pytest.approx(2 / 20)  # C(6, 3) = 20 relabellings
    assert st.permutation_p([1, 2, 3], [4, 5, 6]) == pytest.approx(2 / 20)
    assert 0 < st.welch_p([0.1, 0.2, 0.3], [0.5, 0.6, 0.8]) < 0.05 and math.isnan(st.welch_p([1.0], [2.0, 3.0]))


def test_bca_covers_the_mean_of_a_skewed_distribution_near_its_nominal_rate():
    rng = np.random.default_rng(11)
    trials, n, covered = 300, 15, 0
    for i in range(trials):
        ci = st.bootstrap_mean_ci(rng.exponential(1.0, size=n), boots=1000, seed=i)
        covered += ci.lo <= 1.0 <= ci.hi
    assert ci.method == "BCa bootstrap"
    assert 0.88 <= covered / trials <= 0.99  # a percentile bootstrap of an exponential mean at n = 15 covers ~0.90


def test_a_bootstrap_at_few_seeds_is_the_t_interval_and_wider_than_the_percentile_one():
    x = [0.1, 0.3, 0.2]
    auto, pct = st.bootstrap_mean_ci(x), st.bootstrap_mean_ci(x, method="percentile")
    mean, half, _ = st.t_interval(x)
    assert (auto.lo, auto.hi) == (pytest.approx(mean - half), pytest.approx(mean + half))
    assert "t-interval" in auto.method
    assert auto.hi - auto.lo > 2 * (pct.hi - pct.lo)  # the percentile one cannot leave the data's range
    assert st.bootstrap_mean_ci([0.2, 0.2, 0.2]).method == "no spread" and math.isnan(st.bootstrap_mean_ci([1.0]).lo)


def test_the_ratio_is_paired_by_seed_and_fieller_is_exact_when_each_seed_holds_it():
    levels = {0: 0.2, 1: 0.35, 2: 0.5, 3: 0.3}
    r = st.paired_ratio_ci({s: 2 * v for s, v in levels.items()}, levels)  # spread between seeds, none in the ratio
    assert (r.n, r.ratio, r.lo, r.hi) == (4, pytest.approx(2.0), pytest.approx(2.0), pytest.approx(2.0))
    noisy = st.paired_ratio_ci({0: 0.6, 1: 0.7, 2: 0.65, 3: 0.5}, {0: 0.3, 1: 0.32, 2: 0.31, 3: 0.28})
    assert noisy.lo < noisy.ratio < noisy.hi and noisy.method == "Fieller, paired by seed"
    near_zero = st.paired_ratio_ci({0: 0.5, 1: 0.6, 2: 0.4}, {0: -0.1, 1: 0.1, 2: 0.05})
    assert (near_zero.lo, near_zero.hi) == (-math.inf, math.inf)  # the denominator is not clear of 0
    assert st.paired_ratio_ci({0: 1.0}, {1: 1.0}).n == 0 and math.isnan(st.paired_ratio_ci({0: 1.0}, {0: 2.0}).lo)
    rng = np.random.default_rng(5)
    den = {s: float(v) for s, v in enumerate(rng.uniform(0.2, 0.4, size=12))}
    boot = st.paired_ratio_ci({s: 2 * v + rng.normal(0, 0.02) for s, v in den.items()}, den, method="bootstrap")
    assert boot.lo < 2.0 < boot.hi and boot.method == "BCa bootstrap over seeds"


def test_holm_adjusts_step_down_within_the_declared_family_only():
    ps = {"a": 0.01, "b": 0.04, "c": 0.03}
    assert st.holm(ps, {"a", "b", "c"}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    within = st.holm(ps, {"a", "c"})  # b is exploratory: not corrected, not counted in m, no claim
    assert within["a"] == pytest.approx(0.02) and within["c"] == pytest.approx(0.03) and math.isnan(within["b"])
    adj = st.holm({0: 0.02, 1: float("nan"), 2: 0.02}, range(3))
    assert math.isnan(adj[1]) and adj[0] == adj[2] == pytest.approx(0.04)


def test_wilson_matches_the_textbook_interval():
    assert st.wilson(0, 19) == pytest.approx((0.0, 0.1682), abs=1e-4)
    assert st.wilson(10, 19) == pytest.approx((0.3171, 0.7267), abs=1e-4)
    assert st.wilson(19, 19) == pytest.approx((0.8318, 1.0), abs=1e-4)  # stays inside [0, 1]
    assert st.wilson(16, 32)[0] == pytest.approx(0.336, abs=1e-3)
    assert all(math.isnan(v) for v in st.wilson(0, 0))


def test_the_paired_t_power_and_sample_size_match_the_textbook_and_a_simulation():
    # G*Power, matched pairs: d = 0.5, alpha 0.05, power 0.8: 34 pairs two-sided (power 0.808), 27 one-sided
    assert st.paired_t_sample_size(0.5, 1.0, 0.05, 0.8, "two-sided") == 34
    assert st.paired_t_power(34, 0.5, 1.0, 0.05, "two-sided") == pytest.approx(0.808, abs=2e-3)
    assert st.paired_t_sample_size(0.5, 1.0, 0.05, 0.8, "greater") == 27
    assert st.paired_t_sample_size(-0.5, 1.0, 0.05, 0.8, "less") == 27
    n, delta, sd, alpha = 10, 0.04, 0.037, 0.05 / 3
    d = np.random.default_rng(0).normal(delta, sd, size=(40_000, n))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = float(np.mean(t > st.t_quantile(1 - alpha, n - 1)))
    assert st.paired_t_power(n, delta, sd, alpha) == pytest.approx(simulated, abs=0.01)


def test_ols_slope_known_values_and_degenerate_cases():
    from rods_core.statistics import ols_slope

    s = ols_slope([1, 2, 3, 4], [2, 4, 6, 8.5])
    # by hand: slope 10.75 / 5; residuals .1 -.05 -.2 .15 -> se sqrt(.075 / 2 / 5); t(2) 0.975 quantile 4.3027
    assert s.slope == pytest.approx(2.15)
    assert s.hi - s.slope == pytest.approx(4.302653 * math.sqrt(0.0075), rel=1e-5)
    assert s.p == pytest.approx(0.00162, abs=5e-5)
    assert math.isnan(ols_slope([1, 1, 1], [1, 2, 3]).slope)  # no spread in x
    two = ols_slope([0, 1], [0, 3])
    assert two.slope == 3 and math.isnan(two.lo)
    assert ols_slope([1, float("nan"), 2, 3], [1, 5, 2, 3]).n == 3

"""The project's statistics, in one home: Student-t and normal quantiles, one-sample and Wilson intervals, exact
sign and sign-flip tests, the paired t-test over run seeds, bootstrap intervals (BCa, t at few seeds), a ratio of
means paired by seed, a least-squares slope with its interval, Holm's correction within a declared family, and the
paired t-test's power and sample size.

Pure functions over plain numbers: numpy, math and the standard library, no scipy (the t distribution's CDF is the
regularized incomplete beta function computed here, its quantile that CDF inverted, the noncentral t's tail an
integral over the chi distribution). Where the textbook recipe misleads at the few seeds an experiment runs, these
functions do the safer thing and say which they did:
- paired differences with no spread have no t statistic: their p is the exact sign-flip p (3 identical differences:
  2/8 = 0.25), never 0; below SMALL_K seeds the t-test's normality cannot be checked, so `paired_t`'s p is the
  exact sign-flip p there too (the t p is kept beside it);
- below SMALL_K units a percentile bootstrap of a mean is too narrow (it treats the estimated spread as known), so
  `bootstrap_mean_ci` gives the t-interval there and BCa from SMALL_K up;
- a ratio of two arms' means is paired by seed (Fieller's interval, or a bootstrap resampling seeds), never built by
  resampling a run's autocorrelated steps as if they were independent draws.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

SMALL_K = 6  # below this many seeds: exact p-values and t-intervals rather than the t-test's p and a bootstrap
EXACT_FLIPS = 16  # sign-flip tests enumerate all 2^n flips up to this n, and draw FLIP_DRAWS of them above it
FLIP_DRAWS = 1 << 16
ALTERNATIVES = ("two-sided", "greater", "less")
_NORMAL = NormalDist()


# ----- the t and normal distributions --------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` > 0 degrees of freedom (not necessarily whole: Welch's)."""
    if math.isnan(t) or not df > 0:
        return float("nan")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isnan(t) or not df > 0:
        return float("nan")
    return 0.0 if math.isinf(t) else _betai(df / 2.0, 0.5, df / (df + t * t))


def t_p(t: float, df: float, alternative: str = "two-sided") -> float:
    """The t-test's p for statistic `t`: two-sided, or one-sided for a true value "greater" or "less" than 0."""
    if alternative == "two-sided":
        return t_two_sided_p(t, df)
    # the upper tail as t_cdf(-t), never 1 - t_cdf(t): that subtraction returns 0 once the tail is below 1e-16
    return t_cdf(-t, df) if _side(alternative) > 0 else t_cdf(t, df)


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` > 0 degrees of freedom (t_quantile(0.975, 3) = 3.182), by bisection
    on t_cdf to 1e-12; the normal quantile for infinite df."""
    if not 0.0 < p < 1.0 or not df > 0:
        return float("nan")
    if math.isinf(df):
        return _NORMAL.inv_cdf(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return 0.5 * (lo + hi)


def normal_quantile(p: float) -> float:
    """The p-quantile of the standard normal (normal_quantile(0.975) = 1.959964)."""
    return _NORMAL.inv_cdf(p) if 0.0 < p < 1.0 else float("nan")


def _side(alternative: str) -> int:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, not {alternative!r}")
    return {"two-sided": 0, "greater": 1, "less": -1}[alternative]


def _finite(values) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))], dtype=float)


# ----- one sample ----------------------------------------------------------------------------------------------
def t_interval(values, alpha: float = 0.05) -> tuple[float, float | None, int]:
    """(mean, half-width of the two-sided 1 - alpha Student-t interval, n) over the finite values; the half-width
    is None when n < 2."""
    xs = _finite(values)
    n = xs.size
    if n == 0:
        return float("nan"), None, 0
    mean = float(xs.mean())
    if n < 2:
        return mean, None, n
    return mean, t_quantile(1.0 - alpha / 2, n - 1) * float(xs.std(ddof=1)) / math.sqrt(n), n


def wilson(successes: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """The Wilson score interval of a proportion, successes of n trials; (nan, nan) for n = 0. Unlike the normal
    approximation it stays inside [0, 1] and is not zero-width at 0 or 1."""
    if n <= 0:
        return math.nan, math.nan
    z, p = normal_quantile(1.0 - alpha / 2), successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# ----- exact tests ---------------------------------------------------------------------------------------------
def sign_test_p(above: int, below: int, alternative: str = "two-sided") -> float:
    """The exact sign test (ties dropped) at 1/2: two-sided, twice the smaller binomial tail (at most 1); "greater",
    P(at least `above` of n above)."""
    side, n = _side(alternative), above + below
    if n == 0:
        return 1.0

    def tail(k: int) -> float:  # P(X >= k) for X ~ Binomial(n, 1/2)
        return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n

    if side > 0:
        return tail(above)
    if side < 0:
        return tail(below)
    return min(1.0, 2 * tail(max(above, below)))


def sign_flip_p(diffs, alternative: str = "two-sided", seed: int = 0) -> float:
    """The paired randomization test of a zero mean: the share of sign flips of the differences whose sum is at least
    as extreme as the observed one; exact over all 2^n flips up to EXACT_FLIPS, over FLIP_DRAWS random flips above
    (then (1 + hits) / (1 + draws), still a valid p). Valid without normality, under symmetry about 0; its smallest
    two-sided p is 2 / 2^n (n = 3: 0.25)."""
    side, d = _side(alternative), _finite(diffs)
    if d.size == 0:
        return float("nan")
    if d.size <= EXACT_FLIPS:
        signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
    else:
        signs = np.random.default_rng(seed).choice((-1, 1), size=(FLIP_DRAWS, d.size))
    sums, observed = signs @ d, float(d.sum())
    tol = 1e-9 * float(np.abs(d).sum())  # equal sums computed in another order still tie
    hits = (
        sums >= observed - tol
        if side > 0
        else sums <= observed + tol
        if side < 0
        else np.abs(sums) >= abs(observed) - tol
    )
    if d.size <= EXACT_FLIPS:
        return float(hits.mean())
    return float((1 + hits.sum()) / (1 + len(sums)))


# ----- paired comparisons --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedResult:
    """The mean of paired differences with its two-sided 1 - alpha t-interval and the test of a zero mean."""

    n: int
    mean: float
    sd: float
    lo: float  # nan below 2 pairs; lo = hi = mean when every difference is the same
    hi: float
    p: float  # what a decision reads: p_t, or p_exact when the spread is 0 or n < the exact threshold
    p_t: float  # the paired t-test's (nan when the spread is 0)
    p_exact: float  # the exact sign-flip test's
    method: str  # which p is `p`, and why

    def as_dict(self) -> dict:
        return asdict(self)


def _no_spread(d: np.ndarray, sd: float) -> bool:
    """The values are all equal: sd is 0, or only the float rounding of equal values computed apart."""
    return sd <= 1e-10 * float(np.abs(d).max()) or bool(np.all(d == d[0]))


def paired_t(diffs, alpha: float = 0.05, alternative: str = "two-sided", exact_below: int = SMALL_K) -> PairedResult:
    """The paired t-interval and test over per-seed differences (finite values only). `p` is the t-test's, except
    that it is the exact sign-flip p when the differences have no spread (no t statistic: never p = 0) or there are
    fewer than `exact_below` of them (normality cannot be checked)."""
    _side(alternative)
    d = _finite(diffs)
    n, nan = int(d.size), float("nan")
    if n < 2:
        mean = float(d.mean()) if n else nan
        return PairedResult(n, mean, nan, nan, nan, nan, nan, nan, f"{n} pair(s): no interval, no test")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    p_exact = sign_flip_p(d, alternative)
    if _no_spread(d, sd):
        return PairedResult(n, mean, 0.0, mean, mean, p_exact, nan, p_exact, "exact sign-flip (differences all equal)")
    half = t_quantile(1.0 - alpha / 2, n - 1) * sd / math.sqrt(n)
    p_t = t_p(mean / (sd / math.sqrt(n)), n - 1, alternative)
    if n < exact_below:
        method, p = f"exact sign-flip (n < {exact_below})", p_exact
    else:
        method, p = "paired t", p_t
    return PairedResult(n, mean, sd, mean - half, mean + half, p, p_t, p_exact, method)


def permutation_p(a, b, seed: int = 0) -> float:
    """The two-sample randomization test of equal means, two-sided: the share of relabellings of the pooled values
    whose difference of means is at least as large as the observed one; exact when there are at most
    FLIP_DRAWS relabellings, over FLIP_DRAWS random ones above ((1 + hits) / (1 + draws)). Its smallest p is
    1 / C(na + nb, na) (3 runs a side: 0.05)."""
    xa, xb = _finite(a), _finite(b)
    if not xa.size or not xb.size:
        return float("nan")
    pooled, na = np.concatenate([xa, xb]), xa.size
    observed, tol = abs(float(xa.mean() - xb.mean())), 1e-9 * float(np.abs(pooled).sum())
    exact = math.comb(pooled.size, na) <= FLIP_DRAWS
    if exact:
        groups = np.zeros((math.comb(pooled.size, na), pooled.size), dtype=bool)
        for row, chosen in enumerate(itertools.combinations(range(pooled.size), na)):
            groups[row, list(chosen)] = True
    else:
        rng = np.random.default_rng(seed)
        groups = np.argsort(rng.random((FLIP_DRAWS, pooled.size)), axis=1) < na
    diffs = (groups @ pooled) / na - (~groups @ pooled) / (pooled.size - na)
    hits = np.abs(diffs) >= observed - tol
    return float(hits.mean()) if exact else float((1 + hits.sum()) / (1 + len(hits)))


def welch_p(a, b) -> float:
    """Welch's two-sided t-test of mean(a) = mean(b) over the finite values; nan with fewer than 2 a side. When
    neither side has any spread there is no t statistic: the exact permutation p (permutation_p), never 0."""
    xa, xb = _finite(a), _finite(b)
    if xa.size < 2 or xb.size < 2:
        return float("nan")
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    if _no_spread(xa, math.sqrt(va)) and _no_spread(xb, math.sqrt(vb)):
        return permutation_p(xa, xb)
    df = (va + vb) ** 2 / ((va**2 / (xa.size - 1)) + (vb**2 / (xb.size - 1)))
    return t_two_sided_p(float(xa.mean() - xb.mean()) / math.sqrt(va + vb), df)


# ----- the bootstrap -------------------------------------------------------------------------------------------
def bootstrap_indices(n: int, boots: int, rng: np.random.Generator, identity_first: bool = False) -> np.ndarray:
    """boots x n unit indices drawn with replacement; with `identity_first` one more row first, 0..n-1 (the point
    estimate computed the same way as the resamples)."""
    idx = rng.integers(0, n, size=(boots + identity_first, n))
    if identity_first:
        idx[0] = np.arange(n)
    return idx


def quantile_interval(draws, alpha: float = 0.05, axis: int | None = None) -> tuple:
    """The alpha/2 and 1 - alpha/2 quantiles of bootstrap draws, as order statistics (no interpolation, so draws
    that are inf, e.g. a target never reached, give an inf end rather than nan)."""
    lo, hi = np.quantile(np.asarray(draws, dtype=float), [alpha / 2, 1 - alpha / 2], axis=axis, method="inverted_cdf")
    return (float(lo), float(hi)) if axis is None else (lo, hi)


def bootstrap_stat(statistic: Callable[..., float], *sizes: int, boots: int = 2000, seed: int = 0) -> np.ndarray:
    """`statistic(*indices)` over `boots` resamples, the point estimate first (row 0: every sample as it is): one
    index array per sample size, each sample resampled with replacement on its own (one size: units resampled
    jointly, e.g. seeds or paired steps). The one loop for statistics no closed form covers (a reach fraction, a
    ratio of medians)."""
    rng = np.random.default_rng(seed)
    draws = [bootstrap_indices(n, boots, rng, identity_first=True) for n in sizes]
    return np.asarray([statistic(*rows) for rows in zip(*draws, strict=True)], dtype=float)


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    method: str  # "BCa bootstrap", "t (n < SMALL_K)", "percentile bootstrap", ...


def bca_interval(point: float, draws: np.ndarray, jackknife: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The bias-corrected and accelerated bootstrap interval: `draws` the statistic over resamples, `jackknife` it
    with each unit left out in turn (the acceleration)."""
    draws = np.asarray(draws, dtype=float)
    share = (np.sum(draws < point) + 0.5 * np.sum(draws == point)) / draws.size
    z0 = normal_quantile(min(max(share, 1 / (draws.size + 1)), draws.size / (draws.size + 1)))
    dev = jackknife.mean() - jackknife
    denom = 6.0 * float(np.sum(dev**2)) ** 1.5
    accel = float(np.sum(dev**3)) / denom if denom > 0 else 0.0
    ends = []
    for q in (alpha / 2, 1 - alpha / 2):
        z = z0 + normal_quantile(q)
        ends.append(_NORMAL.cdf(z0 + z / (1 - accel * z)))
    lo, hi = np.quantile(draws, ends, method="inverted_cdf")
    return float(lo), float(hi)


def bootstrap_mean_ci(values, alpha: float = 0.05, method: str = "auto", boots: int = 4000, seed: int = 0) -> Interval:
    """An interval for the mean of independent units (run seeds, or per-seed differences). method "auto": the
    t-interval below SMALL_K units, where any bootstrap is too narrow, BCa from SMALL_K up; or "bca", "t",
    "percentile". nan ends below 2 units; a point when every value is the same."""
    if method not in ("auto", "bca", "t", "percentile"):
        raise ValueError(f"method must be auto, bca, t or percentile, not {method!r}")
    x = _finite(values)
    if x.size < 2:
        return Interval(float("nan"), float("nan"), f"{x.size} value(s): no interval")
    mean = float(x.mean())
    if _no_spread(x, float(x.std())):
        return Interval(mean, mean, "no spread")
    method = ("t" if x.size < SMALL_K else "bca") if method == "auto" else method
    if method == "t":
        _, half, _ = t_interval(x, alpha)
        return Interval(mean - half, mean + half, f"t-interval (n = {x.size} < {SMALL_K}: no bootstrap)")
    means = x[bootstrap_indices(x.size, boots, np.random.default_rng(seed))].mean(axis=1)
    if method == "percentile":
        return Interval(*quantile_interval(means, alpha), "percentile bootstrap")
    jack = (x.sum() - x) / (x.size - 1)
    return Interval(*bca_interval(mean, means, jack, alpha), "BCa bootstrap")


# ----- a ratio of means, paired by seed ------------------------------------------------------------------------
@dataclass(frozen=True)
class RatioResult:
    n: int  # seeds both sides hold
    ratio: float  # mean(num) / mean(den) over those seeds
    lo: float  # -inf / inf: Fieller's interval is unbounded (the denominator's mean is not clear of 0)
    hi: float
    method: str

    def as_tuple(self) -> tuple[float, float, float]:
        return self.ratio, self.lo, self.hi


def fieller(num: np.ndarray, den: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """Fieller's 1 - alpha interval for mean(num) / mean(den) over paired units (their covariance counted), exact
    under bivariate normality at any n >= 2; (-inf, inf) when the denominator's mean is not clear of 0."""
    n = num.size
    mx, my = float(num.mean()), float(den.mean())
    cov = np.cov(num, den, ddof=1) / n
    t2 = t_quantile(1 - alpha / 2, n - 1) ** 2
    a = my * my - t2 * cov[1, 1]
    b = mx * my - t2 * cov[0, 1]
    c = mx * mx - t2 * cov[0, 0]
    disc = b * b - a * c
    if a <= 0 or disc < 0:
        return -math.inf, math.inf
    root = math.sqrt(disc)
    return float((b - root) / a), float((b + root) / a)


def paired_ratio_ci(
    num: Mapping, den: Mapping, alpha: float = 0.05, method: str = "fieller", boots: int = 4000, seed: int = 0
) -> RatioResult:
    """mean(num) / mean(den) over the seeds both map to finite values ({seed: a run's level}, e.g. its mean over the
    last half of its steps), with a paired interval: Fieller's (method "fieller"), or a BCa bootstrap resampling
    seeds (method "bootstrap"; Fieller below SMALL_K seeds). nan ends below 2 seeds."""
    seeds = sorted(s for s in set(num) & set(den) if math.isfinite(num[s]) and math.isfinite(den[s]))
    x, y = np.asarray([num[s] for s in seeds], dtype=float), np.asarray([den[s] for s in seeds], dtype=float)
    if not seeds:
        return RatioResult(0, float("nan"), float("nan"), float("nan"), "no seed in common")
    ratio = float(x.mean() / y.mean()) if y.mean() != 0 else math.inf
    if len(seeds) < 2:
        return RatioResult(1, ratio, float("nan"), float("nan"), "one seed: no interval")
    if method == "bootstrap" and len(seeds) >= SMALL_K:
        idx = bootstrap_indices(len(seeds), boots, np.random.default_rng(seed))
        with np.errstate(divide="ignore", invalid="ignore"):
            draws = x[idx].mean(axis=1) / y[idx].mean(axis=1)
            jack = (x.sum() - x) / (y.sum() - y)
        return RatioResult(len(seeds), ratio, *bca_interval(ratio, draws, jack, alpha), "BCa bootstrap over seeds")
    if method not in ("fieller", "bootstrap"):
        raise ValueError(f"method must be fieller or bootstrap, not {method!r}")
    return RatioResult(len(seeds), ratio, *fieller(x, y, alpha), "Fieller, paired by seed")


# ----- a straight line through paired units ---------------------------------------------------------------------
@dataclass(frozen=True)
class Slope:
    n: int  # units with both values finite
    slope: float  # least squares of y on x
    lo: float  # the two-sided 1 - alpha t-interval (n - 2 degrees of freedom); nan below 3 units or no spread in x
    hi: float
    p: float  # two-sided, of slope = 0


def ols_slope(x, y, alpha: float = 0.05) -> Slope:
    """The least-squares slope of y on x over the units where both are finite, with its t-interval and p (the
    textbook standard error: residual variance over the spread of x); nan ends when it cannot be estimated."""
    pairs = [
        (float(a), float(b)) for a, b in zip(x, y, strict=True) if math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    n, nan = len(pairs), float("nan")
    xs, ys = np.asarray([p[0] for p in pairs]), np.asarray([p[1] for p in pairs])
    sxx = float(((xs - xs.mean()) ** 2).sum()) if n else 0.0
    if n < 2 or sxx == 0:
        return Slope(n, nan, nan, nan, nan)
    slope = float(((xs - xs.mean()) * (ys - ys.mean())).sum() / sxx)
    if n < 3:
        return Slope(n, slope, nan, nan, nan)
    resid = ys - ys.mean() - slope * (xs - xs.mean())
    se = math.sqrt(float((resid**2).sum()) / (n - 2) / sxx)
    if se == 0:
        return Slope(n, slope, slope, slope, 0.0 if slope else 1.0)
    half = t_quantile(1 - alpha / 2, n - 2) * se
    return Slope(n, slope, slope - half, slope + half, t_two_sided_p(slope / se, n - 2))


# ----- multiplicity --------------------------------------------------------------------------------------------
def holm(pvalues: Mapping[Hashable, float], family: Collection[Hashable]) -> dict[Hashable, float]:
    """Holm's step-down adjustment within a declared family: each name in `family` with a finite p gets its
    adjusted p (the family-wise error held over exactly those); a name outside the family, or with p nan, gets nan
    (it is not a test of the family, so it is neither corrected nor allowed a claim)."""
    inside = sorted((p, k) for k, p in pvalues.items() if k in family and not math.isnan(p))
    out = {k: float("nan") for k in pvalues}
    running = 0.0
    for rank, (p, k) in enumerate(inside):
        running = max(running, min(1.0, (len(inside) - rank) * p))
        out[k] = running
    return out


# ----- power of the paired t-test ------------------------------------------------------------------------------
def _upper_tail(c: float, df: int, shift: float) -> float:
    """P(T' > c) for the noncentral t with `df` degrees of freedom and noncentrality `shift`: T' = (Z + shift) /
    (chi_df / sqrt(df)), integrated over the chi density on a fine grid."""
    w = np.linspace(1e-9, math.sqrt(df) + 15.0, 8001)
    log_density = math.log(2) - (df / 2) * math.log(2) - math.lgamma(df / 2) + (df - 1) * np.log(w) - w * w / 2
    z = shift - c * w / math.sqrt(df)
    normal = 0.5 * np.asarray([math.erfc(-v / math.sqrt(2)) for v in z])
    return float(np.trapezoid(normal * np.exp(log_density), w))


def paired_t_power(n: int, delta: float, sd: float, alpha: float = 0.05, alternative: str = "greater") -> float:
    """The power of the paired t-test over `n` pairs to find a true mean difference `delta` when the differences'
    SD is `sd`: one-sided ("greater": delta > 0 sought) or two-sided at level `alpha`."""
    side = _side(alternative)
    if n < 2 or sd <= 0:
        return float("nan")
    df, shift = n - 1, delta * math.sqrt(n) / sd
    if side != 0:
        return _upper_tail(t_quantile(1 - alpha, df), df, side * shift)
    c = t_quantile(1 - alpha / 2, df)
    return _upper_tail(c, df, shift) + _upper_tail(c, df, -shift)


def paired_t_sample_size(
    delta: float, sd: float, alpha: float = 0.05, power: float = 0.8, alternative: str = "greater", max_n: int = 100_000
) -> int:
    """The fewest pairs (seeds) for which the paired t-test reaches `power` against a true difference `delta` with
    differences' SD `sd` (paired_t_power); for d = delta / sd = 0.5, two-sided alpha 0.05, power 0.8: 34."""
    if delta == 0 or sd <= 0:
        raise ValueError("delta must be non-zero and sd positive: no sample size finds a zero effect")
    normal = ((normal_quantile(1 - alpha / (2 if alternative == "two-sided" else 1)) + normal_quantile(power)) * sd
              / abs(delta)) ** 2  # fmt: skip
    n = max(2, int(normal) - 1)  # the t-test needs at least the normal approximation's n, less rounding
    sought = -abs(delta) if alternative == "less" else abs(delta)
    while paired_t_power(n, sought, sd, alpha, alternative) < power:
        n += 1
        if n > max_n:
            raise ValueError(f"more than {max_n} pairs needed")
    return n

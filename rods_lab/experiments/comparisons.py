"""Comparisons of two arms that fit the design: paired by run seed where both arms ran the same seeds (same
held-out set, same warm start, same pool per seed), unpaired otherwise; and the verdict one gives with its Holm-adjusted p.

Paired: the per-seed differences a_s - b_s, their mean with a paired Student-t interval, a bootstrap over seeds
(BCa; the t-interval below rods_core.statistics.SMALL_K seeds, where a bootstrap is too narrow), a sign count and
rods_core.statistics.paired_t's two-sided p (exact sign-flip when the differences have no spread or are few).
Unpaired: the difference of means with a bootstrap resampling runs within each arm and Welch's t-test. The
arithmetic is rods_core.statistics'; this module fits it to two arms' {seed: value} maps.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from rods_core.statistics import (
    bootstrap_indices,
    bootstrap_mean_ci,
    paired_t,
    quantile_interval,
    sign_test_p,
    welch_p,
)

ALPHA = 0.05


@dataclass(frozen=True)
class Comparison:
    """a - b on one figure: point, 95% interval (paired t, or unpaired bootstrap), bootstrap interval, p."""

    paired: bool
    n: int  # seeds both arms ran (paired), or the smaller arm's runs (unpaired)
    diff: float
    lo: float
    hi: float
    boot_lo: float
    boot_hi: float
    above: int  # paired: seeds where a > b
    below: int  # paired: seeds where a < b
    p: float  # two-sided: paired_t's (t, or exact sign-flip with no spread or few seeds), or Welch's
    p_sign: float  # two-sided exact sign test (paired; nan unpaired)
    boot_method: str = "percentile bootstrap"  # what boot_lo .. boot_hi is (a t-interval below SMALL_K seeds)
    p_method: str = "Welch"  # which test gave p

    def as_dict(self) -> dict:
        return asdict(self)


# ----- one comparison -----------------------------------------------------------------------------------------
def _finite(xs) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def paired(a: dict, b: dict, boots: int = 4000, seed: int = 0) -> Comparison | None:
    """a - b over the run seeds both hold ({seed: value}); None when they share no seed with finite values."""
    seeds = sorted(s for s in set(a) & set(b) if math.isfinite(a[s]) and math.isfinite(b[s]))
    if not seeds:
        return None
    d = np.asarray([a[s] - b[s] for s in seeds], dtype=float)
    r = paired_t(d)
    boot = bootstrap_mean_ci(d, boots=boots, seed=seed)
    lo, hi = (boot.lo, boot.hi) if r.n > 1 else (r.mean, r.mean)  # one seed: the bootstrap is the point
    above, below = int((d > 0).sum()), int((d < 0).sum())
    return Comparison(
        True, r.n, r.mean, r.lo, r.hi, lo, hi, above, below, r.p, sign_test_p(above, below), boot.method, r.method
    )


def unpaired(a: list[float], b: list[float], boots: int = 4000, seed: int = 0) -> Comparison | None:
    """mean(a) - mean(b) of two arms that share no run seed: a percentile bootstrap resampling runs within each arm
    (the interval reported) and Welch's t-test; None when either side is empty."""
    xa, xb = np.asarray(_finite(a)), np.asarray(_finite(b))
    if not xa.size or not xb.size:
        return None
    rng = np.random.default_rng(seed)
    da = xa[bootstrap_indices(xa.size, boots, rng)].mean(axis=1)
    db = xb[bootstrap_indices(xb.size, boots, rng)].mean(axis=1)
    lo, hi = quantile_interval(da - db)
    diff = float(xa.mean() - xb.mean())
    n = int(min(xa.size, xb.size))
    return Comparison(False, n, diff, lo, hi, lo, hi, 0, 0, welch_p(xa, xb), float("nan"))


def compare(a: dict, b: dict, boots: int = 4000) -> Comparison | None:
    """Paired when the two arms share run seeds ({seed: value} each), else unpaired over their runs."""
    return paired(a, b, boots) or unpaired(list(a.values()), list(b.values()), boots)


# ----- a verdict --------------------------------------------------------------------------------------------
def decide(c: Comparison | None, p_adjusted: float, min_n: int) -> str:
    """'beats', 'is beaten by', 'does not beat' (Holm-adjusted p >= ALPHA, or the interval spans 0), 'cannot be
    compared' (fewer than `min_n` seeds or runs), or 'not measured'."""
    if c is None or math.isnan(c.diff):
        return "not measured"
    if c.n < min_n or math.isnan(p_adjusted):
        return f"cannot be compared (n < {min_n}) with"
    if p_adjusted < ALPHA and c.lo > 0:
        return "beats"
    if p_adjusted < ALPHA and c.hi < 0:
        return "is beaten by"
    return "does not beat"

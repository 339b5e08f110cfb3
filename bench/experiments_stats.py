"""Comparisons of two arms that fit the design: paired by run seed where both arms ran the same seeds (same
held-out set, same warm start, same pool per seed), unpaired otherwise; and Holm's correction over a table of them.

Paired: the per-seed differences a_s - b_s, their mean with a paired Student-t interval, a percentile bootstrap
over seeds, a sign count and the paired t-test's two-sided p. Unpaired: the difference of means with a
bootstrap resampling runs within each arm and Welch's t-test. Pure functions over plain lists; no scipy (the
t distribution's CDF is the regularized incomplete beta function, computed here).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bench.experiments import t_interval

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
    p: float  # two-sided: paired t-test, or Welch's
    p_sign: float  # two-sided exact sign test (paired; nan unpaired)

    def as_dict(self) -> dict:
        return asdict(self)


# ----- the t distribution ---------------------------------------------------------------------------------------
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


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isnan(t) or df <= 0:
        return float("nan")
    if math.isinf(t):
        return 0.0
    return _betai(df / 2.0, 0.5, df / (df + t * t))


def sign_test_p(above: int, below: int) -> float:
    """Two-sided exact sign test (ties dropped): twice the smaller binomial tail at 1/2, at most 1."""
    n = above + below
    if n == 0:
        return 1.0
    k = min(above, below)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


# ----- one comparison -----------------------------------------------------------------------------------------
def _finite(xs) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def paired(a: dict, b: dict, boots: int = 4000, seed: int = 0) -> Comparison | None:
    """a - b over the run seeds both hold ({seed: value}); None when they share no seed with finite values."""
    seeds = sorted(s for s in set(a) & set(b) if math.isfinite(a[s]) and math.isfinite(b[s]))
    if not seeds:
        return None
    d = np.asarray([a[s] - b[s] for s in seeds], dtype=float)
    mean, half, n = t_interval(d)
    lo, hi = (mean - half, mean + half) if half is not None else (float("nan"), float("nan"))
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    if n < 2:
        p = float("nan")
    elif sd == 0:
        p = 0.0 if mean != 0 else 1.0
    else:
        p = t_two_sided_p(mean / (sd / math.sqrt(n)), n - 1)
    idx = np.random.default_rng(seed).integers(0, n, size=(boots, n))
    blo, bhi = np.percentile(d[idx].mean(axis=1), [2.5, 97.5])
    above, below = int((d > 0).sum()), int((d < 0).sum())
    return Comparison(True, n, mean, lo, hi, float(blo), float(bhi), above, below, p, sign_test_p(above, below))


def unpaired(a: list[float], b: list[float], boots: int = 4000, seed: int = 0) -> Comparison | None:
    """mean(a) - mean(b) of two arms that share no run seed: a bootstrap resampling runs within each arm (the
    interval reported) and Welch's t-test; None when either side is empty."""
    xa, xb = np.asarray(_finite(a)), np.asarray(_finite(b))
    if not xa.size or not xb.size:
        return None
    rng = np.random.default_rng(seed)
    da = xa[rng.integers(0, xa.size, size=(boots, xa.size))].mean(axis=1)
    db = xb[rng.integers(0, xb.size, size=(boots, xb.size))].mean(axis=1)
    lo, hi = (float(v) for v in np.percentile(da - db, [2.5, 97.5]))
    diff = float(xa.mean() - xb.mean())
    p = float("nan")
    if xa.size > 1 and xb.size > 1:
        va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
        se = math.sqrt(va + vb)
        if se == 0:
            p = 0.0 if diff else 1.0
        else:
            df = (va + vb) ** 2 / ((va**2 / (xa.size - 1)) + (vb**2 / (xb.size - 1)))
            p = t_two_sided_p(diff / se, df)
    return Comparison(False, int(min(xa.size, xb.size)), diff, lo, hi, lo, hi, 0, 0, p, float("nan"))


def compare(a: dict, b: dict, boots: int = 4000) -> Comparison | None:
    """Paired when the two arms share run seeds ({seed: value} each), else unpaired over their runs."""
    return paired(a, b, boots) or unpaired(list(a.values()), list(b.values()), boots)


# ----- a table of comparisons ---------------------------------------------------------------------------------
def holm(ps: list[float]) -> list[float]:
    """Holm's step-down adjustment of p-values (family-wise error), in the input's order; nan stays nan and
    does not count in the family."""
    order = sorted((p, i) for i, p in enumerate(ps) if not math.isnan(p))
    m, out, running = len(order), [float("nan")] * len(ps), 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


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

"""The decision: paired samples → per-class verdicts → run verdict (docs/design.md §5). Pure.

This module holds the statistics the decision rests on (below); the rest is imported from its
module: the data and the per-class estimate (`estimate`: `Pair`, `Policy`, `Verdict`), the run
verdict (`verdict`: `evaluate` and the rules docs/decision.md documents), the plausibility
checks (`plausible`), a keep's confirmation (`confirmation`), the external truth
(`external_truth`), the output audit (`audit`); the Monte Carlo check of the procedure is
experiments/simulate_decisions.py.

Small statistics with no dependencies: the one geometric mean and the one quantile of
kopt, Student's t, the generalized ESD outlier test.

Pure functions. `geomean` and `quantile` are the only ones in the project (the report, the
projections, the API and the TUI call these); their edge behaviour is one rule:

- no values: None (absence, not a number: NaN would slip through comparisons and print
  as "nan");
- a value that is not a positive finite number (for a quantile: not finite): ValueError
  naming it. A latency or ratio of 0, a negative one, NaN or inf is a bug or a missing
  measurement, and what "missing" means is the caller's to say: filter with
  `positive_finite(values)` where missing entries are expected (records, reports). A zero
  never silently leaves a mean.

Student's t CDF is computed from the regularized incomplete beta function (continued
fraction, the classic Lentz evaluation), quantiles by bisection; accurate to ~1e-10, far
beyond what a decision needs. Quantiles are cached: a decision asks for the same few
(p, df) pairs over and over.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom (df > 0)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), not {p}")
    if df <= 0:
        raise ValueError(f"df must be > 0, not {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e15:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@lru_cache(maxsize=4096)
def f_quantile(p: float, d1: float, d2: float) -> float:
    """The p-quantile of Fisher's F with (d1, d2) degrees of freedom (both > 0)."""
    if not 0.0 < p < 1.0 or d1 <= 0 or d2 <= 0:
        raise ValueError(f"f_quantile needs 0 < p < 1 and positive degrees of freedom, not {p}, {d1}, {d2}")

    def cdf(f: float) -> float:
        return betainc(d1 / 2.0, d2 / 2.0, d1 * f / (d1 * f + d2))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2.0
        if hi > 1e15:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def stdev(xs: list[float]) -> float:
    """Sample standard deviation (n - 1 in the denominator); NaN below two values."""
    if len(xs) < 2:
        return math.nan
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def positive_finite(values: Iterable[object]) -> list[float]:
    """The entries that are positive finite numbers (None, text, bools, 0, NaN and inf
    left out): what a caller hands `geomean` when missing entries mean "not measured"."""
    out = []
    for v in values:
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            out.append(float(v))
    return out


def geomean(values: Iterable[float], weights: Iterable[float] | None = None) -> float | None:
    """The geometric mean exp(sum(w * log v) / sum(w)) (equal weights by default).

    None for no values; ValueError for a value that is not a positive finite number, or a
    weight that is not a positive finite number (see the module's one rule).
    """
    xs = list(values)
    ws = None if weights is None else list(weights)
    if ws is not None and len(ws) != len(xs):
        raise ValueError(f"geomean: {len(xs)} values but {len(ws)} weights")
    for v in xs:  # a float is checked by its range alone (NaN fails it): the decision calls this a lot
        if (type(v) is not float and (isinstance(v, bool) or not isinstance(v, int | float))) or not 0.0 < v < math.inf:
            raise ValueError(f"geomean of {v!r}: every value must be a positive finite number")
    for w in ws or ():
        if not 0.0 < w < math.inf:
            raise ValueError(f"geomean weight {w!r}: every weight must be a positive finite number")
    if not xs:
        return None
    if ws is None:
        return math.exp(math.fsum(map(math.log, xs)) / len(xs))
    return math.exp(math.fsum([w * math.log(v) for v, w in zip(xs, ws, strict=True)]) / math.fsum(ws))


def quantile(values: Iterable[float], q: float) -> float | None:
    """The q-quantile (0 <= q <= 1), interpolated linearly between order statistics at
    position (n - 1) * q (numpy's default, "linear"): p10 and p90 of a handful of samples
    are honest interpolations, not invented tails. None for no values; ValueError for q
    outside [0, 1] or a value that is not finite."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is not in [0, 1]")
    s = sorted(values)
    for v in s:
        if not math.isfinite(v):
            raise ValueError(f"quantile of {v!r}: every value must be finite")
    if not s:
        return None
    pos = (len(s) - 1) * q
    i = int(math.floor(pos))
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def median(values: Iterable[float]) -> float | None:
    return quantile(values, 0.5)


@lru_cache(maxsize=4096)
def esd_critical(n: int, i: int, alpha: float) -> float:
    """Rosner's critical value for the i-th (1-based) step of the generalized ESD test on
    n values: the largest studentized deviation a normal sample of n - i + 1 values shows
    with probability alpha (Bonferroni over the values)."""
    m = n - i + 1
    t = t_quantile(1.0 - alpha / (2.0 * m), m - 2)
    return (m - 1) * t / math.sqrt((m - 2 + t * t) * m)


def esd_outliers(xs: list[float], max_outliers: int, alpha: float = 0.01) -> list[int]:
    """Indices of outliers in xs by the generalized ESD test (Rosner 1983).

    Removes the most extreme value up to `max_outliers` times, and declares outliers the
    values removed up to the last step whose studentized deviation beat its critical
    value; looking past a step that failed is what protects against masking (two spikes
    hiding each other). Under normal data the chance of declaring any outlier is about
    `alpha`. Needs at least 4 values per step.
    """
    idx = list(range(len(xs)))
    vals = list(xs)
    removed: list[int] = []
    found = 0
    for step in range(1, max_outliers + 1):
        n_left = len(vals)
        if n_left < 4:
            break
        m = mean(vals)
        s = stdev(vals)
        if not s > 0:
            break
        j = max(range(n_left), key=lambda k: abs(vals[k] - m))
        r = abs(vals[j] - m) / s
        removed.append(idx.pop(j))
        vals.pop(j)
        if r > esd_critical(len(xs), step, alpha):
            found = step
    return sorted(removed[:found])

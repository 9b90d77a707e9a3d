"""The statistics results.md reports (pure): a latency summary per config, speedups, geomeans.

`summarize(values)` is the diffusion-kernel rules' set for one workload: median, mean,
sample standard deviation (n - 1), min, p10 and p90, with the number of samples it rests
on. Percentiles interpolate linearly between order statistics (position (n - 1) * q, the
method numpy calls "linear"), so p10 and p90 of a handful of samples are honest
interpolations, not invented tails.

Speedups are oriented so that above 1 is better whatever the metric's direction:
baseline / final for a latency ("min"), final / baseline for a throughput ("max"). The
equal-weight geometric mean of speedups is exp(mean(log s)).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from kopt_supervisor.engine.decide.stats import geomean as stats_geomean
from kopt_supervisor.engine.decide.stats import positive_finite, quantile


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    std: float | None
    """Sample standard deviation; None for a single sample."""
    min: float
    max: float
    p10: float
    p90: float

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "n": self.n,
            "median": self.median,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "p10": self.p10,
            "p90": self.p90,
        }


def finite(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def summarize(values: Iterable[float]) -> Summary | None:
    """The summary of the finite values, or None when there are none."""
    xs = sorted(finite(values))
    if not xs:
        return None
    n = len(xs)
    mean = math.fsum(xs) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    return Summary(n=n, median=_q(xs, 0.5), mean=mean, std=std, min=xs[0], max=xs[-1], p10=_q(xs, 0.1), p90=_q(xs, 0.9))


def _q(xs: list[float], q: float) -> float:
    value = quantile(xs, q)
    assert value is not None  # xs is not empty
    return value


def speedup(baseline: float | None, final: float | None, direction: str = "min") -> float | None:
    """Above 1: the final tree is better. None when either side is missing or not positive."""
    if baseline is None or final is None or not baseline > 0 or not final > 0:
        return None
    return baseline / final if direction == "min" else final / baseline


def geomean(values: Iterable[float | None]) -> float | None:
    """The one geometric mean (decide.stats) of the entries that are measured (positive finite)."""
    return stats_geomean(positive_finite(values))

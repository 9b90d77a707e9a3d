"""The small statistics: Student's t against published tables, the ESD outlier test."""

from __future__ import annotations

import math
import random

import pytest

from kopt_supervisor.engine.decide import (
    betainc,
    esd_critical,
    esd_outliers,
    geomean,
    median,
    positive_finite,
    quantile,
    stdev,
    t_cdf,
    t_quantile,
)

# Two-sided critical values from standard t tables (to the digits printed there).
T_TABLE = [
    (0.975, 1, 12.7062),
    (0.975, 2, 4.3027),
    (0.975, 10, 2.2281),
    (0.995, 5, 4.0321),
    (0.9995, 2, 31.5991),
    (0.95, 30, 1.6973),
    (0.999, 100, 3.1737),
]


@pytest.mark.parametrize("p,df,expected", T_TABLE)
def test_t_quantile_matches_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=5e-4)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, abs=5e-4)


def test_t_quantile_inverts_the_cdf_and_tends_to_normal() -> None:
    for p in (0.6, 0.9, 0.999, 0.99999):
        for df in (1, 3, 7.5, 40):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-9)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)
    assert t_quantile(0.5, 4) == 0.0
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_betainc_known_values() -> None:
    # I_x(1, 1) = x; I_x(a, 1) = x^a; I_0.5(a, a) = 0.5.
    assert betainc(1, 1, 0.3) == pytest.approx(0.3, abs=1e-12)
    assert betainc(3, 1, 0.7) == pytest.approx(0.343, abs=1e-12)
    assert betainc(4.5, 4.5, 0.5) == pytest.approx(0.5, abs=1e-12)


def test_summaries() -> None:
    assert median([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.25) == 2.0
    assert stdev([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(2.13809, abs=1e-5)
    assert math.isnan(stdev([1.0]))


def test_esd_critical_matches_rosner() -> None:
    # The NIST/SEMATECH handbook's generalized ESD example (Rosner 1983): n = 54, alpha = 0.05.
    assert esd_critical(54, 1, 0.05) == pytest.approx(3.159, abs=2e-3)
    assert esd_critical(54, 5, 0.05) == pytest.approx(3.128, abs=2e-3)
    assert esd_critical(54, 10, 0.05) == pytest.approx(3.085, abs=2e-3)


def test_esd_finds_a_planted_spike_and_two_that_mask_each_other() -> None:
    rng = random.Random(3)
    xs = [rng.gauss(0, 1) for _ in range(12)]
    xs[5] = 14.0
    assert esd_outliers(xs, 2) == [5]
    xs[9] = 13.5  # a second spike hides the first from a one-at-a-time test
    assert esd_outliers(xs, 1) == []
    assert esd_outliers(xs, 3) == [5, 9]


def test_esd_rarely_flags_clean_normal_samples() -> None:
    rng = random.Random(11)
    flagged = sum(
        bool(esd_outliers([rng.gauss(0, 1) for _ in range(n)], max(1, n // 5))) for n in (6, 10, 20) for _ in range(400)
    )
    assert flagged / 1200 < 0.025  # nominal 1%


def test_the_one_geomean_and_its_edges() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean(iter([0.9, 1 / 0.9])) == pytest.approx(1.0)
    assert geomean([2.0, 8.0], weights=[3.0, 1.0]) == pytest.approx(2.0**0.75 * 8.0**0.25)
    assert geomean([]) is None
    for bad in (0.0, -1.0, math.nan, math.inf, True, None, "2"):
        with pytest.raises(ValueError, match="positive finite"):
            geomean([2.0, bad])  # type: ignore[list-item]  # the wrong value is the point
    with pytest.raises(ValueError, match="weights"):
        geomean([2.0], weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="weight"):
        geomean([2.0], weights=[0.0])
    # where missing entries are expected, the caller says so
    assert positive_finite([2.0, None, 0, -3, math.nan, math.inf, True, "x", 8]) == [2.0, 8.0]
    assert geomean(positive_finite([None, 0.0])) is None


def test_the_one_quantile_and_its_edges() -> None:
    assert quantile([5.0, 1.0, 2.0, 4.0, 3.0], 0.25) == 2.0
    assert quantile([1.0, 2.0], 0.9) == pytest.approx(1.9)
    assert quantile([7.0], 0.1) == 7.0 and median([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert quantile([], 0.5) is None and median([]) is None
    for q in (-0.1, 1.1):
        with pytest.raises(ValueError, match="not in"):
            quantile([1.0], q)
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            quantile([1.0, bad], 0.5)

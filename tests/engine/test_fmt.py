"""engine.fmt, the one number formatter: what each function writes, at the edges too."""

from __future__ import annotations

import math

import pytest

from kopt_supervisor.engine import fmt


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10.8349, "10.83"),
        (149.91, "149.9"),
        (0.012345, "0.01235"),
        (12345678.0, "1.235e+07"),
        (10.8, "10.8"),
        (10.0, "10"),
        (10, "10"),
        (900.0, "900"),
        (12345.6, "12346"),
        (11937.2, "11937"),
        (-3.14159, "-3.142"),
        (0.0001234, "0.0001234"),
        (0.00001234, "1.234e-05"),
        (999999.4, "999999"),
        # rounding that carries into the next digit neither adds a digit nor changes the notation late
        (9.99996, "10"),
        (999999.7, "1e+06"),
        (0.000099999, "0.0001"),
        (0.0, "0"),
        (-0.0, "0"),
        (-0.00001, "-1e-05"),
    ],
)
def test_num_writes_four_significant_digits_without_trailing_zeros(value: float, text: str) -> None:
    assert fmt.num(value) == text


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf, True, False, "10.5", [1.0], object(), 10**400])
def test_what_is_not_a_finite_number_is_a_dash(bad: object) -> None:
    for f in (
        fmt.num,
        fmt.pct,
        fmt.ratio_pct,
        fmt.share,
        fmt.speedup,
        fmt.seconds,
        fmt.hours,
        fmt.age,
        fmt.clock,
        fmt.when,
        fmt.timestamp,
        fmt.size,
    ):
        assert f(bad) == fmt.DASH, (f.__name__, bad)
    assert fmt.rate(bad, "B/s") == fmt.DASH and fmt.interval(bad, 1.0) == fmt.DASH == fmt.interval(1.0, bad)


def test_an_int_and_a_float_of_one_latency_print_the_same() -> None:
    for v in (1, 32, 900, 12345, 999999):
        assert fmt.num(v) == fmt.num(float(v)) == fmt.value(v)


def test_value_writes_whatever_a_record_holds() -> None:
    assert [fmt.value(v) for v in (33554432, 2.0, 61.5, 12345.678, True, False, None, "wiki", math.nan)] == [
        "33554432",
        "2",
        "61.5",
        "12346",
        "yes",
        "no",
        "—",
        "wiki",
        "—",
    ]
    assert fmt.value(10**30) == str(10**30)


def test_changes_shares_and_factors() -> None:
    assert fmt.pct(-5.0234) == "-5.02%" and fmt.pct(0) == "+0.00%" and fmt.pct(3.14159, 1) == "+3.1%"
    assert fmt.ratio_pct(1.0123) == "+1.23%" and fmt.ratio_pct(0.95) == "-5.00%"
    assert fmt.interval(0.941, 0.959) == "[-5.9, -4.1]" and fmt.interval(0.95, 1.02, 2) == "[-5.00, +2.00]"
    assert [fmt.share(v) for v in (41.23, 100.0, 7.123, 0.5)] == ["41.2%", "100%", "7.12%", "0.5%"]
    assert fmt.speedup(1.23456) == "1.235×" and fmt.speedup(10.003279) == "10.003×"


def test_rates_sizes_and_durations() -> None:
    assert [fmt.rate(v, "B/s") for v in (2.87e12, 3.0e8, 1234.5, 12.0)] == [
        "2.87 TB/s",
        "300 MB/s",
        "1.234 kB/s",
        "12 B/s",
    ]
    assert [fmt.size(n) for n in (0, 512, 12_800, 3_355_443, 1 << 30)] == [
        "0 B",
        "512 B",
        "12.5 KiB",
        "3.2 MiB",
        "1.0 GiB",
    ]
    assert fmt.seconds(6.213) == "6.2 s" and fmt.seconds(12.4, 0) == "12 s" and fmt.hours(4500) == "1.25 h"
    assert [fmt.age(s) for s in (3.4, 119, 600, 3 * 3600 + 300, 2 * 86400 + 7200, -5)] == [
        "3s",
        "119s",
        "10m",
        "3h05m",
        "2d2h",
        "0s",
    ]
    assert [fmt.clock(s) for s in (42, 723, 3723, -3)] == ["0:42", "12:03", "1:02:03", "0:00"]


def test_times_and_text() -> None:
    t = 1_700_000_000.0
    assert len(fmt.when(t)) == 5 and fmt.when(t, t + 86400 * 2).count("-") == 1  # another day: MM-DD HH:MM
    assert fmt.timestamp(t).startswith("2023-11-1") and fmt.timestamp(0) == fmt.DASH
    assert fmt.sha("0123456789abcdef") == "0123456789" and fmt.sha("0123456789abcdef", 8) == "01234567"
    assert fmt.sha(None) == fmt.sha("") == fmt.DASH
    assert fmt.one_line("a\n  b\tc") == "a b c" and fmt.one_line("x" * 10, 5) == "xxxx…"
    assert fmt.one_line(None) == "" and fmt.one_line(0) == "0"

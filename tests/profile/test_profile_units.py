"""Profiler numbers and units into ns, bytes and bytes/s."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine.profile.profiler import bytes_of, parse_number, rate_to_bytes_per_s, time_to_ns


@pytest.mark.parametrize(
    "text, value",
    [
        ("10,196,000", 10196000.0),
        ('"4,096"', 4096.0),
        ("1.5e-05", 1.5e-05),
        ("n/a", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_number(text, value):
    assert parse_number(text) == value


def test_parse_number_rejects_text():
    with pytest.raises(ValueError):
        parse_number("twelve")


@pytest.mark.parametrize(
    "value, unit, ns",
    [(5.0, "nsecond", 5.0), (1.5, "usecond", 1500.0), (2.0, "msecond", 2e6), (1.0, "second", 1e9)],
)
def test_time_to_ns(value, unit, ns):
    assert time_to_ns(value, unit) == pytest.approx(ns)


@pytest.mark.parametrize(
    "unit, scale",
    [
        ("byte", 1),
        ("Kbyte", 1e3),
        ("Mbyte/block", 1e6),
        ("KiB", 1024),
        ("byte/block", 1),
        ("GB", 1e9),
    ],
)
def test_bytes_of(unit, scale):
    assert bytes_of(2.0, unit) == pytest.approx(2.0 * scale)


@pytest.mark.parametrize(
    "unit, scale",
    [
        ("byte/second", 1),
        ("Gbyte/second", 1e9),
        ("Tbyte/second", 1e12),
        ("GB/s", 1e9),
        ("Kbyte/usecond", 1e9),
    ],
)
def test_rate(unit, scale):
    assert rate_to_bytes_per_s(3.0, unit) == pytest.approx(3.0 * scale)


@pytest.mark.parametrize(
    "fn, unit",
    [
        (time_to_ns, "cycle"),
        (bytes_of, "sector"),
        (rate_to_bytes_per_s, "byte"),
        (rate_to_bytes_per_s, "byte/cycle"),
    ],
)
def test_unknown_units_are_errors(fn, unit):
    with pytest.raises(ValueError, match="unknown"):
        fn(1.0, unit)

"""experiments/position_effect.py's arithmetic: what going second adds to a side, per config."""

from __future__ import annotations

import math

from experiments.position_effect import summarize


def _rows(second_slower: float, looks: int = 8) -> list[dict]:
    """A/A looks in ABBA order where config "a" reads `second_slower` slower on the side that
    goes second, and config "b" reads the same on both sides."""
    rows = []
    for r in range(looks):
        first = "A" if r % 2 == 0 else "B"
        second = "B" if first == "A" else "A"
        us = {first: {"a": 10.0, "b": 20.0}, second: {"a": 10.0 * (1 + second_slower), "b": 20.0}}
        rows.append({"look": r, "first": first, "us": us})
    return rows


def test_a_side_slower_when_second_reads_as_the_position_effect_and_not_as_spread() -> None:
    s = summarize(_rows(0.10))
    a, b = s["configs"]["a"], s["configs"]["b"]
    assert math.isclose(a["second_adds_pct"], 100 * math.log(1.10), abs_tol=0.01)  # ~9.53%
    assert a["sd_within_order_pct"] == 0.0 and a["sd_all_pct"] > 9  # the order-balanced mean hides it, the looks spread
    assert b["second_adds_pct"] == 0.0 and b["sd_all_pct"] == 0.0
    assert s["max_abs_position_pct"] == a["second_adds_pct"]


def test_no_position_effect_reads_zero() -> None:
    s = summarize(_rows(0.0))
    assert s["max_abs_position_pct"] == 0.0 and s["median_sd_all_pct"] == 0.0

"""fmt.change: a cost change always with its word (issue 28: for a rate metric, "+3.1%" meant
3.1% worse and nothing said so)."""

from __future__ import annotations

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.decide.estimate import Policy


def test_a_change_says_faster_or_slower_whatever_the_direction() -> None:
    assert fmt.change(-5.0234) == "-5.02% faster" and fmt.change(3.1) == "+3.10% slower"
    assert fmt.change(0.001) == "+0.00%" and fmt.change(None) == fmt.DASH and fmt.change(float("nan")) == fmt.DASH
    assert fmt.change(-4.96, 1) == "-5.0% faster"
    # a rate: 100 -> 97 GB/s is a cost ratio above 1, and reads as slower
    assert fmt.change((Policy(direction="max").cost_ratio(100.0, 97.0) - 1) * 100) == "+3.09% slower"
    assert fmt.change((Policy(direction="max").cost_ratio(100.0, 103.0) - 1) * 100) == "-2.91% faster"
    assert fmt.change((Policy(direction="min").cost_ratio(10.0, 9.0) - 1) * 100) == "-10.00% faster"

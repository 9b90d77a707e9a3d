"""engine/onboard/__init__.py (the estimate) and draft.py (`DecisionCost`): what one decision will cost, from the baseline's runs and the policy."""

from __future__ import annotations

import math

import pytest

from kopt_supervisor.engine.decide import t_quantile
from kopt_supervisor.engine.decide.estimate import Policy, alpha_at_look
from kopt_supervisor.engine.onboard import estimate_decision_s, rounds_to_settle, run_noise_pct
from kopt_supervisor.engine.onboard.draft import DEFAULT_NOISE_PCT


def test_rounds_grow_with_noise_and_stop_at_max_rounds() -> None:
    p = Policy()
    rounds = [rounds_to_settle(0.01, n, p) for n in (0.01, 0.2, 0.5, 1.0, 3.0)]
    assert [r for r, _ in rounds] == sorted(r for r, _ in rounds)
    assert rounds[0] == (p.min_rounds, True) and rounds[-1] == (p.max_rounds, False)


def test_the_settling_look_is_the_first_whose_interval_is_narrow_enough() -> None:
    p = Policy(min_rounds=3, max_rounds=20)
    k, ok = rounds_to_settle(0.01, 0.4, p)
    sigma = math.sqrt(2) * 0.004

    def half(j: int) -> float:
        return t_quantile(1 - alpha_at_look(j, p, final=j == p.max_rounds) / 2, j - 1) * sigma / math.sqrt(j)

    assert ok and half(k) < math.log1p(0.01) <= half(k - 1)


def test_process_level_costs_two_runs_per_round_and_says_when_slow() -> None:
    c = estimate_decision_s([17.0, 16.0, 18.0], Policy(), "process", noise_pct=1.0)
    assert c.round_s == 34.0 and c.start_s == 0 and c.undecided_tie and c.rounds_tie == 20
    assert c.seconds_tie == 20 * 34.0 and c.slow and c.seconds_change <= c.seconds_tie
    assert "docs/byo-kernel.md" in c.text() and "still undecided" in c.text()
    fast = estimate_decision_s([0.4], Policy(), "process", noise_pct=0.2)
    assert not fast.slow and "Slow" not in fast.text() and fast.to_dict()["seconds_tie"] == fast.seconds_tie


def test_served_looks_cost_a_start_then_looks() -> None:
    c = estimate_decision_s([5.3], Policy(max_rounds=12), "served", noise_pct=0.3, look_s=0.35)
    assert c.start_s == 5.3 and c.round_s == 0.35 and c.seconds_tie == pytest.approx(5.3 + 0.35 * c.rounds_tie)
    assert not c.slow and "per look after a 5.3 s start" in c.text()
    upper = estimate_decision_s([5.3], Policy(), "served")  # no look measured yet: a run's seconds stand in
    assert upper.round_s == 5.3 and upper.start_s == 5.3 and upper.noise_pct == DEFAULT_NOISE_PCT


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        estimate_decision_s([1.0], Policy(), "parallel")
    with pytest.raises(ValueError, match="mode must be one of process, served, not 'ab'"):
        estimate_decision_s([1.0], Policy(), "ab")  # the one-process ab_command, removed
    with pytest.raises(ValueError, match="no baseline run seconds"):
        estimate_decision_s([math.nan, -1.0], Policy())


def test_run_noise_from_the_baseline_runs() -> None:
    runs = [{"a": 100.0, "b": 10.0}, {"a": 101.0, "b": 10.2}, {"a": 99.0, "b": 9.8, "c": 5.0}]
    n = run_noise_pct(runs)
    assert n is not None and 0.9 < n < 2.1  # a: ~1%, b: ~2%: the median of the two
    assert run_noise_pct(runs[:1]) is None
    assert run_noise_pct([{"a": math.nan}, {"a": 1.0}]) is None

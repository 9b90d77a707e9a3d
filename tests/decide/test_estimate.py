"""Per-class estimation: error spent over looks, coverage under repeated looks, drift,
outliers, disturbed rounds and the ab_command run as the unit."""

from __future__ import annotations

import math
import random

import pytest

from experiments.simulate_decisions import Noise, kopt_trial
from kopt_supervisor.engine.decide.estimate import (
    Pair,
    Policy,
    Sample,
    alpha_at_look,
    class_samples,
    estimate_class,
    interval,
)
from kopt_supervisor.engine.decide.verdict import evaluate
from tests.decide.helpers import rounds, wiggle


def test_alpha_is_spent_over_the_planned_looks_growing_with_the_look() -> None:
    p = Policy(confidence=0.99, min_rounds=3, max_rounds=20)
    spent = [alpha_at_look(k, p) for k in range(3, 21)]
    assert sum(spent) == pytest.approx(0.01, rel=1e-12)
    assert spent == sorted(spent) and spent[-1] / spent[0] == pytest.approx(20 / 3)
    # Stopping early for the budget: the final look spends what was left, never more.
    for k in (3, 7, 20):
        assert sum(spent[: k - 3]) + alpha_at_look(k, p, final=True) == pytest.approx(0.01, rel=1e-12)


def test_single_look_interval_has_its_nominal_coverage() -> None:
    rng = random.Random(5)
    hits = 0
    for _ in range(3000):
        xs = [Sample(i, 0, "AB" if i % 2 == 0 else "BA", 0.01 + rng.gauss(0, 0.02), False) for i in range(8)]
        iv = interval(xs, 0.10)
        hits += iv.lo <= 0.01 <= iv.hi
    assert 0.88 <= hits / 3000 <= 0.92


def _misses_over_looks(alpha_of: object, trials: int, seed: int) -> float:
    """Share of sequences in which some look's interval misses the true mean."""
    rng = random.Random(seed)
    p = Policy()
    missed = 0
    for _ in range(trials):
        xs: list[Sample] = []
        for k in range(1, p.max_rounds + 1):
            xs.append(Sample(k, 0, "AB" if k % 2 else "BA", 0.004 + rng.gauss(0, 0.014), False))
            if k >= p.min_rounds:
                iv = interval(xs, alpha_of(k, p))  # type: ignore[operator]
                if not iv.lo <= 0.004 <= iv.hi:
                    missed += 1
                    break
    return missed / trials


def test_intervals_hold_jointly_over_every_look_but_naive_ones_do_not() -> None:
    spent = _misses_over_looks(lambda k, p: alpha_at_look(k, p, final=k == p.max_rounds), 3000, 1)
    naive = _misses_over_looks(lambda k, p: 0.01, 3000, 1)
    assert spent <= 0.01
    assert naive > 0.03  # 99% intervals looked at 18 times miss far more than 1% of the time


def test_linear_drift_cancels_exactly_with_either_count_of_orders() -> None:
    # Round k runs at times 2k and 2k+1; a drift of d per run adds +d to AB rounds, -d to BA.
    mu, d = math.log(0.98), 0.01
    for n in (6, 7):
        xs = [Sample(k, 0, "AB" if k % 2 == 0 else "BA", mu + (d if k % 2 == 0 else -d), False) for k in range(n)]
        assert interval(xs, 0.01).mean == pytest.approx(mu, abs=1e-12)
    plain_mean_of_7 = sum(x.value for x in xs) / 7
    assert plain_mean_of_7 - mu == pytest.approx(d / 7)  # what an unbalanced mean would carry


def test_drift_during_a_decision_cannot_fake_a_win() -> None:
    # A 0.5% per run drift (12% over a 24-run decision) on identical trees.
    rng = random.Random(2)
    pairs: list[Pair] = []
    for k in range(20):
        order = "AB" if k % 2 == 0 else "BA"
        t_best, t_cand = (2 * k, 2 * k + 1) if order == "AB" else (2 * k + 1, 2 * k)
        drift = lambda t: 1.0 - 0.005 * t  # noqa: E731 - the GPU speeds up as it warms
        pairs.append(
            Pair(
                "c",
                "all",
                100 * drift(t_best) * math.exp(rng.gauss(0, 0.001)),
                100 * drift(t_cand) * math.exp(rng.gauss(0, 0.001)),
                k,
                order,
            )
        )
    v = evaluate(pairs[:8], Policy())
    assert v.kind == "tie", v.reason
    assert v.classes[0].ratio == pytest.approx(1.0, abs=0.002)


def test_an_outlier_round_is_left_out_and_the_estimate_keeps_its_value() -> None:
    ratios = wiggle(0.97, 10)
    ratios[6] = 0.97 * 1.25  # the candidate's run hit a throttling spike
    pairs = rounds({"all": ratios})
    r = estimate_class("all", pairs, class_samples(pairs, Policy())["all"], Policy(), final=False)
    assert r.outliers == 1 and r.n == 9
    assert r.ratio == pytest.approx(0.97, abs=0.001)
    assert r.verdict == "improved"


def test_best_and_cand_come_from_the_rounds_the_ratio_uses() -> None:
    """An outlier round big enough to flip the sign of cand/best over all rounds is left out of
    the best and cand shown beside the ratio, as it is left out of the ratio."""
    ratios = wiggle(0.97, 10)
    ratios[6] = 1.6  # a spike: over all ten rounds the candidate would look slower
    pairs = rounds({"all": ratios})
    r = estimate_class("all", pairs, class_samples(pairs, Policy())["all"], Policy(), final=False)
    assert r.outliers == 1 and r.ratio < 1
    all_rounds = math.exp(sum(math.log(p.cand / p.best) for p in pairs) / len(pairs))
    assert all_rounds > 1  # what the columns showed before
    assert r.cand / r.best == pytest.approx(r.ratio, rel=1e-3)


def test_a_look_with_more_blocks_weighs_no_more_in_best_and_cand() -> None:
    """Looks of an ab_command are the unit: a slow look of many blocks must not pull cand/best
    to the other side of the ratio, which weighs every look the same."""
    pairs = [Pair("c", "all", 10.0, 9.7, k, "AB" if b % 2 == 0 else "BA", b) for k in range(5) for b in range(2)]
    pairs += [
        Pair("c", "all", 10.0, 9.9 if b % 2 == 0 else 10.5, 5, "AB" if b % 2 == 0 else "BA", b) for b in range(30)
    ]
    r = evaluate(pairs, Policy()).classes[0]
    assert r.unit == "look" and r.rounds == 6 and r.outliers == 0 and r.ratio < 1
    pooled = math.exp(sum(math.log(p.cand / p.best) for p in pairs) / len(pairs))
    assert pooled > 1  # every block weighing the same: the other side of 1
    assert r.cand / r.best == pytest.approx(r.ratio, rel=1e-6)


def test_flagged_rounds_are_left_out_and_counted() -> None:
    ratios = wiggle(1.0, 8)
    ratios[2] = 0.90  # the gate saw a foreign process in round 2
    pairs = rounds({"all": ratios}, flagged={2})
    r = estimate_class("all", pairs, class_samples(pairs, Policy())["all"], Policy(), final=False)
    assert r.disturbed == 1 and r.rounds == 7 and r.n == 7
    assert r.ratio == pytest.approx(1.0, abs=0.002)


def _ab_pairs(looks: int, blocks: int, ratio: float = 1.0) -> list[Pair]:
    return [
        Pair(
            "c", "all", 10.0, 10.0 * ratio * (1 + 0.001 * ((b * 7 + k * 3) % 5 - 2)), k, "AB" if b % 2 == 0 else "BA", b
        )
        for k in range(looks)
        for b in range(blocks)
    ]


def test_ab_command_runs_are_the_unit_unless_blocks_are_pooled() -> None:
    pairs = _ab_pairs(3, 8)
    by_run = evaluate(pairs, Policy()).classes[0]
    pooled = evaluate(pairs, Policy(pool_blocks=True)).classes[0]
    assert (by_run.unit, by_run.n, by_run.rounds) == ("look", 3, 3)
    assert (pooled.unit, pooled.n) == ("sample", 24)
    assert pooled.hi - pooled.lo < by_run.hi - by_run.lo


def test_a_per_process_offset_fools_pooled_blocks_but_not_runs_as_the_unit() -> None:
    noise = Noise("normal", 0.005, blocks=8, look_sigma=0.01)
    false = {}
    for pool in (False, True):
        rng = random.Random(9)
        kinds = [kopt_trial(1.0, noise, Policy(pool_blocks=pool), rng)[0] for _ in range(150)]
        false[pool] = sum(k in ("keep", "regression", "split") for k in kinds) / len(kinds)
    assert false[False] <= 0.02
    assert false[True] >= 0.10


def test_an_interval_too_wide_for_exp_is_infinite_not_an_error() -> None:
    from kopt_supervisor.engine.decide.estimate import exp_ratio

    assert exp_ratio(800.0) == math.inf
    assert exp_ratio(-800.0) == 0.0
    assert exp_ratio(math.log(2.0)) == pytest.approx(2.0)


def test_two_looks_far_apart_at_min_rounds_two_decide_without_overflow() -> None:
    """min_rounds = 2 is valid: two looks 8x apart gave a log-interval whose bound overflowed
    math.exp, and evaluate raised OverflowError instead of leaving the class undecided."""
    p = Policy(confidence=0.99, min_rounds=2, max_rounds=20)
    v = evaluate(rounds({"a": [0.25, 2.0]}), p)
    (c,) = v.classes
    assert c.verdict == "undecided"
    assert c.hi > 1.0 and c.lo < 1.0

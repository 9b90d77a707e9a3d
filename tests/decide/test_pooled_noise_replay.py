"""experiments/pooled_noise_replay.py: its F quantile, that it leaves kopt's decision as it
found it, that an empty prior replays kopt's rule exactly, and that a pooled spread settles an
A/A sooner but never turns the decision's own larger spread into a narrower interval."""

from __future__ import annotations

import random

import pytest

from experiments import pooled_noise_replay as replay_mod
from kopt_supervisor.engine.decide import estimate, verdict
from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.verdict import evaluate


@pytest.mark.parametrize(
    ("p", "d1", "d2", "expected"),
    [(0.95, 2, 10, 4.1028), (0.99, 4, 100, 3.5127), (0.99, 1, 30, 7.5625), (0.5, 6, 6, 1.0)],
)
def test_f_quantile_matches_the_tables(p: float, d1: int, d2: int, expected: float) -> None:
    assert replay_mod.f_quantile(p, d1, d2) == pytest.approx(expected, rel=2e-3)


def aa_pairs(looks: int, sd: float, seed: int, offset: float = 0.0) -> list[Pair]:
    """Two classes of two configs each, ABBA across looks, log-normal noise of `sd` per look."""
    rng = random.Random(seed)
    out = []
    for r in range(looks):
        for cls in ("narrow", "wide"):
            for i in range(2):
                best = 10.0 * (1 + i)
                out.append(
                    Pair(
                        f"{cls}{i}",
                        cls,
                        best,
                        best * (1 + offset) * (1 + rng.gauss(0, sd)),
                        r,
                        "AB" if r % 4 in (0, 3) else "BA",
                    )
                )
    return out


def test_an_empty_prior_is_kopts_rule_and_the_engine_is_left_as_it_was() -> None:
    policy = Policy(confidence=0.99, min_effect_pct=1.0, min_rounds=3, max_rounds=12)
    pairs = aa_pairs(12, 0.004, seed=3)
    real = (estimate.interval, verdict.estimate_class)
    for k in range(3, 13):
        done = [p for p in pairs if p.round < k]
        direct = evaluate(done, policy)
        kind, looks, v = replay_mod.replay(done, policy, None, frozenset(), {}, k)
        assert (estimate.interval, verdict.estimate_class) == real  # restored after each look
        if direct.final:
            assert (kind, looks) == (direct.kind, k)  # it stopped where kopt would, as kopt would
            break
    else:
        raise AssertionError("kopt never decided the A/A: the test proves nothing")


def test_a_pooled_spread_settles_an_aa_sooner_and_a_noisier_decision_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = Policy(confidence=0.99, min_effect_pct=1.0, min_rounds=3, max_rounds=12)
    pairs = aa_pairs(12, 0.003, seed=11)
    prior = {"narrow": (0.003**2 / 2, 200), "wide": (0.003**2 / 2, 200)}
    kind_k, looks_k, _ = replay_mod.replay(pairs, policy, None, frozenset(), {}, 12)
    kind_p, looks_p, _ = replay_mod.replay(pairs, policy, None, frozenset(), prior, 12)
    assert (kind_k, kind_p) == ("tie", "tie") and looks_p < looks_k
    # the same decision with ten times the spread the prior says: the F test keeps its own
    # interval, so the pooled rule decides exactly as kopt's does
    noisy = aa_pairs(12, 0.03, seed=11)
    kopts = replay_mod.replay(noisy, policy, None, frozenset(), {}, 12)[:2]
    assert replay_mod.replay(noisy, policy, None, frozenset(), prior, 12)[:2] == kopts
    monkeypatch.setattr(replay_mod, "f_quantile", lambda p, d1, d2: float("inf"))  # no F test
    assert replay_mod.replay(noisy, policy, None, frozenset(), prior, 12)[:2] != kopts

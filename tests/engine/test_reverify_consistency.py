"""When a fresh-process re-decision that its noise left undecided still confirms a keep
(engine/loop/evidence.py `consistent_gain`)."""

from __future__ import annotations

from kopt_supervisor.engine.decide import Verdict
from kopt_supervisor.engine.decide.model import ClassResult
from kopt_supervisor.engine.loop.evidence import consistent_gain


def cls(name: str, ratio: float, verdict: str) -> ClassResult:
    return ClassResult(cls=name, rounds=6, n=6, best=100.0, cand=100.0 * ratio, ratio=ratio, lo=ratio * 0.8,
                       hi=ratio * 1.2, verdict=verdict)


FIRST = Verdict("keep", "both faster", (cls("narrow", 0.35, "improved"), cls("wide", 0.57, "improved")))


def test_a_real_gain_the_fresh_processes_could_not_resolve_is_confirmed():
    fresh = Verdict("borderline", "wide undecided after 6 rounds",
                    (cls("narrow", 0.37, "improved"), cls("wide", 0.62, "undecided")))
    assert consistent_gain(FIRST, fresh)


def test_numbers_bent_inside_the_bench_show_no_gain_in_fresh_processes():
    fresh = Verdict("borderline", "undecided", (cls("narrow", 0.97, "undecided"), cls("wide", 1.01, "undecided")))
    assert not consistent_gain(FIRST, fresh)


def test_less_than_half_the_claimed_gain_or_a_slower_class_is_no_confirmation():
    half = Verdict("borderline", "u", (cls("narrow", 0.70, "undecided"), cls("wide", 0.62, "undecided")))
    assert not consistent_gain(FIRST, half)  # narrow claimed -65%, fresh sees -30%
    slower = Verdict("borderline", "u", (cls("narrow", 0.36, "improved"), cls("wide", 0.60, "improved"),
                                         cls("guard", 1.2, "regressed")))
    assert not consistent_gain(FIRST, slower)


def test_only_an_undecided_borderline_is_read_this_way():
    for kind in ("tie", "regression", "likely_regression", "split"):
        fresh = Verdict(kind, "r", (cls("narrow", 0.36, "improved"), cls("wide", 0.58, "improved")))
        assert not consistent_gain(FIRST, fresh)
    assert not consistent_gain(FIRST, Verdict("borderline", "r", (cls("narrow", 0.36, "improved"),)))  # wide unseen

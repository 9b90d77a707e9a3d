"""Review of the carry (6a2eed2, fd38cb0): a keep decided against an older BEST and carried to the
new one is kept on its confirmation alone. These tests state what the carry must still hold."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide.estimate import Policy, Verdict
from kopt_supervisor.engine.decide.verdict import evaluate
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.loop.keep import Keeper
from tests.decide.test_confirmation import cls, spread

POLICY = Policy.from_config(DecideConfig())


class FeedLooks:
    """DecisionRounds for a confirmation: hands `pairs` to the rule one look at a time."""

    def __init__(self, pairs: list[Any]) -> None:
        self.pairs = pairs

    def policy(self) -> Policy:
        return POLICY

    def looks(
        self, it: Any, lane: Any, stage: Any, judge: Any, *, min_looks: int, max_looks: int, measurer: Any
    ) -> Any:
        for n in range(min_looks, max_looks + 1):
            out = judge([p for p in self.pairs if p.round < n], [], 0.0, n)
            if out is not None:
                return out
        raise AssertionError("the rule must end by its cap")


class Spare:
    def close(self) -> None:
        pass


def test_a_carried_keep_is_not_confirmed_with_a_class_proven_5pct_slower_on_the_new_best():
    # Lane B keeps "wide 20% faster" while lane A decides "narrow 40% faster, wide tied" against
    # the old BEST. A's change applies on B's keep and is carried: on the new BEST it costs wide
    # 5% (an interaction with B's change, or candidate code that slows wide only when B's change
    # is there). The 6 fresh looks on the new BEST prove wide slower ([+0.4%, +9.8%], estimate
    # +5%, margin +1%), and a decision on those same looks calls the candidate a split. Only the
    # confirmation ever measured A against the new BEST, and it confirms: its rule leaves an
    # unclaimed class to "the decision's bound" (confirmation.py), but the decision bounded wide
    # against the OLD BEST. A carried keep must not be kept with a class a decision rejects.
    claim = Verdict("keep", "narrow faster", (cls("narrow", 0.6, "improved"), cls("wide", 1.0, "tied")))
    looks = spread("narrow/cfg", "narrow", 0.6, 0.002) + spread("wide/cfg", "wide", 1.05, 0.02)
    decision = evaluate(looks, replace(POLICY, max_rounds=6), target_class=None)
    assert decision.kind == "split", decision.reason  # what a decision against the new BEST says

    ctx = SimpleNamespace(cfg=SimpleNamespace(decide=DecideConfig()))
    evidence = Evidence(ctx, FeedLooks(looks))  # type: ignore[arg-type]
    lane = SimpleNamespace(index=0, vendor="nvidia", measurer=None, fresh=None)
    it = SimpleNamespace(version=3, record={"carried": [{"decided_on": "a" * 40, "onto": "b" * 40}]})
    conf = evidence.served_confirmation(it, lane, claim, fresh=Spare())  # type: ignore[arg-type]
    wide = next(c for c in conf.classes if c.cls == "wide")
    assert wide.lo > 1.0 and wide.ratio > 1.04  # the confirmation's own looks prove it slower
    assert conf.outcome != "confirmed", (conf.reason, wide)


def test_a_carried_keep_accepted_without_a_confirmation_on_the_new_best_keeps_its_classes():
    # A carried keep whose profiler pair disagrees on the new BEST is borderline: confirm_keep
    # takes no looks (verdict not a keep), review (the engineer, or the policy) accepts it, and
    # Keeper.keep calls classes_on_new_best, which reads the REVERIFY samples: none here (and
    # where a confirmation against the OLD BEST was cut by StaleBest, that one's looks). The
    # record then holds no class at all (best_per_class / the speedup curve fall back to the
    # previous keep's figures) or the old BEST's, labelled "measured": "confirmation".
    decided = {
        "narrow": {"best": 10.0, "cand": 6.0, "ratio": 0.6, "verdict": "improved"},
        "wide": {"best": 20.0, "cand": 20.0, "ratio": 1.0, "verdict": "tied"},
    }
    store = SimpleNamespace(samples=lambda version, stage: [])
    events: list[str] = []
    ctx = SimpleNamespace(
        cfg=SimpleNamespace(decide=DecideConfig()), store=store, event=lambda kind, msg, **k: events.append(msg)
    )
    keeper = Keeper(ctx, None, None)  # type: ignore[arg-type]
    it = SimpleNamespace(
        version=3,
        record={"classes": dict(decided), "carried": [{"decided_on": "a" * 40, "onto": "b" * 40}]},
    )
    keeper.classes_on_new_best(it)  # type: ignore[arg-type]
    assert set(it.record["classes"]) == {"narrow", "wide"}, it.record["classes"]
    # kept, but said to be the old BEST's figures: the history's speedup leaves them out
    assert all(c["old_best"] for c in it.record["classes"].values()) and "without a look" in events[0]
    assert it.record["carried"][-1]["classes"] == decided
    from kopt_supervisor.engine.projections import best_per_class
    from kopt_supervisor.engine.records import Iteration, Status

    base = Iteration(
        0, Status.BASELINE, commit="a" * 40, record={"classes": {"narrow": {"best": 10.0}, "wide": {"best": 20.0}}}
    )
    kept = Iteration(3, Status.KEEP, commit="b" * 40, record=it.record)
    assert best_per_class([base, kept]) == {"narrow": 10.0, "wide": 20.0}


def test_the_best_tree_s_figures_are_the_keep_that_ended_last_not_the_highest_version():
    # 4xH200 (2026-11-30, rms4 after fd38cb0): v10, carried onto v11's BEST, ended after v11; the
    # status read v11's figures (3.19x) while BEST was v10's commit (3.31x by its confirmation)
    from kopt_supervisor.engine.projections import best_per_class, best_speedup
    from kopt_supervisor.engine.records import Iteration, Status

    base = Iteration(0, Status.BASELINE, commit="a" * 40, record={"classes": {"narrow": {"best": 10.0}}})
    v11 = Iteration(11, Status.KEEP, commit="b" * 40, record={"ended_seq": 5, "classes": {"narrow": {"cand": 5.0}}})
    v10 = Iteration(10, Status.KEEP, commit="c" * 40, record={"ended_seq": 6, "classes": {"narrow": {"cand": 4.0}}})
    assert best_per_class([base, v10, v11]) == {"narrow": 4.0}
    assert best_speedup([base, v10, v11]) == 2.5


def test_more_rounds_for_a_carried_keep_are_a_decision_on_the_new_best_not_more_of_the_old_one():
    # the engineer asks for more rounds on a carried keep in review: its stored looks are of the
    # BEST it was decided on, so pooling new looks (against the new BEST) with them would mix two
    # BESTs; it is decided afresh on the new BEST, after which it is carried no more
    from kopt_supervisor.engine.loop.context import carried
    from kopt_supervisor.engine.loop.keep import ReviewProtocol
    from kopt_supervisor.engine.records import Iteration, Status

    asked: list[dict[str, Any]] = []

    class Rounds:
        def decide(self, it: Any, lane: Any, stage: Any, **kw: Any) -> Verdict:
            asked.append(kw)
            return Verdict("keep", "decided", ())

    decide = SimpleNamespace(review_timeout_s=1, max_rounds=10)
    ctx = SimpleNamespace(
        cfg=SimpleNamespace(decide=decide), control=SimpleNamespace(finish=lambda *a: None), save=lambda *a: None
    )
    for moves, want in (([{"decided_on": "a" * 40, "onto": "b" * 40}], {}), ([], {"extra_rounds": 10})):
        asked.clear()
        review = ReviewProtocol(ctx, Rounds())  # type: ignore[arg-type]
        review.open = lambda it, v: None  # type: ignore[method-assign]
        review.wait = lambda it, lane, t: SimpleNamespace(kind="more_rounds", args={})  # type: ignore[method-assign]
        it = Iteration(3, Status.RUNNING, record={"carried": [dict(m) for m in moves]})
        verdict, by = review.ask(it, None, Verdict("borderline", "why", ()))  # type: ignore[arg-type]
        assert asked == [want] and verdict.kind == "keep" and by == "engine", asked
        assert not carried(it)  # decided on this BEST now (or never carried)

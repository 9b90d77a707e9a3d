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

    def looks(self, it: Any, lane: Any, stage: Any, judge: Any, *, min_looks: int, max_looks: int, measurer: Any) -> Any:
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
    evidence.spares[0] = Spare()  # type: ignore[assignment]
    lane = SimpleNamespace(index=0, vendor="nvidia", measurer=None, fresh=None)
    it = SimpleNamespace(version=3, record={"carried": [{"decided_on": "a" * 40, "onto": "b" * 40}]})
    conf = evidence.served_confirmation(it, lane, claim)  # type: ignore[arg-type]
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
    ctx = SimpleNamespace(cfg=SimpleNamespace(decide=DecideConfig()), store=store)
    keeper = Keeper(ctx, None, None)  # type: ignore[arg-type]
    it = SimpleNamespace(
        version=3,
        record={"classes": dict(decided), "carried": [{"decided_on": "a" * 40, "onto": "b" * 40}]},
    )
    keeper.classes_on_new_best(it)  # type: ignore[arg-type]
    assert set(it.record["classes"]) == {"narrow", "wide"}, it.record["classes"]

"""A stored record read back into its dataclass keeps loading across kopt versions."""

from __future__ import annotations

from kopt_supervisor.engine.decide.estimate import ClassResult
from kopt_supervisor.engine.profile.summary import RangeKernelStat


def test_keys_a_dataclass_does_not_have_are_dropped_and_the_rest_round_trips():
    stat = RangeKernelStat("kopt:n=1", "k", 3, 30.0, 2.0, 9.0, 11.0)
    assert RangeKernelStat.from_dict({**stat.to_dict(), "written_by_a_newer_kopt": 1}) == stat
    row = ClassResult(cls="a", rounds=3, n=3, best=1.0, cand=0.9, ratio=0.9, lo=0.85, hi=0.95, verdict="improved")
    assert ClassResult.from_dict({**row.to_dict(), "gone_key": "x"}).ratio == 0.9

"""Target time per call, and best-vs-candidate agreement: splitting or re-launching cannot fake a win."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.profile.summary import Launch, ProfileComparison, compare, summarize


def profile(regex: str = "attn", **kernels: tuple[int, float]):
    """kernels: name -> (launches, ns per launch)."""
    launches = [Launch(name, ns) for name, (n, ns) in kernels.items() for _ in range(n)]
    return summarize(launches, regex, tool="test")


BEST = profile(attn_kernel=(10, 100.0), other_kernel=(10, 500.0))


def test_per_call_is_target_time_over_the_least_launched_target_kernel():
    s = profile(attn_a=(10, 60.0), attn_b=(10, 50.0), other_kernel=(30, 1.0))
    assert s.calls == 10 and s.anchor == "attn_a"
    assert s.target_total_ns == pytest.approx(1100)
    assert s.target_per_call_ns == pytest.approx(110)
    assert s.hottest == "attn_a"


def test_splitting_a_kernel_into_two_slower_halves_is_not_a_win():
    cand = profile(attn_a=(10, 60.0), attn_b=(10, 50.0), other_kernel=(10, 500.0))
    c = compare(BEST, cand)
    assert c.ratio == pytest.approx(1.1) and c.delta_pct == pytest.approx(10.0)


def test_splitting_into_two_faster_halves_is_a_win():
    cand = profile(attn_a=(10, 45.0), attn_b=(10, 45.0))
    c = compare(BEST, cand)
    assert c.ratio == pytest.approx(0.9)
    assert c.basis == "10 calls each"


def test_a_helper_kernel_launched_more_often_cannot_inflate_the_call_count():
    cand = profile(attn_kernel=(10, 90.0), attn_helper=(20, 10.0))
    assert cand.calls == 10
    c = compare(BEST, cand)
    assert c.ratio == pytest.approx(1.1)


def test_launching_the_same_kernel_twice_per_call_uses_the_less_favourable_ratio():
    # twice the launches at 55 ns: per launch it looks 45% faster, per call it is 10% slower
    cand = profile(attn_kernel=(20, 55.0))
    c = compare(BEST, cand)
    assert c.per_call_ratio == pytest.approx(0.55)
    assert c.total_ratio == pytest.approx(1.1)
    assert c.ratio == pytest.approx(1.1)
    assert "call counts differ (10 vs 20)" in c.basis


def test_comparison_lists_target_kernels_of_both_sides_and_round_trips():
    cand = profile(attn_a=(10, 45.0), attn_b=(10, 45.0))
    c = compare(BEST, cand)
    assert [(k.name, k.best_calls, k.cand_calls) for k in c.kernels] == [
        ("attn_a", 0, 10),
        ("attn_b", 0, 10),
        ("attn_kernel", 10, 0),
    ]
    again = ProfileComparison.from_dict(c.to_dict())
    assert again == c
    assert c.to_dict()["delta_pct"] == pytest.approx(-10.0)
    assert "0.100 -> 0.090 us per call (-10.00%" in c.summary_line()


def test_no_matching_kernel_names_what_was_seen():
    with pytest.raises(KoptFailure, match=r"no kernel matches \[profile\]\.kernel 'gemm' \(seen: other_kernel"):
        profile("gemm", other_kernel=(3, 1.0))


def test_no_launches_is_a_failure():
    with pytest.raises(KoptFailure, match="no kernel launches"):
        summarize([], "x", tool="ncu", files=("out/ncu.csv",))

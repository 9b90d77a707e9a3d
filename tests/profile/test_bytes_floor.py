"""The bytes floor (engine/profile/floors.py): a config's range must move, through L2, at
least L2_FLOOR x the bytes a call reads and writes, per call as best's profile counts calls."""

from __future__ import annotations

import math

from kopt_supervisor.engine.profile.classes import ConfigRef
from kopt_supervisor.engine.profile.floors import L2_FLOOR, bytes_short
from kopt_supervisor.engine.profile.summary import Launch, ProfileSummary, summarize

KEY = "shape=a,n=4"
RNG = f"kopt:{KEY}"
REFS = [ConfigRef(KEY, "cls=x", {"shape": "a", "n": 4})]
NEED = 1_000_000.0


def profile(*groups: tuple[str, int, float | None]) -> ProfileSummary:
    """(kernel, launches, L2 bytes of each) in the config's range, and one input draw outside."""
    launches = [Launch(kernel=k, duration_ns=10.0, range=RNG, l2_bytes=b) for k, n, b in groups for _ in range(n)]
    launches.append(Launch(kernel="draw", duration_ns=5.0, range="", l2_bytes=None))
    return summarize(launches, "", tool="ncu")


BEST = profile(("rms", 4, 1.5 * NEED))


def test_an_honest_range_passes_and_one_whose_work_was_hidden_is_short() -> None:
    assert bytes_short(BEST, profile(("rms", 4, 1.6 * NEED)), REFS, {KEY: NEED}) == []
    short = bytes_short(BEST, profile(("cheap", 4, NEED / 20)), REFS, {KEY: NEED})
    assert short is not None and [(x.config, x.per_call, x.need) for x in short] == [(KEY, NEED / 20, NEED)]
    assert "moved 48.8 KiB through L2 a call, under the 976.6 KiB it reads and writes" in short[0].line()


def test_calls_are_counted_from_best_not_from_the_candidates_launches() -> None:
    """A hostile review's attack (2026-12-01): one extra launch on one call made the candidate's
    least-launched kernel say 1 call, so four calls' bytes passed for one call's."""
    cand = profile(("cheap", 4, NEED / 4), ("noop", 1, 0.0))
    short = bytes_short(BEST, cand, REFS, {KEY: NEED})
    assert short is not None and len(short) == 1 and short[0].per_call == NEED / 4


def test_just_under_and_just_over_the_floor() -> None:
    under = profile(("k", 4, L2_FLOOR * NEED * 0.99))
    over = profile(("k", 4, L2_FLOOR * NEED * 1.01))
    assert len(bytes_short(BEST, under, REFS, {KEY: NEED}) or []) == 1
    assert bytes_short(BEST, over, REFS, {KEY: NEED}) == []


def test_what_cannot_be_checked_says_so_and_a_launch_without_bytes_moves_none() -> None:
    assert bytes_short(BEST, profile(("k", 4, None)), REFS, {KEY: NEED}) is None  # not measured
    mixed = profile(("k", 4, 1.0 * NEED), ("hidden", 4, None))
    assert bytes_short(BEST, mixed, REFS, {KEY: NEED}) == []  # its own bytes suffice
    mixed = profile(("k", 4, 0.5 * NEED), ("hidden", 4, None))
    assert len(bytes_short(BEST, mixed, REFS, {KEY: NEED}) or []) == 1  # a group without bytes moved none
    for need in ({}, {KEY: 0.0}, {KEY: math.nan}, {KEY: -1.0}):
        assert bytes_short(BEST, profile(("cheap", 4, 1.0)), REFS, need) == []  # nothing to compare with


def test_where_the_tool_tells_ranges_apart_best_s_openings_count_the_calls() -> None:
    """rocprofv3 names each opening of a range: best's ranges opened 4 times are 4 calls, though
    its kernel ran twice in each (a two-kernel call counted by its launches would be 8)."""
    best = summarize(
        [
            Launch(kernel="k", duration_ns=10.0, range=RNG, l2_bytes=0.8 * NEED, range_instance=str(i // 2))
            for i in range(8)
        ],
        "",
        tool="rocprofv3",
    )
    assert best.range_openings == ((RNG, 4),)
    honest = profile(("k", 8, 0.8 * NEED))  # 1.6x a call's bytes over 4 calls
    assert bytes_short(best, honest, REFS, {KEY: NEED}) == []

"""Hostile review (helper, 2026-12-01) of the profile's guard judgement and its neighbours:
cases a hostile candidate could buy, each failing before its fix. `WIDE` plays the guard class
(`guards={WIDE: 10.0}`, guard_max_regression_pct's default); engine/profile `agrees`,
`_judge_guard`, and classes.py's outside-time rule."""

from __future__ import annotations

import random

from kopt_supervisor.engine.loop.evidence import unshown
from kopt_supervisor.engine.profile import agrees
from kopt_supervisor.engine.profile.classes import compare_per_class
from kopt_supervisor.engine.profile.summary import Launch, summarize
from tests.profile.test_profile_classes import CONFIGS, NARROW, REFS, WIDE, Bench, profile

GUARD = {WIDE: 10.0}  # guard_max_regression_pct's default


def alternating(seed: int, wide: float, spread: float, *, calls: int, narrow: float = 1.0):
    """A profile whose wide configs run `wide` times best's time with launches alternating
    `spread` short and long (a spread the candidate sets itself), narrow's at `narrow`."""
    r = random.Random(seed)
    launches = []
    for key, ns in CONFIGS.items():
        for k in range(calls):
            f = wide * (1 + (spread if k % 2 else -spread)) if key.startswith(WIDE) else narrow
            launches.append(Launch("k", ns * f * (1 + r.gauss(0, 0.003)), range=f"kopt:{key}"))
    return summarize(launches, "", tool="test")


def test_a_guard_regression_beyond_the_margin_the_profiler_sees_is_not_let_through():
    # the candidate makes the guard configs 15% slower (beyond the 10% guard margin) and its
    # timer reads the guard tied (or even faster). At 4 calls a config the profiler reads the
    # guard +13% [+7.4%, +18.9%]: a significant loss whose estimate is beyond the margin (the
    # bench's own _guard_state calls such a class regressed_bad). Under db8f1f3's first guard
    # rule (disagree only when lo > 1.1) it was "cannot_tell", which blocks nothing:
    # Evidence.confirm stops on `disagrees` only and external_truth reads claimed classes only.
    # The guard now disagrees on its estimate beyond the margin.
    best = profile(12, calls=4, cv=0.02)
    cand = profile(13, calls=4, cv=0.02, scale={WIDE: 1.15})
    cmp = compare_per_class(best, cand, REFS)
    wide = cmp.by_class()[WIDE]
    assert wide.ratio > 1.10 and wide.lo > 1.0  # beyond the margin, and significant
    for bench_verdict in ("tied", "improved"):
        ag = agrees(
            [Bench(NARROW, "improved", 0.97, 0.96, 0.98), Bench(WIDE, bench_verdict, 0.99, 0.98, 1.0)],
            compare_per_class(best, profile(13, calls=4, cv=0.02, scale={WIDE: 1.15, NARROW: 0.97}), REFS),
            guards=GUARD,
        )
        if bench_verdict == "tied":  # the claim is shown: nothing but the guard can stop this keep
            assert not unshown(ag)
        assert ag.disagrees, (bench_verdict, ag.summary_line())
        assert {c.cls: c.status for c in ag.classes}[WIDE] == "disagrees"


def test_a_wide_guard_interval_hides_any_guard_regression():
    # the same with a 30% guard regression whose spread the candidate widened (its guard
    # configs' launches alternate short and long): estimate +25%, interval straddling 1.1
    cmp = compare_per_class(alternating(1, 1.0, 0.0, calls=4), alternating(2, 1.30, 0.35, calls=4, narrow=0.95), REFS)
    wide = cmp.by_class()[WIDE]
    assert wide.ratio > 1.25 and wide.lo <= 1.10
    ag = agrees([Bench(NARROW, "improved", 0.95, 0.94, 0.96), Bench(WIDE, "tied", 1.0, 0.99, 1.01)], cmp, guards=GUARD)
    assert not unshown(ag)
    assert ag.disagrees, ag.summary_line()


def test_a_lying_timer_on_the_guard_is_still_caught():
    # the bench claims the guard -20% [-22, -18]; the profiler reads +3% with a narrow interval
    # (it rules out the gain the bench measured). Under the first guard rule it "agreed" (within
    # its 10% margin); a bench it lies above by more than the margin is a lying timer.
    best = profile(12, calls=20)
    cand = profile(13, calls=20, scale={WIDE: 1.03})
    cmp = compare_per_class(best, cand, REFS, run_noise_pct=0.1)
    (c,) = agrees([Bench(WIDE, "improved", 0.80, 0.78, 0.82)], cmp, guards=GUARD).classes
    assert c.profiler_lo is not None and c.profiler_lo > 0.82
    assert c.status == "disagrees", c.reason


def test_a_guard_both_clocks_see_faster_blocks_nothing_but_a_lie_over_no_gain_still_does():
    # H200, part 24: BLOCK_D 32->128 read the guard -35.6% in the bench's CUDA graphs and -25.7%
    # [-27.3, -24.0] in the profiler's kernel times (tiny configs: the graph's gaps shrink too).
    # The profiler's interval lay above the bench's by more than the margin, so the guard
    # "disagreed" and a real -6.5% on a production class was rejected. A guard blocks losses
    # only: where the profiler itself sees the guard faster, there is none to block.
    best = profile(12, calls=20)
    real = compare_per_class(best, profile(13, calls=20, scale={WIDE: 0.75}), REFS, run_noise_pct=0.1)
    (c,) = agrees([Bench(WIDE, "improved", 0.644, 0.642, 0.646)], real, guards=GUARD).classes
    assert c.profiler_hi is not None and c.profiler_hi < 1.0 and c.profiler_lo > 0.646 * 1.1  # the premise
    assert c.status == "agrees", c.reason
    # the same bench claim over a guard the profiler sees no faster, or faster by less than half
    # the bench's gain (-0.5%, -15%): a lying timer inflating the run's geometric mean, blocked
    for scale in (1.0, 0.995, 0.85):
        flat = compare_per_class(best, profile(14, calls=20, scale={WIDE: scale}), REFS, run_noise_pct=0.1)
        (c,) = agrees([Bench(WIDE, "improved", 0.644, 0.642, 0.646)], flat, guards=GUARD).classes
        assert c.profiler_hi is not None and c.profiler_hi > 1.0 - (1.0 - 0.646) / 2, (scale, c)  # the premise
        assert c.status == "disagrees", (scale, c.reason)


def _moved_out(huge_at: int | None, huge_ns: float = 120000.0):
    """The candidate: narrow's kernels run in a thread of their own (NVTX ranges are per
    thread, so ncu puts them outside any range), leaving a stub in narrow's ranges; one dummy
    launch of the same helper kernel, `huge_ns` long, at position `huge_at` among the helper's
    outside launches."""
    rng = random.Random(7)
    launches, helper = [], []
    for key, ns in CONFIGS.items():
        for _ in range(4):
            if key.startswith(NARROW):
                launches.append(Launch("k", 0.5 * ns * (1 + rng.gauss(0, 0.003)), range=f"kopt:{key}"))
                helper.append(Launch("helper", 0.5 * ns * (1 + rng.gauss(0, 0.003)), range=""))
            else:
                launches.append(Launch("k", ns * (1 + rng.gauss(0, 0.003)), range=f"kopt:{key}"))
    if huge_at is not None:
        helper.insert(huge_at, Launch("helper", huge_ns, range=""))
    return summarize(launches + helper, "", tool="test")


def test_work_moved_out_of_the_ranges_is_not_hidden_by_one_long_outside_launch():
    # older than the guard rule: the "outside grew beyond noise" check took both sides' outside
    # spread as its noise, and the candidate sets its own. One long dummy launch of the helper
    # kernel made that spread as large as the work moved out: narrow "agreed" at -50% while the
    # candidate's GPU time grew. The noise is best's outside spread now, wherever the dummy sits.
    best = profile(1, calls=4, outside_ns=0.0)  # the bench draws on the host: nothing outside
    claim = [Bench(NARROW, "improved", 0.5, 0.48, 0.52), Bench(WIDE, "tied")]
    for huge_at in (0, 1, None):
        cmp = compare_per_class(best, _moved_out(huge_at=huge_at), REFS)
        assert cmp.unattributed.grew and cmp.problems, (huge_at, cmp.unattributed)
        assert agrees(claim, cmp).disagrees, huge_at


def test_a_guard_whose_kernels_left_its_ranges_blocks_nothing():
    # pre-existing: the guard configs' work leaves the GPU (a CPU fallback: no kernel at all), the
    # timer reads the guard tied. The profiler sees 600 us of kernels in best and none in the
    # candidate: it was "cannot_tell", which blocked nothing; a guard with a problem disagrees.
    best = profile(12, calls=4)
    cand = profile(13, calls=4, drop=("dclass=wide,n=4096",), scale={NARROW: 0.97})
    cmp = compare_per_class(best, cand, REFS)
    ag = agrees([Bench(NARROW, "improved", 0.97, 0.96, 0.98), Bench(WIDE, "tied", 1.0, 0.99, 1.01)], cmp, guards=GUARD)
    assert not unshown(ag)
    assert ag.disagrees, ag.summary_line()


def test_a_tied_class_s_loss_is_not_hidden_in_a_spread_the_candidate_widened():
    # what stayed open after the guard's fixes: a production class the keep does not claim, read
    # "tied" by a lying timer while 4% slower, its launches alternating short and long in the
    # candidate only; judged with its own spread it was "cannot tell", with best's it disagrees
    cmp = compare_per_class(alternating(1, 1.0, 0.0, calls=8), alternating(2, 1.04, 0.30, calls=8, narrow=0.95), REFS)
    wide = cmp.by_class()[WIDE]
    assert wide.lo is not None and wide.lo < 1.01  # its own spread: too wide to tell
    claim = [Bench(NARROW, "improved", 0.95, 0.94, 0.96), Bench(WIDE, "tied", 1.0, 0.99, 1.01)]
    ag = agrees(claim, cmp)
    assert not unshown(ag) and {c.cls: c.status for c in ag.classes}[WIDE] == "disagrees", ag.summary_line()

"""Hostile review (helper, session 27) of two rule changes since e04baba:

1. profile `_judge_guard`: a guard whose profiler interval lies above the bench's by more than
   the margin now AGREES when the profiler itself sees the guard faster by at least half the
   bench's speedup in log terms (`hi < min(1, sqrt(bench_hi))`).
2. decide `pooled_spreads` / `interval` ([decide].pooled_noise, on by default): (a) the pool
   leaves out each decision's ESD outliers; (b) the run's spread is used only when its degrees
   of freedom exceed the decision's own.

The attacker controls the candidate's own side of each look (and of its profile), and possibly
earlier candidates of the same run; never best's process. Each test compares the current rule
with the old one (copied below from e04baba). The review found two holes, both fixed the same
day: the first version of change 1 measured "half the gain" in 1 - ratio (a guard the profiler
sees 2x faster could claim any speedup), and, older, the guard's lying-timer check used the
candidate's own launch spread (a widened interval hid the lie). Their tests now pass.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest

from experiments import pooled_noise_replay as replay_mod
from kopt_supervisor.engine.decide.estimate import (
    Pair,
    Policy,
    Spread,
    class_samples,
    residual_ss,
)
from kopt_supervisor.engine.decide.verdict import evaluate, judged_pairs, pooled_spreads
from kopt_supervisor.engine.loop.evidence import unshown
from kopt_supervisor.engine.profile import AGREES, CANNOT_TELL, DISAGREES, _judge_guard, agrees
from kopt_supervisor.engine.profile.classes import compare_per_class
from tests.profile.test_profile_classes import NARROW, REFS, WIDE, Bench, profile
from tests.security.test_profile_guard_hostile import GUARD, alternating

POLICY = Policy(confidence=0.99, min_effect_pct=1.0, min_rounds=3, max_rounds=12, pooled_noise=True)


# --- the old rules (git show e04baba), for comparison ------------------------------------------


def old_judge_guard(lo, ratio, hi, margin_pct, bench_hi):  # type: ignore[no-untyped-def]
    if lo is None or hi is None or ratio is None:
        return CANNOT_TELL, ""
    g = 1.0 + margin_pct / 100.0
    if ratio > g:
        return DISAGREES, ""
    if bench_hi is not None and lo > bench_hi * g:
        return DISAGREES, ""
    if hi <= g:
        return AGREES, ""
    return CANNOT_TELL, ""


def old_pooled_spreads(decisions, policy, guard_configs=frozenset()):  # type: ignore[no-untyped-def]
    ss: dict[str, float] = defaultdict(float)
    df: dict[str, int] = defaultdict(int)
    for pairs in decisions:
        judged = judged_pairs(pairs, guard_configs)
        if any(p.block for p in judged):
            continue
        for cls, samples in class_samples(judged, policy).items():
            s, d = residual_ss([x for x in samples if not x.flagged])
            if d > 0:
                ss[cls] += s
                df[cls] += d
    return {cls: Spread(ss[cls] / df[cls], df[cls]) for cls in df}


# --- 1. the guard ------------------------------------------------------------------------------


def _guard(scale: float, bench: float, *, calls: int = 20):  # type: ignore[no-untyped-def]
    """The guard class (WIDE) profiled `scale` times best's time, and the bench claiming `bench`
    with a narrow interval of its own (the candidate's timer sets it)."""
    cmp = compare_per_class(
        profile(12, calls=calls), profile(13, calls=calls, scale={WIDE: scale}), REFS, run_noise_pct=0.1
    )
    (c,) = agrees([Bench(WIDE, "improved", bench, bench * 0.9, bench * 1.1)], cmp, guards=GUARD).classes
    old, _ = old_judge_guard(c.profiler_lo, c.profiler_ratio, c.profiler_hi, 10.0, bench * 1.1)
    return c, old


def test_a_guard_the_profiler_sees_2x_faster_cannot_claim_any_speedup_on_the_bench() -> None:
    """Was a hole in the first version of the new rule, found by this review and fixed (the rule
    now compares in log terms, hi < sqrt(bench_hi)). "Half the gain" was measured in 1 - ratio: once the profiler sees the guard
    at least ~2x faster (hi < 0.5), the threshold 1 - (1 - bench_hi)/2 exceeds hi for EVERY
    bench_hi > 0, so no bench claim is ever caught. Here the profiler reads the guard 0.45
    [0.448, 0.452] (2.2x) and the candidate's timer claims 0.01 (100x): the rule agrees; the
    old rule disagreed. The guard's figure enters the run's geometric-mean speedup
    (projections.best_speedup; cli: "the guard included"): with a real -6.5% production class,
    sqrt(1.07 * 100) = 10.3x reported instead of sqrt(1.07 * 2.2) = 1.5x. The too_fast escalation
    (a class > 3x) does not help: it asks the stronger checks, i.e. this very agreement.
    Sweep (profiler scale: bench claims that agree now / before, of 0.01, 0.1, 0.3, 0.5):
    0.45: 4/1, 0.5: 4/1, 0.6: 2/1, 0.75: 1/0 (the bench interval is claim +-10%).
    Measured in log ratio (hi < sqrt(bench_hi): the profiler sees at least half the bench's
    speedup in the geometric mean's own units) the H200 case of part 24 (bench_hi 0.646,
    profiler hi 0.760 < 0.804) still agrees, and this claim (0.105) is caught."""
    c, old = _guard(0.45, 0.01)
    assert c.profiler_hi is not None and c.profiler_hi < 0.5 and old == DISAGREES  # the premise
    assert 0.760 < math.sqrt(0.646) and not c.profiler_hi < math.sqrt(0.011)  # the log-space rule's verdicts
    # the keep as the loop's evidence step sees it: the production class's real -6.5% claimed and
    # shown, the guard's 100x claimed by the timer; nothing disagrees, so the keep stands
    cmp = compare_per_class(
        profile(12, calls=20), profile(13, calls=20, scale={WIDE: 0.45, NARROW: 0.935}), REFS, run_noise_pct=0.1
    )
    claim = [Bench(NARROW, "improved", 0.935, 0.93, 0.94), Bench(WIDE, "improved", 0.01, 0.009, 0.011)]
    ag = agrees(claim, cmp, guards=GUARD)
    assert NARROW not in unshown(ag)  # the production claim is shown: only the guard could stop it
    assert ag.disagrees, ag.summary_line()


def test_a_widened_profiler_interval_no_longer_hides_a_lying_timer_on_the_guard() -> None:
    """Was a hole older than these changes, found by this review and fixed (each bound of the
    guard's interval is now the more cautious of the candidate's launch spread and best's). The lying-timer check `lo > bench_hi (1 + g)` uses the profiler interval built from
    the candidate's own launch spread, which the candidate sets. A guard that changed nothing
    (profiler estimate 0.998) with launches alternating +-35% at 4 calls reads [0.59, 1.68]:
    the bench's claim of -35.6% [-35.8, -35.4] (part 24's figure) is neither ruled out nor
    confirmed, "cannot_tell", which blocks nothing for a guard (evidence.unshown reads claimed
    classes only). The tied class got best's launch spread for exactly this
    (ClassChange.lo_best_spread); the guard's above-the-bench check has no such spread."""
    cmp = compare_per_class(alternating(1, 1.0, 0.0, calls=4), alternating(2, 1.0, 0.35, calls=4), REFS)
    (c,) = agrees([Bench(WIDE, "improved", 0.644, 0.642, 0.646)], cmp, guards=GUARD).classes
    assert c.profiler_ratio is not None and abs(c.profiler_ratio - 1.0) < 0.01  # the premise: no gain at all
    assert old_judge_guard(c.profiler_lo, c.profiler_ratio, c.profiler_hi, 10.0, 0.646)[0] == CANNOT_TELL
    assert c.status == DISAGREES, (c.status, c.reason)


def test_the_new_guard_agreement_lets_no_regression_through_and_blocks_nothing_new() -> None:
    """Holds. Wherever the new rule differs from the old, the old disagreed, the new agrees, and
    the profiler's whole interval lies below 1 (it sees a gain): a guard loss, or a guard the
    profiler sees unchanged, is judged exactly as before whatever the bench claims. (The
    candidate sets its bench claim, so anything the new branch lets through it could have had
    from the old rule by claiming the profiler's own figure: the branch buys only the size of
    the claim, test_a_guard_the_profiler_sees_2x_faster_...)."""
    grid = [x / 100 for x in range(20, 141, 3)]
    differ = 0
    for lo in grid:
        for hi in grid:
            if hi < lo:
                continue
            for ratio in (lo, (lo + hi) / 2, hi):
                for bench_hi in [0.005, *grid]:
                    new = _judge_guard(lo, ratio, hi, 10.0, bench_hi)[0]
                    old = old_judge_guard(lo, ratio, hi, 10.0, bench_hi)[0]
                    if new != old:
                        differ += 1
                        assert (old, new) == (DISAGREES, AGREES) and hi < 1.0, (lo, ratio, hi, bench_hi)
    assert differ > 0
    # on real profiles: a guard the profiler sees unchanged or slower, any bench claim
    for scale in (1.0, 1.05, 1.09, 1.15, 1.3):
        for bench in (0.01, 0.3, 0.644, 0.9, 1.0, 1.2):
            c, old = _guard(scale, bench)
            assert c.status == old, (scale, bench, c.status, c.reason)
            if scale > 1.1:
                assert c.status == DISAGREES


def test_a_guard_whose_launches_the_candidate_spread_gets_nothing_from_the_new_branch() -> None:
    """Holds (for the new branch). The branch needs the profiler's UPPER end below the
    threshold; a candidate that alternates its guard launches short and long raises hi, so the
    branch never fires on a widened interval that a steady one would not also pass: with
    spreads of 0 to 60% and a real guard of 0.75 or 1.0 under the H200 claim (0.644), the only
    status more lenient than the old rule's is the steady real -25%, which both clocks see.
    Since each bound is also taken with best's launch spread (the fix of
    test_a_widened_profiler_interval_no_longer_hides_...), a widened guard under a claim larger than its real gain now
    disagrees where the old rule agreed or could not tell."""
    claim = [Bench(WIDE, "improved", 0.644, 0.642, 0.646)]
    changed = []
    for real in (0.75, 1.0):
        for spread in (0.0, 0.1, 0.2, 0.35, 0.6):
            cmp = compare_per_class(
                alternating(1, 1.0, 0.0, calls=20), alternating(2, real, spread, calls=20), REFS, run_noise_pct=0.1
            )
            (c,) = agrees(claim, cmp, guards=GUARD).classes
            old = old_judge_guard(c.profiler_lo, c.profiler_ratio, c.profiler_hi, 10.0, 0.646)[0]
            if c.status != old:
                changed.append((real, spread, c.status))
    lenient = [(real, spread) for real, spread, status in changed if status != DISAGREES]
    assert lenient == [(0.75, 0.0)], changed
    assert (1.0, 0.6, DISAGREES) in changed  # a widened guard that changed nothing: the lie is caught


# --- 2. the run's spread -----------------------------------------------------------------------

SB = 0.003  # best's own share of a look's log ratio (sd), which no candidate reaches


def _order(r: int) -> str:
    return "AB" if r % 4 in (0, 3) else "BA"


def _decision(looks: int, rng: random.Random, own, *, cls: str = "k") -> list[Pair]:  # type: ignore[no-untyped-def]
    """One config; best's side N(0, SB) per look; the candidate's log time is `own(look, rng)`
    (it never sees best's)."""
    return [
        Pair("c0", cls, 10.0 * math.exp(rng.gauss(0, SB)), 10.0 * math.exp(own(r, rng)), r, _order(r))
        for r in range(looks)
    ]


def _spikes(looks: tuple[int, ...], size: float):  # type: ignore[no-untyped-def]
    return lambda r, g: size if r in looks else 0.0


def test_spiked_looks_shrink_the_pool_no_further_than_a_steady_candidate() -> None:
    """Holds (change 2a). Earlier candidates, each otherwise perfectly steady (their own share
    removed: the documented bound), spike some looks by 2-50 x SB, to get the ESD test to drop
    looks whose extremeness is best's noise (swamping: a moderate spike removed after a natural
    tail). Pooled var / SB^2 over 150 decisions of 10 looks: steady 1.02; spikes of 12-50 x SB
    (dropped) 1.03, smaller ones 1.4-3.9 (kept in, as the decision kept them). A wider sweep
    (8-20 looks, 2-19.5 x SB, one, two, +-, three spikes, 200 decisions each) found none below
    the steady pool's own sampling spread (min 0.953 against steady 0.949-1.02). The old rule's
    pools of the same decisions: 1.4-376."""
    rng = random.Random(1)
    steady = pooled_spreads([_decision(10, rng, lambda r, g: 0.0) for _ in range(150)], POLICY)["k"].var
    assert 0.85 * SB**2 < steady < 1.15 * SB**2  # best's share stays in
    for size in (2, 3, 4, 6, 8, 12, 50):
        for looks in ((3,), (3, 7)):
            rng = random.Random(1)
            decs = [_decision(10, rng, _spikes(looks, size * SB)) for _ in range(150)]
            new = pooled_spreads(decs, POLICY)["k"].var
            assert new > 0.9 * steady, (size, looks, new / SB**2)
            assert new <= old_pooled_spreads(decs, POLICY)["k"].var * (1 + 1e-9)  # only what was dropped leaves


def test_a_later_candidate_buys_no_more_keeps_from_earlier_spikes_than_from_earlier_steadiness() -> None:
    """Holds (change 2a, end to end). Ten earlier candidates of 10 looks each leave the pool;
    the later one has a true gain of 0.8%, just under min_effect_pct, and honest noise (SB on
    its side too); keeps of 120 seeds: its own spread 14, steady earlier candidates 28, steady
    with two 5% spikes each 26 (the old rule's pool of those, 6.3 x SB: 0). At 200 seeds: own
    29, an honest run's pool 55, steady 52, spiked 53, spiked under the old rule 1. The spikes
    buy nothing a steady candidate could not already buy (the documented bound, docs/security.md
    "Shrink the pool"; pooling itself doubles keeps of a gain just under the threshold)."""
    rng = random.Random(7)
    steady = pooled_spreads([_decision(10, rng, lambda r, g: 0.0) for _ in range(10)], POLICY)
    spiked = pooled_spreads([_decision(10, rng, _spikes((2, 6), 0.05)) for _ in range(10)], POLICY)

    def keeps(spreads: dict[str, Spread]) -> int:
        r, won = random.Random(11), 0
        for _ in range(120):
            pairs = _decision(12, r, lambda k, g: g.gauss(0, SB) - 0.008)
            won += replay_mod.replay(pairs, POLICY, None, frozenset(), spreads, 12)[0] == "keep"
        return won

    k_steady, k_spiked = keeps(steady), keeps(spiked)
    assert k_spiked <= k_steady + 4, (k_steady, k_spiked)


def _gambler(looks: int, sd: float, rng: random.Random) -> list[Pair]:
    """No change; each look randomly slowed or sped by `sd` (the candidate's own choice)."""
    return _decision(looks, rng, lambda r, g: g.gauss(0, sd))


@pytest.mark.parametrize("pool_df", [1, 3, 6, 10])
def test_a_thin_run_spread_now_leaves_the_decision_exactly_its_own(pool_df: int) -> None:
    """Holds (change 2b). At a run's start the pool has few degrees of freedom; a decision whose
    own has at least as many decides on its own spread, as with pooled_noise off: whatever the
    candidate does with its looks (a +-2% gambler, or one steadier than the run with a 0.8% true
    gain), its verdicts are those of kopt's own rule, look for look. Keeps of 60 gamblers at 12
    looks (seed 99), pool df 1/3/6/10: own 0; new 0/0/1/1; old 0/2/1/1 (the 1s: early looks,
    where the pool still has more df than the decision and is used by both rules)."""
    thin = {"k": Spread((0.0018) ** 2, pool_df)}
    rng = random.Random(pool_df)
    for make in (lambda: _gambler(12, 0.02, rng), lambda: _decision(12, rng, lambda r, g: -0.008)):
        for _ in range(30):
            pairs = make()
            for k in range(POLICY.min_rounds, 13):
                done = [p for p in pairs if p.round < k]
                n_own = len(done) - 2 if k >= 6 else len(done) - 1  # the decision's own df
                if pool_df > n_own:
                    continue
                alone = evaluate(done, POLICY, spreads=None)
                assert evaluate(done, POLICY, spreads=thin) == alone, (pool_df, k)
    # whole decisions of 60 gamblers with the thin pool: as rare a keep as the review measured
    # under the old rule (0-2 of 60; its copy was dropped here, a twin of estimate.interval)
    r2, new_keeps = random.Random(99), 0
    for _ in range(60):
        new_keeps += replay_mod.replay(_gambler(12, 0.02, r2), POLICY, None, frozenset(), thin, 12)[0] == "keep"
    assert new_keeps <= 2, new_keeps

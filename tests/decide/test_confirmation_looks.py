"""A keep's confirmation at MIN_LOOKS (issue 26): a clear gain shown by every config of both
looks is confirmed there (`confirmation.consistent`), a claim that is not there, or only half
there, is not. Simulated fresh looks with the noise measured on the H200, a few hundred seeded
draws a case; experiments/confirmation_looks.py runs 10,000 and the rules weighed against it.

The noise on each config's log(candidate/best) in a look: lognormal with sd `sigma`; a part `rho`
of its variance shared by every config of the look (a side's clocks or a load spike move all of
its configs: within-class correlation 0.42 and 0.55 in the H200's A/A looks); a first/second
position effect that alternates with the look's order (+-7%; 9.5% on the tuned RMSNorm); a
whole look moved by +-30% in 2% of looks and single values by +-20% in 1%. The keep's claim
carries the interval of a decision of 6 looks simulated with the same noise.
"""

from __future__ import annotations

import math
import random

import pytest

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide.confirmation import EXTENDED_MAX_LOOKS, MAX_LOOKS, MIN_LOOKS, Confirmation, judge
from kopt_supervisor.engine.decide.estimate import ClassResult, Pair, Policy, Verdict, class_samples, estimate_class

POLICY = Policy.from_config(DecideConfig())
ALPHA = 1.0 - POLICY.confidence
DECISION_LOOKS = 6

NOISE = {
    # (configs, sigma, rho, position effect, its sign shared by every config, fresh noise / decision's)
    "H200 tuned: K=2, 3%, rho .5, position 9.5% shared": (2, 0.03, 0.5, 0.095, True, 1.0),
    "K=3, 7%, rho .5, position +-7%": (3, 0.07, 0.5, 0.07, False, 1.0),
    "K=6, 7%, rho .9, position 7% shared": (6, 0.07, 0.9, 0.07, True, 1.0),
    "one shared disturbance: K=6, 3%, rho .95": (6, 0.03, 0.95, 0.0, True, 1.0),
    "fresh looks 5x noisier than the decision's: K=3, 2% -> 10%, rho 1": (3, 0.02, 1.0, 0.0, True, 5.0),
}
QUIET = {
    # noise in which six looks can tell a few per cent from no change
    "K=3, 1%, rho .5, position +-2%": (3, 0.01, 0.5, 0.02, False, 1.0),
    "K=6, 1%, rho .5, position +-2%": (6, 0.01, 0.5, 0.02, False, 1.0),
}
SPECS = {**NOISE, **QUIET}


def looks(rng: random.Random, noise: str, truth: float, n: int, scale: float = 1.0) -> list[list[float]]:
    k, sigma, rho, pos, shared, _ = SPECS[noise]
    sigma, pos = sigma * scale, pos * scale
    signs = [rng.choice((-1.0, 1.0))] * k if shared else [rng.choice((-1.0, 1.0)) for _ in range(k)]
    out = []
    for look in range(n):
        order = 1.0 if look % 2 == 0 else -1.0
        common = rng.gauss(0.0, 1.0)
        spike = rng.choice((-0.3, 0.3)) if rng.random() < 0.02 else 0.0
        row = []
        for c in range(k):
            e = sigma * (math.sqrt(rho) * common + math.sqrt(1.0 - rho) * rng.gauss(0.0, 1.0))
            e += order * signs[c] * pos + spike + (rng.choice((-0.2, 0.2)) if rng.random() < 0.01 else 0.0)
            row.append(math.log(truth) + e)
        out.append(row)
    return out


def pairs_of(x: list[list[float]]) -> list[Pair]:
    return [
        Pair(f"c/{c}", "c", 100.0, 100.0 * math.exp(v), r, "AB" if r % 2 == 0 else "BA")
        for r, row in enumerate(x)
        for c, v in enumerate(row)
    ]


def claim_of(claimed: float, decision: list[list[float]]) -> Verdict:
    """The keep: class c improved at `claimed`, with the interval its decision's looks give."""
    ps = pairs_of(decision)
    r = estimate_class("c", ps, class_samples(ps, POLICY)["c"], POLICY, final=False)
    w = math.log(r.hi / r.lo) / 2.0
    c = ClassResult(
        "c", r.rounds, r.n, 100.0, 100.0 * claimed, claimed, claimed * math.exp(-w), claimed * math.exp(w), "improved"
    )
    return Verdict("keep", "faster", (c,), rounds=r.rounds)


def confirm(keep: Verdict, x: list[list[float]], extend_to: int = EXTENDED_MAX_LOOKS) -> Confirmation:
    """Looks one at a time until the rule stops, as the loop takes them."""
    pairs = pairs_of(x)
    for n in range(MIN_LOOKS, max(MAX_LOOKS, extend_to) + 1):
        out = judge([p for p in pairs if p.round < n], keep, POLICY, extend_to=extend_to)
        if out.final:
            return out
    raise AssertionError("the rule must end by its cap")


def run(
    noise: str, claimed: float, truth: float, draws: int, extend_to: int = EXTENDED_MAX_LOOKS
) -> list[Confirmation]:
    """Seeded confirmations (`extend_to`: the extension's cap; MAX_LOOKS: the rule before it).
    The decision's looks and the first MAX_LOOKS fresh looks are the draws these tests took
    before the extension; looks MAX_LOOKS+1.. come from a generator of their own (their
    position effect's sign drawn again)."""
    rng = random.Random(f"{noise}/{claimed}/{truth}")
    scale = SPECS[noise][5]
    outs = []
    for i in range(draws):
        keep = claim_of(claimed, looks(rng, noise, claimed, DECISION_LOOKS))
        six = looks(rng, noise, truth, MAX_LOOKS, scale)
        more = looks(
            random.Random(f"{noise}/{claimed}/{truth}/{i}"), noise, truth, EXTENDED_MAX_LOOKS - MAX_LOOKS, scale
        )
        outs.append(confirm(keep, six + more, extend_to))
    return outs


@pytest.mark.parametrize("noise", list(SPECS))
def test_a_claim_that_is_not_there_is_not_confirmed_before_max_looks_nor_at_it(noise):
    """A/A: no change, whatever the claim. Early confirmations stay within the alpha/2 the
    intervals' upper sides spend over looks 2..5, with noise shared by every config of a look,
    whole looks moved by 30%, and fresh looks five times noisier than the decision's. A rule
    that took the configs as replicates would not (experiments/confirmation_looks.py: 0.5-45%
    of A/A confirmations of a 2% claim). Nor does MAX_LOOKS confirm a claim on an estimate
    within the looks' noise (`beyond_noise`: at most alpha/2 more): before, half a 2% claim on
    the estimate alone confirmed 8-43% in the script's noises (confirmation_looks.py --max-looks)."""
    draws = 300
    for claimed in (0.98, 0.97, 0.90, 0.60, 0.51):
        outs = run(noise, claimed, 1.0, draws)
        early = sum(o.outcome == "confirmed" and o.looks < MAX_LOOKS for o in outs)
        assert early <= ALPHA / 2 * draws + 2, (claimed, early)
        confirmed = [o.reason for o in outs if o.outcome == "confirmed"]
        assert len(confirmed) <= ALPHA * draws + 3, (claimed, confirmed)
        if claimed <= 0.60:  # a large claim that is not there
            assert len(confirmed) <= 1, claimed


@pytest.mark.parametrize("noise", list(QUIET))
def test_a_real_gain_of_a_few_per_cent_is_still_confirmed_where_six_looks_can_tell_it(noise):
    """-3% and -10% claimed and true in 1% per-look noise: confirmed in most draws, never
    refuted. -3%: 80% of these draws (70-73% without MAX_LOOKS's `beyond_noise`; 93-95% on the
    estimate alone). What goes to review is mostly a look moved by 20-30% that six looks cannot
    set aside (no outlier test below 8 samples): its interval holds no change."""
    for claimed, at_least in ((0.97, 0.76), (0.90, 0.85)):
        outs = run(noise, claimed, claimed, 200)
        assert not [o.reason for o in outs if o.outcome == "refuted"], claimed
        assert sum(o.outcome == "confirmed" for o in outs) >= at_least * len(outs), claimed


@pytest.mark.parametrize("noise", list(NOISE))
def test_a_gain_that_shrank_to_a_quarter_in_fresh_processes_is_not_confirmed_early(noise):
    """-40% claimed, -10% in fresh processes: less than half the claim is there. Not confirmed
    before MAX_LOOKS while the fresh looks are no noisier than the decision's (experiments/
    confirmation_looks.py, 10,000 draws: at most 4 in 10,000 more than before issue 26, each
    two whole looks moved by -30% in a row). Fresh looks five times noisier than a 2% decision
    (10% shared by every config of a look, beyond the 7% the H200 showed) fake half the claim
    in both looks in 1.7% of draws (0.2% before): the limit of taking the decision's noise for
    the fresh looks'. MAX_LOOKS's rule confirms it now and then when the noise every config
    shares is large (rho .9 and more), as before."""
    outs = run(noise, 0.60, 0.90, 300)
    early = [o.reason for o in outs if o.outcome == "confirmed" and o.looks < MAX_LOOKS]
    assert len(early) <= (0.04 * len(outs) if NOISE[noise][5] > 1.0 else 0), early
    if NOISE[noise][2] < 0.9:
        assert all(o.outcome in ("refuted", "undecided") for o in outs)


@pytest.mark.parametrize("noise", list(NOISE))
def test_a_true_49_pct_gain_is_confirmed_mostly_at_two_looks(noise):
    """-49% claimed and true: always confirmed, in most draws at MIN_LOOKS (58-89% in these
    noises over 10,000 draws; before issue 26, 1-4%: about 4 looks with the position effect)."""
    outs = run(noise, 0.51, 0.51, 200)
    assert all(o.outcome == "confirmed" for o in outs), [o.reason for o in outs if o.outcome != "confirmed"]
    at_two = sum(o.looks == MIN_LOOKS for o in outs)
    assert at_two >= 0.5 * len(outs), at_two


def consistent_looks(ratios: list[list[float]], *, flagged: frozenset[int] = frozenset()) -> list[Pair]:
    return [
        Pair(f"c/{c}", "c", 100.0, 100.0 * v, r, "AB" if r % 2 == 0 else "BA", flagged=r in flagged)
        for r, row in enumerate(ratios)
        for c, v in enumerate(row)
    ]


def decided(ratio: float, lo: float, hi: float, n: int = 6) -> Verdict:
    return Verdict(
        "keep", "faster", (ClassResult("c", n, n, 100.0, 100.0 * ratio, ratio, lo, hi, "improved"),), rounds=n
    )


def test_a_clear_gain_in_every_config_of_both_looks_is_confirmed_at_two_looks():
    """Two looks 4% apart (the interval over looks: -32% [-100, +1500]): before, a third look."""
    two = consistent_looks([[0.50, 0.49, 0.51], [0.53, 0.52, 0.51]])
    out = judge(two, decided(0.51, 0.49, 0.53), POLICY)
    assert out.outcome == "confirmed" and out.looks == MIN_LOOKS, out.reason
    assert [c.state for c in out.classes] == ["consistent"] and "every config of every look" in out.reason
    assert out.classes[0].hi > 1.0  # the interval over two looks says nothing yet
    throughput = Policy.from_config(DecideConfig(), direction="max")
    inverse = [Pair(p.config, p.cls, p.cand, p.best, p.round, p.order) for p in two]
    assert judge(inverse, decided(0.51, 0.49, 0.53), throughput).outcome == "confirmed"


def test_what_a_clear_gain_needs():
    two = consistent_looks([[0.50, 0.49, 0.51], [0.53, 0.52, 0.51]])
    keep = decided(0.51, 0.49, 0.53)
    assert judge(two, keep, POLICY).outcome == "confirmed"
    # a decision too noisy to vouch for the fresh looks: its interval allows a sd near half the claim
    assert judge(two, decided(0.51, 0.30, 0.87), POLICY).outcome == "looking"
    assert judge(two, decided(0.51, 0.0, math.inf), POLICY).outcome == "looking"
    assert judge(two, decided(0.51, 0.49, 0.53, n=2), POLICY).outcome == "looking"
    # one config of one look short of half the claim (0.755)
    short = consistent_looks([[0.50, 0.49, 0.76], [0.53, 0.52, 0.51]])
    assert judge(short, keep, POLICY).outcome == "looking"
    # one order only: the second look disturbed, the position effect seen one way
    one_order = consistent_looks([[0.50, 0.49, 0.51], [0.53, 0.52, 0.51], [0.52, 0.50, 0.53]], flagged=frozenset({1}))
    assert judge(one_order, keep, POLICY).outcome == "looking"
    # a claim under 26%: half of it is within two sds of the noise measured on the H200
    looks_21 = consistent_looks([[0.78, 0.79, 0.80], [0.80, 0.81, 0.79]])
    assert judge(looks_21, decided(0.79, 0.78, 0.80), POLICY).outcome == "looking"
    assert judge(looks_21, decided(0.74, 0.73, 0.75), POLICY).outcome == "confirmed"  # half of 26%: 0.87


@pytest.mark.parametrize("noise", list(QUIET))
def test_the_extension_confirms_a_real_small_gain_six_looks_left_in_their_noise(noise):
    """-3% claimed and true in 1% per-look noise: the rule of 97b6dec (no extension) confirmed
    80% of these draws; what it sent to review was mostly half the claim within six looks'
    noise, and the extension's looks 7..12 (alpha split with MAX_LOOKS) confirm most of it:
    92-93% here. What stays undecided is mostly a look moved by 20-30% (2% of looks)."""
    draws = 200
    before = run(noise, 0.97, 0.97, draws, extend_to=MAX_LOOKS)
    after = run(noise, 0.97, 0.97, draws)
    assert not [o.reason for o in after if o.outcome == "refuted"]
    confirmed_before = sum(o.outcome == "confirmed" for o in before)
    assert sum(o.outcome == "confirmed" for o in after) >= max(0.87 * draws, confirmed_before + 0.07 * draws)
    assert sum(o.outcome == "confirmed" and o.looks > MAX_LOOKS for o in after) >= 0.10 * draws


def test_the_extension_keeps_a_claim_that_is_not_there_unconfirmed():
    """A/A, claims of 2% and 3% in 7% per-look noise (where six looks often show half a small
    claim that is not there, so where the extension runs most): the whole confirmation, looks
    7..12 included, confirms at most alpha/2 of them and a draw (2 and 2 of 400 here;
    experiments/confirmation_looks.py --extend, 10,000 draws a case: docs/decision.md). The
    extension's tests at the full alpha at every look (5 and 11 of 400), or MAX_LOOKS's at the
    full alpha with the extension's on top (2 and 5), would not hold it."""
    noise = "K=3, 7%, rho .5, position +-7%"
    draws = 400
    for claimed in (0.98, 0.97):
        outs = run(noise, claimed, 1.0, draws)
        confirmed = [o for o in outs if o.outcome == "confirmed"]
        assert len(confirmed) <= ALPHA / 2 * draws + 1, (claimed, [o.reason for o in confirmed])
        assert sum(o.looks > MAX_LOOKS for o in outs) >= 0.10 * draws  # the extension ran


@pytest.mark.parametrize("noise", list(NOISE))
def test_the_extension_changes_nothing_before_max_looks(noise):
    """Clear gains conclude as fast as before the extension: every confirmation or refutation
    before MAX_LOOKS (the 2-look `consistent` path included) is the same, at the same look."""
    for claimed, truth in ((0.51, 0.51), (0.60, 0.90)):
        before = run(noise, claimed, truth, 100, extend_to=MAX_LOOKS)
        after = run(noise, claimed, truth, 100)
        for b, a in zip(before, after, strict=True):
            if b.looks < MAX_LOOKS:
                assert (a.outcome, a.looks, a.reason) == (b.outcome, b.looks, b.reason)
            else:
                assert a.looks >= MAX_LOOKS
        assert sum(a.outcome == "confirmed" and a.looks == MIN_LOOKS for a in after) >= (50 if claimed < 0.6 else 0)

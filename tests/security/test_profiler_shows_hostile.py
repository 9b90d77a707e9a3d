"""A timer patch the profiler reads just below no change is not a keep (decide/external_truth.py
`profiler_shows`, used by engine/loop/evidence.py `unshown` and `by_profiler`).

Until 2026-12-03 a claimed class was shown on a GPU when the profiler's interval lay below 1
and not above the bench's (profile.agrees). A timer patch that claims a few per cent, its
bench interval wide enough to reach the profiler's, needed only a drift of the candidate's
profile run of ~1% (2-3 run-noise sds of DEFAULT_RUN_NOISE_PCT for the pair) to be shown by
the device's own clock. The profiler's estimate now has to keep half the claimed gain as well,
the rule the profile pair already met to stand in for the looks (`by_profiler`).

Not its interval's upper bound, the form the OS's clocks are held to: on the H200 (2026-12-03,
docs/decision.md "The profiler's word on a small claim") the closer profile's intervals on the
RMSNorm demo's wide class were +-1.5-2.2% at 12 calls a config while the same real -3.4% step's
estimates moved by 0.4% (sd) from try to try, and the bound refused one real keep in five."""

from __future__ import annotations

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.estimate import ClassResult, Policy, Verdict
from kopt_supervisor.engine.decide.external_truth import by_profiler, profiler_unshown, settle
from kopt_supervisor.engine.loop.evidence import unshown
from kopt_supervisor.engine.profile import agrees
from kopt_supervisor.engine.profile.classes import compare_per_class
from kopt_supervisor.engine.profile.profiler import REUSED_RUN_NOISE_PCT
from tests.profile.test_profile_classes import NARROW, REFS, WIDE, Bench, profile

POLICY = Policy.from_config(DecideConfig())
CLAIM = [Bench(NARROW, "improved", 0.97, 0.95, 0.99), Bench(WIDE, "improved", 0.97, 0.95, 0.99)]
"""What a timer that reads 97% of what it measures claims, with a noisy bench interval."""


def agreement(shift: float, claim: list[Bench] = CLAIM):
    """The profiler's agreement for a candidate whose kernels take `shift` times best's (its
    run drifting, or a real change)."""
    return agrees(claim, compare_per_class(profile(1), profile(2, shift=shift), REFS))


def pair_record(shift: float) -> dict:
    ag = agreement(shift)
    return {
        "agreement": ag.to_dict(),
        "outputs": {"checked": 9},
        "taken": {"best_from": None, "best_is_baseline": True},
    }


KEEP = Verdict(
    "keep",
    "-3% (a timer patch)",
    tuple(ClassResult(b.cls, 5, 5, 100.0, 97.0, b.ratio, b.lo, b.hi, "improved") for b in CLAIM),
)


def test_a_timer_patch_a_run_drift_puts_below_no_change_is_not_shown():
    ag = agreement(0.99)  # the kernels unchanged, the candidate's profile run 1% quicker
    # the old rule: every claimed class "agrees" (its interval below 1, not above the bench's)
    assert {c.cls: c.status for c in ag.classes} == {NARROW: "agrees", WIDE: "agrees"}
    assert all(c.profiler_hi is not None and c.profiler_hi < 1.0 for c in ag.classes)
    # the rule now: the profiler's -1% does not keep half the claimed 3%
    assert all(c.profiler_ratio is not None and c.profiler_ratio > 0.985 for c in ag.classes)
    assert unshown(ag) == [NARROW, WIDE]
    # the pair does not stand in for the looks, and the external truth cannot confirm it
    assert by_profiler(pair_record(0.99), KEEP, POLICY) is None
    truth = profiler_unshown(unshown(ag), ag.summary_line(), ag.to_dict(), 12)
    assert truth.outcome == "inconclusive" and "for the claimed -3.0%, short of half of it (-1.5%)" in truth.reason
    looks = Confirmation("confirmed", "fresh servers: -3%", 3, ())  # the patched timer fools the looks
    kept = settle(KEEP, looks, truth)
    assert kept.kind == "borderline" and "external_truth_inconclusive" in kept.flags


def test_the_same_claim_made_by_a_real_change_is_shown():
    ag = agreement(0.97)  # the kernels 3% quicker, as claimed
    assert not unshown(ag)
    conf = by_profiler(pair_record(0.97), KEEP, POLICY)
    assert conf is not None and conf.outcome == "confirmed"
    assert {c.cls: c.state for c in conf.classes} == {NARROW: "shown", WIDE: "shown"}


def test_half_the_claim_is_the_line():
    """A real change the profiler sees smaller than the bench (isolated launches against the
    bench's graphs: the H200's num_warps keep read -11.0% by the bench, -8.3% by the profiler)
    is shown while the profiler's estimate keeps half the claim, and not once it does not."""
    claim = [Bench(NARROW, "improved", 0.89, 0.80, 0.98), Bench(WIDE, "improved", 0.89, 0.80, 0.98)]
    assert not unshown(agreement(0.93, claim))  # -7% seen, -5.5% needed
    short = agreement(0.95, claim)  # -5% seen, agreeing with the bench: short of -5.5%
    assert {c.status for c in short.classes} == {"agrees"} and unshown(short) == [NARROW, WIDE]


def test_a_drift_against_a_reused_best_profile_shows_no_timer_patch():
    """Best's profile reused from an earlier keep was taken minutes before the candidate's: on the
    H200 one unchanged tree's profiles minutes apart differed by up to ~3% on the wide class
    (profiler.REUSED_RUN_NOISE_PCT). A timer patch claiming -3.4% whose profile ran 2% quicker
    than best's reused one was shown with the default run-to-run term; with the reused pair's
    term the profiler cannot tell, so the loop profiles both trees again, closer and fresh."""
    claim = [Bench(NARROW, "improved", 0.966, 0.961, 0.970), Bench(WIDE, "improved", 0.966, 0.961, 0.970)]
    best, cand = profile(1), profile(2, shift=0.98)
    default = agrees(claim, compare_per_class(best, cand, REFS, run_noise_pct=0.3))
    assert not unshown(default)  # what reuse bought a timer patch before
    reused = agrees(claim, compare_per_class(best, cand, REFS, run_noise_pct=REUSED_RUN_NOISE_PCT))
    assert unshown(reused) == [NARROW, WIDE]
    assert {c.status for c in reused.classes} == {"cannot_tell"}

"""What a keep becomes once its confirmation and its external truth are in
(engine/decide/external_truth.py `settle`), and the line that names its truth."""

from __future__ import annotations

from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.estimate import NEEDS_STRONGER_CHECKS, Verdict
from kopt_supervisor.engine.decide.external_truth import (
    TIMER_ONLY,
    ExternalTruth,
    OsTruth,
    of_os_time,
    of_profiler,
    settle,
    timer_only,
    truth_line,
)

KEEP = Verdict("keep", "narrow −40.0% faster", rounds=3)
SUSPICIOUS = Verdict(
    "keep",
    "narrow −73.0% faster; needs the stronger checks: narrow is 3.7x faster",
    rounds=3,
    flags=("suspicious_speedup", NEEDS_STRONGER_CHECKS),
    escalation="narrow is 3.7x faster",
)
CONFIRMED = Confirmation("confirmed", "after 3 looks: narrow −40.1% [−41.0, −39.2] (claimed −40.0%)", 3)
REFUTED = Confirmation("refuted", "less than half the claimed gain after 3 looks: narrow +0.1% [...]", 3)
OS_SHOWN = of_os_time(OsTruth("shown", "the OS's accounting shows 0.4 s of CPU time saved per look", 8, 0.4))
OS_REFUTED = of_os_time(
    OsTruth(
        "refuted", "the OS's accounting shows 0.001 s of CPU time saved per look of the 0.4 s the bench claims", 8, 0.4
    )
)
OS_CANNOT_TELL = of_os_time(OsTruth("inconclusive", "the OS's accounting cannot tell", 8, 0.01))
PROFILER = of_profiler("narrow agrees (−40.2%)", {"classes": []})


def test_a_confirmed_keep_says_what_confirmed_it():
    v = settle(KEEP, CONFIRMED, OS_SHOWN)
    assert v.kind == "keep" and "confirmed in fresh servers after 3 looks" in v.reason and "0.4 s of CPU" in v.reason
    v = settle(KEEP, CONFIRMED, timer_only("no profiler for the nvidia GPU"))
    assert v.kind == "keep" and TIMER_ONLY in v.reason


def test_a_claim_the_os_refutes_is_no_keep():
    v = settle(KEEP, CONFIRMED, OS_REFUTED)
    assert v.kind == "rejected" and "external_truth_refutes" in v.flags
    assert v.reason.startswith("the OS's accounting shows 0.001 s") and "(bench: narrow −40.0% faster)" in v.reason
    assert settle(SUSPICIOUS, CONFIRMED, OS_REFUTED).kind == "rejected"


def test_a_confirmation_that_disagrees_goes_to_review_with_both_numbers():
    v = settle(KEEP, REFUTED, OS_SHOWN)
    assert v.kind == "borderline" and "confirmation_disagrees" in v.flags
    assert "refuted: less than half" in v.reason and "first: narrow −40.0% faster" in v.reason
    process = settle(KEEP, Confirmation("refuted", "tie: no difference of 1%", 6, path="process"), OS_SHOWN)
    assert process.kind == "borderline" and "reverify_disagrees" in process.flags
    assert "disagrees: first narrow −40.0% faster; fresh processes tie: no difference" in process.reason


def test_a_suspicious_speedup_stands_when_the_stronger_checks_agree():
    for truth in (OS_SHOWN, PROFILER):
        v = settle(SUSPICIOUS, CONFIRMED, truth)
        assert v.kind == "keep" and not v.needs_stronger_checks and NEEDS_STRONGER_CHECKS not in v.flags
        assert "the stronger checks agree" in v.reason and truth.reason in v.reason
        assert "audited outputs on fresh inputs" in v.reason


def test_a_suspicious_speedup_goes_to_review_when_a_stronger_check_cannot_run():
    v = settle(SUSPICIOUS, CONFIRMED, OS_CANNOT_TELL)
    assert v.kind == "borderline" and "stronger_checks_unavailable" in v.flags
    assert "narrow is 3.7x faster" in v.reason and "cannot tell" in v.reason
    no_audit = Confirmation("confirmed", "keep: narrow faster", 6, path="process")
    v = settle(SUSPICIOUS, no_audit, PROFILER)
    assert v.kind == "borderline" and "no output audit on fresh inputs" in v.reason
    v = settle(SUSPICIOUS, REFUTED, OS_SHOWN)  # the confirmation disagrees: review, its numbers
    assert v.kind == "borderline" and "confirmation_disagrees" in v.flags


def test_a_keep_the_os_cannot_tell_goes_to_review_with_its_figures():
    """Weighed and not told (a claim under the CPU clock's ticks, or a loaded machine's noise):
    no clock outside the candidate's process confirms it, so it is no automatic keep; a bench
    with nothing to weigh (no [target].calls) stays a keep on the bench's timer alone."""
    assert OS_CANNOT_TELL.kind == "os_time" and OS_CANNOT_TELL.outcome == "inconclusive"
    v = settle(KEEP, CONFIRMED, OS_CANNOT_TELL)
    assert v.kind == "borderline" and "external_truth_inconclusive" in v.flags
    assert v.reason.startswith("the OS's accounting cannot tell: no clock outside the candidate's process confirms")
    assert "(bench: narrow −40.0% faster)" in v.reason and "fresh servers after 3 looks" in v.reason
    nothing = of_os_time(OsTruth("not_applicable", "the bench reports no timed seconds ([target].calls)", 0))
    assert nothing.kind == "none" and settle(KEEP, CONFIRMED, nothing).kind == "keep"


def test_other_verdicts_pass_through():
    tie = Verdict("tie", "no difference", rounds=5)
    assert settle(tie, REFUTED, OS_REFUTED) is tie


def test_the_truth_line_and_the_record():
    assert truth_line({"external_truth": OS_SHOWN.to_dict()}, "keep") == OS_SHOWN.reason
    assert truth_line({}, "accepted") == f"{TIMER_ONLY} (accepted in review)"
    assert truth_line({}, "keep").startswith(TIMER_ONLY)
    assert truth_line({"external_truth": OS_CANNOT_TELL.to_dict()}, "accepted") == (
        f"{TIMER_ONLY} (accepted in review; the OS's accounting cannot tell)"
    )
    assert ExternalTruth.from_dict({**OS_REFUTED.to_dict(), "extra": 1}) == OS_REFUTED

"""What a finding, the stronger checks or the engineer do to a verdict (docs/design.md §5).

Pure functions on verdict.py's `Verdict`:
- `escalate(verdict, findings)`: a keep whose numbers are only surprising (too fast, faster
  than the floor, a median the mean does not follow) stays a keep with the flag
  needs_stronger_checks; `checks_agree(verdict, summary)` is what the loop's evidence step
  returns when the stronger checks agree, `send_to_review` when they disagree or cannot run;
  `note` adds a finding to a verdict that stands.
- `review_outcome(verdict, answer, ...)`: what a borderline verdict becomes when the
  engineer answers, or when nobody does before review_timeout_s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.decide.estimate import NEEDS_STRONGER_CHECKS, Policy, Verdict
from kopt_supervisor.engine.decide.plausible import ESCALATE, Implausible


def escalate(verdict: Verdict, findings: Sequence[Implausible]) -> Verdict:
    """A final verdict with the findings that escalate (`plausible.ESCALATE`): a keep stays a
    keep, flagged needs_stronger_checks with each finding's flag, its reasons in
    `Verdict.escalation` and in the reason; it is not final until the stronger checks ran
    (`checks_agree`, or `send_to_review`). Any other verdict only notes them."""
    if not findings:
        return verdict
    assert all(f.action == ESCALATE for f in findings), "only findings that escalate"
    why = "; ".join(f.reason for f in findings)
    flags = verdict.flags
    for f in findings:
        flags = _add(flags, f.flag)
    if verdict.kind != "keep":
        return replace(verdict, reason=f"{verdict.reason}; {why}", flags=flags)
    return replace(
        verdict,
        reason=f"{verdict.reason}; needs the stronger checks: {why}",
        flags=_add(flags, NEEDS_STRONGER_CHECKS),
        focus=verdict.focus or findings[0].cls,
        escalation=why,
    )


def checks_agree(verdict: Verdict, summary: str) -> Verdict:
    """A keep that needed the stronger checks, once they agree: final (the flag
    needs_stronger_checks leaves, the finding's own flags and `escalation` stay on record),
    with what the checks found in the reason."""
    if not verdict.needs_stronger_checks:
        return verdict
    return replace(
        verdict,
        reason=f"{verdict.reason}; the stronger checks agree: {summary}",
        flags=tuple(f for f in verdict.flags if f != NEEDS_STRONGER_CHECKS),
    )


def send_to_review(verdict: Verdict, flag: str, reason: str, focus: str = "") -> Verdict:
    """A final verdict with a finding that needs the engineer (an implausible number, a
    construct the diff scan flagged): a keep becomes borderline, a borderline stays one
    with the finding added; a verdict that discards the candidate (regression, tie, ...)
    only notes it. `flag` joins the flags (once), `reason` the reason; `focus` (the class the
    finding names) becomes the review's focus, so the engineer is shown that class first."""
    if verdict.kind == "keep":
        return replace(
            verdict,
            kind="borderline",
            reason=f"{reason} (bench: {verdict.reason})",
            flags=_add(verdict.flags, flag),
            focus=focus or verdict.focus,
        )
    return note(verdict, flag, reason)


def note(verdict: Verdict, flag: str, reason: str) -> Verdict:
    """The verdict as it is, with a finding added to its reason and flags."""
    return replace(verdict, reason=f"{verdict.reason}; {reason}", flags=_add(verdict.flags, flag))


def _add(flags: tuple[str, ...], flag: str) -> tuple[str, ...]:
    return flags if flag in flags else flags + (flag,)


@dataclass(frozen=True)
class ReviewOutcome:
    """What a borderline verdict became."""

    status: str
    """"accepted" (the candidate is kept) or "rejected"."""
    by: str
    """"engineer" or "policy" (nobody answered before review_timeout_s)."""
    reason: str

    @property
    def keep(self) -> bool:
        return self.status == "accepted"


def review_outcome(verdict: Verdict, answer: str | None, policy: Policy, *, why: str = "") -> ReviewOutcome:
    """The outcome of a borderline verdict's review.

    answer: "accept" or "reject" from the engineer, or None when review_timeout_s passed
    with no answer; then policy.review_default ("reject" by default) decides.
    """
    if answer is None:
        status = "accepted" if policy.review_default == "accept" else "rejected"
        return ReviewOutcome(
            status,
            "policy",
            f"no answer within {policy.review_timeout_s:g} s: "
            f"review_default is {policy.review_default} ({verdict.reason})",
        )
    if answer not in ("accept", "reject"):
        raise BadInput(f'review answer must be "accept" or "reject", not {answer!r}')
    status = "accepted" if answer == "accept" else "rejected"
    return ReviewOutcome(status, "engineer", why or f"{answer}ed by the engineer ({verdict.reason})")

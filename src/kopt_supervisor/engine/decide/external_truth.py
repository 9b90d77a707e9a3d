"""What confirmed a keep beyond the bench's own timer, and what a keep becomes once its
confirmation and that truth are in (pure; docs/design.md §12, "Revised (wave 3)").

The bench's numbers are the word of code that ran in the candidate's process. The truth
from outside it: on a GPU, the profiler's kernel time per class (`Evidence.confirm`); on a
target without a GPU, the OS's accounting of each side's processes weighed against the
seconds the bench claims (`os_time`). A keep that had neither says so: "confirmed by the
bench's timer only", in its record (record["external_truth"]), in `kopt status --json` and
in results.md.

- `ExternalTruth`: the record (kind "profiler" | "os_time" | "none", outcome, reason,
  figures); `of_profiler`, `of_os_time`, `timer_only` build one.
- `settle(verdict, confirmation, truth)`: the keep after its confirmation in fresh
  processes and its external truth:

  * the OS refutes the claim: not a keep (kind "rejected", flag external_truth_refutes);
  * the OS weighed the claim and cannot tell (its clocks' noise, or a claim under the CPU
    clock's ticks, after the confirmation's extra looks): review, with its figures (flag
    external_truth_inconclusive). A keep is earned on a clock outside the candidate's
    process; a loaded machine, whose noise swallows the OS's word, would otherwise keep a
    patched timer on the bench's word alone;
  * the confirmation did not confirm: review, with both numbers (confirmation_disagrees for
    fresh servers, reverify_disagrees for the process-level re-decision);
  * a keep that needs the stronger checks (a speed too good to take on the bench's word,
    `Verdict.needs_stronger_checks`): they are the external truth and an output audit on
    fresh inputs (the served confirmation's looks); both there and agreeing, the keep stands
    (`checks_agree`, saying what confirmed it); one missing, review (flag
    stronger_checks_unavailable) with what ran;
  * otherwise a keep, its reason saying what confirmed it.
- `truth_line(record, status)`: one line for a kept iteration's external truth, for
  results.md and `kopt status --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kopt_supervisor.engine.dataclass_io import known_fields
from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.estimate import Verdict
from kopt_supervisor.engine.decide.os_time import OsTruth
from kopt_supervisor.engine.decide.verdict import checks_agree, send_to_review

TIMER_ONLY = "confirmed by the bench's timer only"
KINDS = ("profiler", "os_time", "none")
OUTCOMES = ("confirmed", "refuted", "inconclusive", "unconfirmed")


@dataclass(frozen=True)
class ExternalTruth:
    """record["external_truth"]: what, outside the candidate's process, confirmed a keep."""

    kind: str
    """"profiler" (the GPU's kernel time per class), "os_time" (the OS's CPU and wall
    accounting of a target without a GPU), or "none" (the bench's timer only)."""
    outcome: str
    """"confirmed" | "refuted" (not a keep) | "inconclusive" (kind "os_time": weighed, its
    clocks cannot tell; review) | "unconfirmed" (kind "none")."""
    reason: str
    """One line with the figures; for kind "none" it starts with TIMER_ONLY."""
    figures: dict[str, Any] = field(default_factory=dict)
    """The profiler's agreement, or the OS accounting (`os_time.OsTruth.to_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExternalTruth:
        return cls(**known_fields(cls, d))


def of_profiler(summary: str, agreement: dict[str, Any]) -> ExternalTruth:
    """The profiler agreed with the keep, class by class (`Evidence.confirm` sends any
    disagreement or failure to review before the keep gets here)."""
    return ExternalTruth(
        "profiler", "confirmed", f"the profiler's kernel time per class agrees: {summary}", {"agreement": agreement}
    )


def of_os_time(truth: OsTruth) -> ExternalTruth:
    """The OS's accounting: shown confirms, refuted refutes, a claim its clocks cannot tell
    is inconclusive; with nothing to weigh (no `[target].calls`), the bench's timer alone."""
    figures = truth.to_dict()
    if truth.outcome == "shown":
        return ExternalTruth("os_time", "confirmed", truth.reason, figures)
    if truth.outcome == "refuted":
        return ExternalTruth("os_time", "refuted", truth.reason, figures)
    if truth.outcome == "inconclusive":
        return ExternalTruth("os_time", "inconclusive", truth.reason, figures)
    return ExternalTruth("none", "unconfirmed", f"{TIMER_ONLY}: {truth.reason}", figures)


def timer_only(why: str) -> ExternalTruth:
    return ExternalTruth("none", "unconfirmed", f"{TIMER_ONLY}: {why}")


def settle(verdict: Verdict, confirmation: Confirmation, truth: ExternalTruth) -> Verdict:
    """The keep `verdict` after its confirmation and its external truth (the module's rule)."""
    if verdict.kind != "keep":
        return verdict
    served = confirmation.path == "served"
    where = "fresh servers" if served else "fresh processes"
    if truth.outcome == "refuted":
        return replace(
            verdict,
            kind="rejected",
            reason=f"{truth.reason} (bench: {verdict.reason})",
            flags=(*verdict.flags, "external_truth_refutes"),
        )
    if confirmation.outcome != "confirmed":
        if served:
            return replace(
                verdict,
                kind="borderline",
                flags=(*verdict.flags, "confirmation_disagrees"),
                reason=f"the keep's confirmation in fresh servers is {confirmation.outcome}: "
                f"{confirmation.reason} (first: {verdict.reason})",
            )
        return replace(
            verdict,
            kind="borderline",
            flags=(*verdict.flags, "reverify_disagrees"),
            reason=f"the decision taken again in fresh processes disagrees: first {verdict.reason}; "
            f"fresh processes {confirmation.reason}",
        )
    seen = f"{where} {confirmation.reason}" if served else f"fresh processes ({confirmation.reason})"
    if verdict.needs_stronger_checks:
        missing = [truth.reason] if truth.kind == "none" or truth.outcome == "inconclusive" else []
        if not served:
            missing.append("no output audit on fresh inputs: the bench has no served mode ([target].serve)")
        if missing:
            why = verdict.escalation or "a speed too good to take on the bench's word"
            return send_to_review(
                verdict,
                "stronger_checks_unavailable",
                f"{why}: the stronger checks could not run ({'; '.join(missing)}); {seen}",
            )
        return checks_agree(verdict, f"{truth.reason}; audited outputs on fresh inputs in {seen}")
    if truth.outcome == "inconclusive":
        return send_to_review(
            verdict,
            "external_truth_inconclusive",
            f"{truth.reason}: no clock outside the candidate's process confirms the claim "
            f"(a look of more timed calls, or a quieter machine, lets the OS tell); {seen}",
        )
    told = "" if truth.kind == "profiler" else f"; {truth.reason}"  # Evidence.confirm already quotes the profiler
    return replace(verdict, reason=f"{verdict.reason}; confirmed in {seen}{told}")


def truth_line(record: dict[str, Any], status: str) -> str:
    """A kept iteration's external truth in one line: its record's, or for a keep that has
    none (accepted in review, or kept by an older kopt) or one the OS could not tell (accepted
    in review), the bench's timer only."""
    got = record.get("external_truth")
    if isinstance(got, dict) and got.get("reason"):
        if got.get("outcome") == "inconclusive":  # kept only by the engineer's word
            return f"{TIMER_ONLY} (accepted in review; {got['reason']})"
        return str(got["reason"])
    if status == "baseline":
        return "the baseline (nothing to confirm)"
    how = "accepted in review" if status == "accepted" else "no external truth recorded"
    return f"{TIMER_ONLY} ({how})"

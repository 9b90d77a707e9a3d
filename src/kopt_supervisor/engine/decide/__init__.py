"""The decision: paired samples → per-class verdicts → run verdict (docs/design.md §5). Pure.

See docs/decision.md for the method and its measured error rates.
"""

from kopt_supervisor.engine.decide.estimate import ClassResult, Pair, Policy, Verdict
from kopt_supervisor.engine.decide.plausible import BenchRun, Implausible
from kopt_supervisor.engine.decide.verdict import (
    GUARD_CLASS,
    ReviewOutcome,
    checks_agree,
    escalate,
    evaluate,
    guard_of,
    note,
    review_outcome,
    send_to_review,
    summary,
    voting_classes,
)

__all__ = [
    "GUARD_CLASS",
    "BenchRun",
    "ClassResult",
    "Implausible",
    "Pair",
    "Policy",
    "ReviewOutcome",
    "Verdict",
    "checks_agree",
    "escalate",
    "evaluate",
    "guard_of",
    "note",
    "review_outcome",
    "send_to_review",
    "summary",
    "voting_classes",
]

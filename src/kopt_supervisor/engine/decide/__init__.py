"""The decision: paired samples → per-class verdicts → run verdict (docs/design.md §5). Pure.

The façade holds the interface docs/decision.md documents; everything else is imported from
its module: the data and the per-class estimate (`estimate`), the run verdict (`verdict`), the
plausibility checks (`plausible`), a keep's confirmation (`confirmation`), the external truth
(`external_truth`), the output audit (`audit`), the statistics (`stats`), the simulation
(`simulate`).
"""

from kopt_supervisor.engine.decide.estimate import Pair, Policy, Verdict
from kopt_supervisor.engine.decide.verdict import (
    evaluate,
    guard_of,
    note,
    review_outcome,
    send_to_review,
    summary,
    voting_classes,
)

__all__ = [
    "Pair",
    "Policy",
    "Verdict",
    "evaluate",
    "guard_of",
    "note",
    "review_outcome",
    "send_to_review",
    "summary",
    "voting_classes",
]

"""The decision: paired samples → per-class verdicts → run verdict (DESIGN.md §5). Pure."""

from engine.decide.model import ClassResult, Pair, Policy, Verdict
from engine.decide.verdict import evaluate

__all__ = ["ClassResult", "Pair", "Policy", "Verdict", "evaluate"]

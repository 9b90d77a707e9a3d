"""The decision's data: paired samples in, per-class results and a run verdict out.

Everything here is plain data. A `Pair` is one paired observation of one config: the
best tree's and the candidate's metric taken in the same round (process-level ABBA) or the
same block (an `ab_command` run). Ratios are always oriented so that below 1 means the
candidate is better, whatever the metric's direction.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.config import DecideConfig

CLASS_VERDICTS = ("improved", "regressed", "tied", "undecided")
RUN_VERDICTS = ("keep", "regression", "tie", "split", "borderline", "undecided")


@dataclass(frozen=True)
class Pair:
    """One paired observation of one config (metric values in the bench's unit)."""

    config: str
    cls: str
    best: float
    cand: float
    round: int
    """The look this pair belongs to: a process-level round, or one ab_command run."""
    order: str = "AB"
    """"AB" (best ran first) or "BA"; blocks of an ab_command run alternate too."""
    block: int = 0
    """Index of the block within an ab_command run (0 for process-level rounds)."""
    flagged: bool = False
    """The gate saw throttling or a foreign process during this round."""


@dataclass(frozen=True)
class Policy:
    confidence: float = 0.99
    min_effect_pct: float = 1.0
    min_rounds: int = 3
    max_rounds: int = 12
    budget_gpu_s: float = 1800.0
    max_other_regression_pct: float = 1.0
    suspicious_speedup: float = 3.0
    two_in_a_row: bool = False
    direction: str = "min"

    @classmethod
    def from_config(cls, cfg: DecideConfig, direction: str = "min") -> Policy:
        return cls(
            confidence=cfg.confidence,
            min_effect_pct=cfg.min_effect_pct,
            min_rounds=cfg.min_rounds,
            max_rounds=cfg.max_rounds,
            budget_gpu_s=cfg.budget_gpu_s,
            max_other_regression_pct=cfg.max_other_regression_pct,
            suspicious_speedup=cfg.suspicious_speedup,
            two_in_a_row=cfg.two_in_a_row,
            direction=direction,
        )

    def cost_ratio(self, best: float, cand: float) -> float:
        """cand/best for latency, best/cand for throughput: below 1 is always a gain."""
        return cand / best if self.direction == "min" else best / cand


@dataclass(frozen=True)
class ClassResult:
    cls: str
    rounds: int
    """Looks that contributed to this class."""
    n: int
    """Paired samples behind the interval."""
    best: float
    """Geometric mean of the best tree's metric over the class's configs and samples."""
    cand: float
    ratio: float
    """Estimated cost ratio candidate/best (below 1: the candidate is better)."""
    lo: float
    hi: float
    """The ratio's interval at the policy's confidence, valid under repeated looks."""
    verdict: str
    """improved | regressed | tied | undecided"""

    @property
    def delta_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["delta_pct"] = self.delta_pct
        d["interval"] = [self.lo, self.hi]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClassResult:
        return cls(**{k: d[k] for k in ("cls", "rounds", "n", "best", "cand", "ratio", "lo", "hi", "verdict")})


@dataclass(frozen=True)
class Verdict:
    kind: str
    """keep | regression | tie | split | borderline | undecided (sample another round)"""
    reason: str
    classes: tuple[ClassResult, ...] = ()
    rounds: int = 0
    gpu_seconds: float = 0.0
    flags: tuple[str, ...] = field(default=())
    """Why a verdict is borderline or suspicious, machine-readable
    (e.g. "undecided_at_max_rounds", "suspicious_speedup", "faster_than_floor")."""

    @property
    def final(self) -> bool:
        return self.kind != "undecided"

    def by_class(self) -> dict[str, ClassResult]:
        return {c.cls: c for c in self.classes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.kind,
            "reason": self.reason,
            "rounds": self.rounds,
            "gpu_seconds": self.gpu_seconds,
            "flags": list(self.flags),
            "classes": {c.cls: c.to_dict() for c in self.classes},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(
            kind=d["verdict"],
            reason=d["reason"],
            classes=tuple(ClassResult.from_dict(c) for c in d.get("classes", {}).values()),
            rounds=d.get("rounds", 0),
            gpu_seconds=d.get("gpu_seconds", 0.0),
            flags=tuple(d.get("flags", ())),
        )


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan

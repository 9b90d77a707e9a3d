"""What one side's served process spent on one look, as the OS accounts for it, beside what
its bench claims (the served looks of engine/loop/served_trees.py `ServedTrees` fill it; the
decision weighs a claimed saving against it where no profiler is the final word). Pure data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kopt_supervisor.engine.dataclass_io import known_fields


@dataclass(frozen=True)
class SideCost:
    side: str
    """"best" or "cand"."""
    round: int
    """The look (the decision's round) it belongs to."""
    cpu_s: float
    """User + system CPU seconds of the side's whole process tree (psutil over /proc: the
    live processes and the children they reaped), read just before the look's request and
    again after the reply to that look's audit: work a process defers past its `done` until
    the audit (a lazy result computed only when it is read) counts."""
    wall_s: float
    """Seconds from the look's request to its reply."""
    claimed_s: float | None
    """What the bench says its timed calls took in this look: the sum over configs of the
    metric x calls, in seconds ([roofline].unit_scale); None without [target].calls."""
    started: bool = False
    """The side's process was started for this look: its CPU time holds what a start costs
    (imports, compilation at the first call), not only the look's work."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SideCost:
        return cls(**known_fields(cls, d))

"""Attribution of one profile: every (range, kernel) group of launches goes to the config its
kopt range names (engine/profile/ranges.py), whatever the kernel's name; what no config can
claim (outside any kopt range, in a range naming no single config) is kept apart with the
reason. Per config per kernel the launches' count, total and spread are pooled, which
engine/profile/classes.py turns into each config's time and its variance. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopt_supervisor.engine.profile.model import KOPT_PREFIX, ProfileSummary
from kopt_supervisor.engine.profile.ranges import RangeMatcher


@dataclass
class LaunchTotals:
    """Launches of one kernel pooled: their count, total time and spread."""

    n: int = 0
    total: float = 0.0
    m2: float = 0.0
    """Sum of squared deviations, merged over groups of one kernel (Chan et al.)."""

    def add(self, n: int, total: float, m2: float) -> None:
        if self.n == 0:
            self.n, self.total, self.m2 = n, total, m2
            return
        mean_a, mean_b = self.total / self.n, total / n
        delta = mean_b - mean_a
        self.m2 += m2 + delta * delta * self.n * n / (self.n + n)
        self.n += n
        self.total += total


@dataclass
class AttributedProfile:
    """One profile, attributed: per config per kernel, and what no config can claim."""

    configs: dict[str, dict[str, LaunchTotals]] = field(default_factory=dict)
    openings: dict[str, int] | None = None
    outside: list[tuple[str, int, float, float, str]] = field(default_factory=list)
    """(kernel, calls, total, m2, why)"""
    cv2: float | None = None
    """Pooled relative variance of one launch, from every group launched twice or more."""

    def variance(self, agg: LaunchTotals) -> float:
        if agg.n >= 2:
            return agg.n * agg.m2 / (agg.n - 1)
        mean = agg.total / agg.n if agg.n else 0.0
        return (self.cv2 or 0.0) * mean * mean


def attribute(summary: ProfileSummary, matcher: RangeMatcher) -> AttributedProfile:
    """One profile's launch groups, attributed to configs (and what none can claim)."""
    run = AttributedProfile()
    opened = dict(summary.range_openings) if summary.range_openings is not None else None
    run.openings = {} if opened is not None else None
    counted: set[str] = set()
    rel, dof = 0.0, 0
    for g in summary.ranged:
        if g.calls >= 2 and g.total_ns > 0:
            mean = g.total_ns / g.calls
            rel += g.m2_ns2 / (mean * mean)
            dof += g.calls - 1
        why = g.note
        ref = None
        if not why:
            if not g.range:
                why = "outside any kopt range"
            elif not g.range.startswith(KOPT_PREFIX):
                why = f"innermost range {g.range!r} is not a kopt range"
            else:
                ref, why = matcher.match(g.range)
        if ref is None:
            run.outside.append((g.kernel, g.calls, g.total_ns, g.m2_ns2, why))
            continue
        run.configs.setdefault(ref.key, {}).setdefault(g.kernel, LaunchTotals()).add(g.calls, g.total_ns, g.m2_ns2)
        if opened is not None and run.openings is not None and g.range not in counted:
            counted.add(g.range)
            run.openings[ref.key] = run.openings.get(ref.key, 0) + opened.get(g.range, 0)
    run.cv2 = rel / dof if dof else None
    return run

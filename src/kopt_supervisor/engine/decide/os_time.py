"""The OS's word on a claimed saving (pure): where no profiler is the final word (a target
without a GPU), what the OS accounts for each side's process in each look (CPU seconds of its
whole process tree, wall seconds) is weighed against the seconds its bench claims the timed
calls took (docs/design.md §12, "Revised (wave 3)").

Per look, the claim is best's claimed seconds minus the candidate's (`SideCost.claimed_s`:
the metric x `[target].calls` of every config), and each of the OS's clocks (CPU, wall)
saved best's seconds minus the candidate's. A candidate faster in truth spends less of the
OS's time by about what it claims; a timer patch, a result computed outside the timed calls
(inputs prepared in the contract check, work deferred past the reply until the audit), or a
forged CSV claim seconds that no clock shows.

Looks in which a side's process was started (`SideCost.started`: its CPU time holds the
imports and first-call compilation of a start) are left out while at least MIN_LOOKS others
remain; otherwise every look counts, starts included (a server that leaves after every look
to hide its steady looks pays for its starts: they only lower its savings).

`weigh(looks)` -> `OsTruth` with outcome:

- "shown": on at least one clock a saving is proven (its one-sided CONFIDENCE lower bound,
  from the spread of the per-look savings, above 0) and its mean reaches SHOWN_SHARE of the
  mean claim. Either clock may show it: a kernel that spreads over threads saves wall time
  while its CPU time grows. A candidate cannot make a clock show what it did not save: CPU
  burnt or time slept only lowers its savings.
- "refuted": no clock shows it, and on one of them the claim is not there: the saving's
  upper bound stays below SHOWN_SHARE of the mean claim, or (from EVERY_LOOK_MIN looks on)
  every look on its own shows less than SHOWN_SHARE of its claim. The second reading is what
  a candidate that widens the spread (CPU burnt or time slept in some looks) cannot escape:
  both only lower its savings. An honest candidate falls short of half its claim in every
  look only when the clock's noise exceeds that half every time: the CPU clock, which the
  machine's load hardly moves, needs 4 such looks (and a shortfall beyond its tick), the
  wall clock, which a loaded machine moves by more than a small claim, 7 (0.5^7 < 1%).
  One clock suffices: a noisy wall clock on a loaded machine must not let a patched timer
  through that the CPU clock refutes.
- "inconclusive": the clocks' noise is too large for the claim either way (a small claim on
  a loaded machine): the OS cannot tell.
- "not_applicable": fewer than MIN_LOOKS looks with every figure, or no claimed saving to
  weigh (no `[target].calls`, or the claims show no saving).

What the OS cannot tell: a claim smaller than its clocks' noise (shown as inconclusive), and
work done in a process outside the side's process tree (the sandbox's PID namespace keeps
every process a bench starts inside it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kopt_supervisor.engine.dataclass_io import known_fields
from kopt_supervisor.engine.decide.side_cost import SideCost
from kopt_supervisor.engine.decide.stats import mean, stdev, t_quantile

CONFIDENCE = 0.99
"""One-sided confidence of the savings' bounds."""
SHOWN_SHARE = 0.5
"""The share of the claimed saving a clock must show."""
MIN_LOOKS = 3
EVERY_LOOK_MIN = {"cpu": 4, "wall": 7}
"""Looks before "every look short of the share" refutes on its own, per clock."""
RESOLUTION_S = {"cpu": 0.01, "wall": 0.0}
"""What a clock cannot resolve: Linux accounts a process's CPU time in clock ticks of 1/100 s
(/proc/<pid>/stat, what psutil reads), so a look's CPU seconds are a difference of two
readings each up to a tick short. The allowance on a clock's mean saving is never below its
resolution, a look counts as short of its claim only by more than it, and a clock whose
resolution reaches SHOWN_SHARE of the claim takes no part ("blind"): a claim under a couple
of ticks per look is weighed by the wall clock alone."""
OUTCOMES = ("shown", "refuted", "inconclusive", "not_applicable")


@dataclass(frozen=True)
class LookCost:
    """One look's two sides, as the OS and the bench account for them."""

    best: SideCost
    cand: SideCost

    @property
    def claim_s(self) -> float:
        return _f(self.best.claimed_s) - _f(self.cand.claimed_s)

    @property
    def started(self) -> bool:
        """A side's process was started for this look."""
        return self.best.started or self.cand.started


@dataclass(frozen=True)
class ClockCheck:
    """One of the OS's clocks against the claim (seconds per look)."""

    clock: str
    """"cpu" or "wall"."""
    saved_s: float
    """Mean saving per look (best's seconds minus the candidate's)."""
    lower_s: float
    upper_s: float
    """One-sided CONFIDENCE bounds of the mean saving."""
    short_looks: int
    """Looks in which this clock showed less than SHOWN_SHARE of the look's claim."""
    outcome: str
    """"shown" | "refuted" | "inconclusive" | "blind" (its resolution is at least the share of
    the claim it would have to show: it takes no part)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClockCheck:
        return cls(**known_fields(cls, d))


@dataclass(frozen=True)
class OsTruth:
    """The OS's accounting weighed against the bench's claim (one of OUTCOMES)."""

    outcome: str
    reason: str
    looks: int = 0
    """Looks weighed."""
    claimed_s: float = 0.0
    """Mean claimed saving per look."""
    clocks: tuple[ClockCheck, ...] = ()
    starts_left_out: int = 0
    """Looks left out because a side's process started in them."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "looks": self.looks,
            "claimed_s": round(self.claimed_s, 6),
            "clocks": [c.to_dict() for c in self.clocks],
            "starts_left_out": self.starts_left_out,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OsTruth:
        values = known_fields(cls, d)
        values["clocks"] = tuple(ClockCheck.from_dict(c) for c in d.get("clocks") or ())
        return cls(**values)


def looks_of(costs: Iterable[SideCost]) -> list[LookCost]:
    """The looks with both sides, by round (a side measured twice in a round: its last)."""
    by_round: dict[int, dict[str, SideCost]] = defaultdict(dict)
    for c in costs:
        by_round[c.round][c.side] = c
    return [
        LookCost(sides["best"], sides["cand"])
        for _, sides in sorted(by_round.items())
        if "best" in sides and "cand" in sides
    ]


def weigh(looks: Sequence[LookCost]) -> OsTruth:
    """The OS's word on the looks' claimed saving (see the module's rule)."""
    usable = [lk for lk in looks if all(_ok(x) for x in (lk.best.claimed_s, lk.cand.claimed_s))]
    steady = [lk for lk in usable if not lk.started]
    left_out = len(usable) - len(steady) if len(steady) >= MIN_LOOKS else 0
    usable = steady if left_out else usable
    if len(usable) < MIN_LOOKS:
        why = (
            "the bench reports no timed seconds ([target].calls)"
            if not usable
            else f"{len(usable)} look(s) with the bench's timed seconds, fewer than {MIN_LOOKS}"
        )
        return OsTruth("not_applicable", why, len(usable))
    claim = mean([lk.claim_s for lk in usable])
    if not claim > 0:
        return OsTruth(
            "not_applicable", f"the bench claims no saved seconds ({claim:+.3g} s per look)", len(usable), claim
        )
    clocks = tuple(c for c in (_clock("cpu", usable, claim), _clock("wall", usable, claim)) if c is not None)
    if not clocks:
        return OsTruth("not_applicable", "no look has the OS's CPU or wall seconds of both sides", len(usable), claim)
    outcomes = {c.outcome for c in clocks}
    outcome = "shown" if "shown" in outcomes else "refuted" if "refuted" in outcomes else "inconclusive"
    clocks = tuple(c for c in clocks if c.outcome != "blind") or clocks
    return OsTruth(outcome, _reason(outcome, clocks, claim, len(usable)), len(usable), claim, clocks, left_out)


def _clock(name: str, looks: list[LookCost], claim: float) -> ClockCheck | None:
    values = [(getattr(lk.best, f"{name}_s"), getattr(lk.cand, f"{name}_s"), lk.claim_s) for lk in looks]
    values = [(b, c, cl) for b, c, cl in values if _ok(b) and _ok(c)]
    n = len(values)
    if n < MIN_LOOKS:
        return None
    saved = [b - c for b, c, _ in values]
    m = mean(saved)
    tick = RESOLUTION_S[name]
    half = max(t_quantile(CONFIDENCE, n - 1) * stdev(saved) / math.sqrt(n), tick)
    short = sum(1 for s, (_, _, cl) in zip(saved, values, strict=True) if s + tick < SHOWN_SHARE * cl)
    if tick >= SHOWN_SHARE * claim:
        outcome = "blind"  # it cannot resolve the share of the claim it is asked about
    elif m + half < SHOWN_SHARE * claim or (n >= EVERY_LOOK_MIN[name] and short == n):
        outcome = "refuted"
    elif m - half > 0 and m >= SHOWN_SHARE * claim:
        outcome = "shown"
    else:
        outcome = "inconclusive"
    return ClockCheck(name, m, m - half, m + half, short, outcome)


def _reason(outcome: str, clocks: tuple[ClockCheck, ...], claim: float, n: int) -> str:
    def figures(c: ClockCheck) -> str:
        return (
            f"{c.saved_s:.3g} s of {'CPU' if c.clock == 'cpu' else 'wall'} time saved per look "
            f"({c.lower_s:.3g}..{c.upper_s:.3g} s at {CONFIDENCE:.0%})"
        )

    said = f"the bench claims {_s(claim)} per look over {n} looks"
    if outcome == "shown":
        c = next(c for c in clocks if c.outcome == "shown")
        return f"the OS's accounting shows {figures(c)} of the {_s(claim)} the bench claims"
    if outcome == "refuted":
        every = [c.clock.replace("cpu", "CPU") for c in clocks if c.outcome == "refuted" and c.short_looks == n]
        tail = f"; {' and '.join(every)} time: less than half the claim in each of the {n} looks" if every else ""
        return (
            f"the OS's accounting shows {' and '.join(figures(c) for c in clocks)} of the {_s(claim)} "
            f"the bench claims{tail}: the claim is not a measurement of faster code"
        )
    return f"{said}; the OS's accounting cannot tell: {'; '.join(figures(c) for c in clocks)}"


def _s(x: float) -> str:
    return f"{x:.3g} s"


def _ok(x: float | None) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _f(x: float | None) -> float:
    return math.nan if x is None else float(x)

"""Lanes that do not step on each other (docs/lanes.md): what a tune point touches (its
`Footprint`: the params entry's classes and the params it changes) and the rule that no two
points in flight at once overlap — the same parameter stepped for classes that meet (the "*"
entry meets every class). Two such points measure the same knob on the same rows against the
same BEST: whichever is kept second was decided against a BEST that no longer is, and its
measurement is thrown away. Pure: history records in, footprints out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine.propose.tune.points import Move
from kopt_supervisor.engine.propose.tune.tried import tune_records

IN_FLIGHT = ("running", "borderline")
"""Statuses of an iteration another lane is still deciding (a borderline one awaits review)."""


@dataclass(frozen=True)
class Footprint:
    cls: str | None
    """The params entry the point changes: a class key, None for "*" (every class)."""
    params: frozenset[str]

    def meets(self, other: Footprint) -> bool:
        """The two entries reach a class in common ("*" reaches every class)."""
        return self.cls is None or other.cls is None or self.cls == other.cls

    def overlaps(self, other: Footprint) -> bool:
        """The same parameter stepped for classes that meet."""
        return self.meets(other) and bool(self.params & other.params)


def footprint(cls: str | None, move: Move) -> Footprint:
    return Footprint(cls, frozenset(move.changed))


def in_flight(history: Sequence[dict[str, Any]]) -> list[Footprint]:
    """The footprints of the tune points other lanes are deciding now (records still running
    or awaiting review; the proposing lane's own iteration is not in its history)."""
    out = []
    for r in tune_records(list(history)):
        if r.get("status") in IN_FLIGHT:
            d = r["proposal"]
            out.append(Footprint(d.get("class"), frozenset(d.get("changed") or {})))
    return out


def clashes(fp: Footprint, busy: Iterable[Footprint]) -> bool:
    return any(fp.overlaps(b) for b in busy)


def overlapping_pairs(points: Sequence[Footprint]) -> list[tuple[int, int]]:
    """The pairs of `points` (by index) that overlap: none, for points in flight at once."""
    return [(i, j) for i in range(len(points)) for j in range(i + 1, len(points)) if points[i].overlaps(points[j])]

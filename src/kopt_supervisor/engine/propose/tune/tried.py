"""What the history says to the tune search: the points tried from the current best commit
and from older ones, the lines already measured through the current point, the momentum of
the keep that made it the best; and the first move not tried yet. Pure: records in, a `Tried`
and a move out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.propose.tune.params import ALL
from kopt_supervisor.engine.propose.tune.points import Alike, Move, Point, moves, point_key, same

NOT_TRIED = ("interrupted",)
"""Statuses whose point was never evaluated: proposed again on resume."""
KEPT = ("keep", "accepted")
WORSE = ("regression", "likely_regression", "fail_bench", "fail_correctness")


@dataclass
class Tried:
    """What a class's earlier proposals say about points, seen from the current best commit."""

    here: set[str] = field(default_factory=set)
    """Points proposed from the current BEST_COMMIT: never again."""
    elsewhere: set[str] = field(default_factory=set)
    """Points proposed from another BEST_COMMIT, and earlier best points: last resort."""
    worse: set[str] = field(default_factory=set)
    """Points from the current BEST_COMMIT measured slower, or failing: pairs with them go later."""
    momentum: tuple[str, int] | None = None
    """(param, direction) of the keep that made the current point the best."""
    kept_at: int = -1
    """The place in the history of the keep that made the current point the best (-1: none);
    the class of the latest keep goes first."""
    settled: set[tuple[str, int]] = field(default_factory=set)
    """(param, direction) lines already measured from the current value of the param: a step
    that way was no better (from any point of this entry), or the current value was kept
    coming from that side. Such steps go after the others (`neighbourhood`)."""
    no_better: set[tuple[str, int]] = field(default_factory=set)
    """The settled lines whose adjacent value was measured no better (not the way a keep
    came): a leap past that value may still pay (`neighbourhood`)."""

    def is_settled(self, move: Move) -> bool:
        return move.kind == "step" and all(pd in self.settled for pd in move.directions.items())


def tune_records(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History records carrying a tune point (any proposer that stores `point` and `class`)."""
    return [r for r in history if isinstance((r.get("proposal") or {}).get("point"), dict)]


def tried_for(
    history: list[dict[str, Any]], cls: str | None, base: str, current: Point, alike: Alike | None = None
) -> Tried:
    """current: the entry's point as the search sees it (alike values as their first)."""
    alike = alike or Alike()
    out = Tried()
    for i, r in enumerate(tune_records(history)):
        d = r["proposal"]
        if r.get("status") in NOT_TRIED:
            continue
        _settle(out, r, cls, current, alike)
        if d.get("class") != cls:
            continue
        key = point_key(alike.point(d["point"]))
        if (d.get("base") or r.get("best_commit_before")) == base:
            out.here.add(key)
            if r.get("status") in WORSE:
                out.worse.add(key)
        else:
            out.elsewhere.add(key)
        if isinstance(d.get("from"), dict):
            out.elsewhere.add(point_key(alike.point(d["from"])))
        if r.get("status") in KEPT and key == point_key(current):
            dirs = d.get("directions") or {}
            out.momentum = next(iter(dirs.items())) if len(dirs) == 1 else None
            out.kept_at = i
    out.elsewhere -= out.here
    return out


def _settle(out: Tried, r: dict[str, Any], cls: str | None, current: Point, alike: Alike) -> None:
    """What one record says about the lines through the current point of `cls`'s entry: a
    one-parameter step p: v → w taken from the current value v that was no better settles
    that direction; a keep of p: u → v settles the way back to u. A step of the global entry
    counts for a class by that class's own verdict in the record (shared_first)."""
    d = r["proposal"]
    changed = d.get("changed") or {}
    dirs = d.get("directions") or {}
    if len(changed) != 1 or len(dirs) != 1:
        return
    (p, (old, new)), (_, direction) = next(iter(changed.items())), next(iter(dirs.items()))
    old, new = alike.value(p, old), alike.value(p, new)
    if p not in current or same(old, new):  # a change between alike values says nothing
        return
    own = d.get("class") == cls
    shared = d.get("class") is None and cls is not None
    if not (own or shared):
        return
    kept = r.get("status") in KEPT
    if shared:
        verdict = ((r.get("classes") or {}).get(cls) or {}).get("verdict")
        kept = kept or verdict == "improved"
        if verdict is None and not kept:
            return
    if not kept and same(old, current[p]):
        out.settled.add((p, direction))
        out.no_better.add((p, direction))
    elif kept and same(new, current[p]):
        out.settled.add((p, -direction))


def next_move(
    base: Point,
    space: dict[str, list[Any]],
    tried: Tried,
    seed: str,
    *,
    fresh: bool,
    order: Sequence[str] = (),
    only: frozenset[str] | None = None,
    avoid: Callable[[Move], bool] | None = None,
) -> Move | None:
    """The first move to a point not tried from this best commit; with fresh, also never
    tried from another one. only: the params a move may change (None: any); avoid: moves
    to pass over (another lane's point in flight overlaps them)."""
    for m in moves(
        base,
        space,
        seed,
        tried.momentum,
        frozenset(tried.worse),
        order,
        frozenset(tried.settled),
        frozenset(tried.no_better),
    ):
        key = point_key(m.point)
        if key in tried.here or (fresh and key in tried.elsewhere):
            continue
        if only is not None and not set(m.changed) <= only:
            continue
        if avoid is not None and avoid(m):
            continue
        return m
    return None


def shared_params(params: dict[str, dict[str, Any]], space: dict[str, list[Any]]) -> frozenset[str]:
    """The params every class runs with the "*" value (no class entry overrides them)."""
    return frozenset(p for p in space if not any(p in entry for key, entry in params.items() if key != ALL))

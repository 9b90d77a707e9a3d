"""Choosing the tune proposer's next proposal: which params entry (the global one, or the
class whose turn it is) and which move from its point, the split rule's follow-ups first
and, with shared_first, a step every class shares. Pure: params, config and history in, a
`Choice` (or None: exhausted) out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kopt_supervisor.engine.config.sections import TuneConfig
from kopt_supervisor.engine.propose.tune.params import ALL, point_of
from kopt_supervisor.engine.propose.tune.points import (
    Move,
    Point,
    alike_for,
    listed_directions,
    point_key,
    same,
)
from kopt_supervisor.engine.propose.tune.spread import Footprint, clashes, footprint, in_flight
from kopt_supervisor.engine.propose.tune.tried import (
    Tried,
    next_move,
    shared_params,
    tried_for,
    tune_records,
)

TIERS = ("split", "step", "leap", "pair", "explore")


@dataclass(frozen=True)
class Choice:
    cls: str | None
    base_point: Point
    move: Move
    retry: bool = False
    why: str = ""
    """For a split follow-up: what the global change did to each class."""


def _deltas(classes: dict[str, Any], names: list[str]) -> str:
    def one(c: str) -> str:
        d = (classes.get(c) or {}).get("delta_pct")
        return f"{c} {d:+.1f}%" if isinstance(d, (int, float)) else c

    return ", ".join(one(c) for c in names)


def split_followups(
    params: dict[str, dict[str, Any]],
    cfg: TuneConfig,
    classes: list[str],
    history: list[dict[str, Any]],
    base: str,
    name: str,
) -> Iterator[Choice]:
    """The split rule for a global search: a global change from this best that made some
    classes faster and others slower (a split, or a rejected partial gain) is proposed
    again for each class it made faster, in that class's own entry."""
    for r in tune_records(history):
        d = r["proposal"]
        if d.get("class") is not None or (d.get("base") or r.get("best_commit_before")) != base:
            continue
        if r.get("status") not in ("split", "rejected"):
            continue
        results = r.get("classes") or {}
        won = [c for c in classes if (results.get(c) or {}).get("verdict") == "improved"]
        lost = [c for c in classes if (results.get(c) or {}).get("verdict") == "regressed"]
        for cls in won:
            point = point_of(params, cls, cfg.space, name)
            new = {**point, **{p: v[1] for p, v in (d.get("changed") or {}).items() if p in point}}
            alike = alike_for(cfg, cls, classes)
            changed = {
                p: (point[p], new[p]) for p in point if not same(alike.value(p, point[p]), alike.value(p, new[p]))
            }
            new = {**point, **{p: v for p, (_, v) in changed.items()}}
            move = Move(new, changed, "split", listed_directions(changed, cfg.space))
            if changed:
                why = (
                    f"v{r.get('version')}'s change for every class made {_deltas(results, [cls])}"
                    + (f" but {_deltas(results, lost)}" if lost else "")
                    + f"; {cls} takes its own value (the split rule)"
                )
                yield Choice(cls, point, move, why=why)


def choose(
    params: dict[str, dict[str, Any]],
    cfg: TuneConfig,
    classes: list[str],
    history: list[dict[str, Any]],
    base: str,
    name: str,
    *,
    busy: Sequence[Footprint] | None = None,
) -> Choice | None:
    """The next proposal, or None when the space is exhausted from this best commit, or when
    every point left overlaps a point in flight (`busy`: the footprints of the points other
    lanes are deciding, by default those the history holds; spread.Footprint.overlaps).
    Global: a split's follow-ups first (split_followups). shared_first: the follow-ups, then
    a shared step while one is left on a new line (_shared_step), then per class. per_class:
    the class of the latest keep first, then the class with the fewest points tried from this best (round robin), a
    class with a neighbour left before one that must explore. Fresh points before retries."""
    busy = in_flight(history) if busy is None else busy
    if not cfg.per_class or cfg.shared_first:
        for choice in split_followups(params, cfg, classes, history, base, name):
            alike = alike_for(cfg, choice.cls, classes)
            seen = tried_for(history, choice.cls, base, alike.point(choice.base_point), alike).here
            if point_key(alike.point(choice.move.point)) not in seen and not clashes(
                footprint(choice.cls, choice.move), busy
            ):
                return choice
    if cfg.per_class and cfg.shared_first:
        shared = _shared_step(params, cfg, classes, history, base, busy)
        if shared is not None:
            return shared
    targets: list[str | None] = list(classes) if cfg.per_class else [None]
    state = [_entry(params, cfg, cls, classes, history, base, name) for cls in targets]
    state.sort(
        key=lambda e: (
            -e.tried.kept_at if e.tried.kept_at >= 0 and not e.tried.here else 1,
            len(e.tried.here),
            targets.index(e.cls),
        )
    )
    for fresh in (True, False):
        options = []
        for e in state:
            move = next_move(
                e.point,
                e.space,
                e.tried,
                f"{cfg.seed}:{base}:{e.cls or ALL}",
                fresh=fresh,
                order=cfg.order,
                avoid=_avoid(e.cls, busy),
            )
            if move is not None:
                options.append(
                    (
                        TIERS.index(move.kind),
                        e.tried.is_settled(move),
                        Choice(e.cls, e.actual, e.as_written(move), retry=not fresh),
                    )
                )
        if options:  # a class with a neighbour left goes before one that must explore, a new line first
            return min(options, key=lambda o: o[:2])[2]
    return None


@dataclass(frozen=True)
class _Entry:
    """One params entry as the search sees it: its point and space with alike values as
    their first listed one, and what the history says from there."""

    cls: str | None
    actual: Point
    """The values the params file holds for this entry."""
    point: Point
    space: dict[str, list[Any]]
    tried: Tried

    def as_written(self, move: Move) -> Move:
        """The move from the values the file holds (its old values and untouched params)."""
        new = {**self.actual, **{p: v for p, (_, v) in move.changed.items()}}
        return replace(move, point=new, changed={p: (self.actual[p], v) for p, (_, v) in move.changed.items()})


def _entry(
    params: dict[str, dict[str, Any]],
    cfg: TuneConfig,
    cls: str | None,
    classes: Sequence[str],
    history: list[dict[str, Any]],
    base: str,
    name: str,
) -> _Entry:
    actual = point_of(params, cls, cfg.space, name)
    alike = alike_for(cfg, cls, classes)
    point = alike.point(actual)
    return _Entry(cls, actual, point, alike.space(cfg.space), tried_for(history, cls, base, point, alike))


def _avoid(cls: str | None, busy: Sequence[Footprint]) -> Callable[[Move], bool] | None:
    """The moves of `cls`'s entry a point in flight overlaps (None: nothing is in flight)."""
    return (lambda m: clashes(footprint(cls, m), busy)) if busy else None


def _shared_step(
    params: dict[str, dict[str, Any]],
    cfg: TuneConfig,
    classes: Sequence[str],
    history: list[dict[str, Any]],
    base: str,
    busy: Sequence[Footprint] = (),
) -> Choice | None:
    """shared_first: a fresh one-parameter step of the global entry on a param no class
    overrides, along a line not yet measured; None once every such line is settled."""
    only = shared_params(params, cfg.space)
    if not only:
        return None
    e = _entry(params, cfg, None, classes, history, base, cfg.params)
    move = next_move(
        e.point,
        e.space,
        e.tried,
        f"{cfg.seed}:{base}:{ALL}",
        fresh=True,
        order=cfg.order,
        only=only,
        avoid=_avoid(None, busy),
    )
    if move is None or move.kind != "step" or e.tried.is_settled(move):
        return None
    return Choice(None, e.actual, e.as_written(move))


def handed_back(
    params: dict[str, dict[str, Any]],
    cfg: TuneConfig,
    classes: list[str],
    history: list[dict[str, Any]],
    base: str,
    name: str,
    previous: dict[str, Any],
) -> Choice | None:
    """The point a lane proposed before, proposed again on the BEST another lane's keep made
    meanwhile (its change no longer applied there: engine/loop/machine.py hands it back): the
    same params set to the same values in the same entry, from that entry's point on the new
    BEST. None when it is not a tune point, when the new BEST already runs those values, when
    it was tried from this BEST, or when a point in flight overlaps it."""
    changed = previous.get("changed")
    if not isinstance(changed, dict) or not changed or not isinstance(previous.get("point"), dict):
        return None
    cls = previous.get("class")
    if cls is not None and cls not in classes:
        return None
    point = point_of(params, cls, cfg.space, name)
    alike = alike_for(cfg, cls, classes)
    wanted = {p: v[1] for p, v in changed.items() if p in point and isinstance(v, (list, tuple)) and len(v) == 2}
    diff = {p: (point[p], v) for p, v in wanted.items() if not same(alike.value(p, point[p]), alike.value(p, v))}
    if not diff:
        return None
    new = {**point, **{p: v for p, (_, v) in diff.items()}}
    if point_key(alike.point(new)) in tried_for(history, cls, base, alike.point(point), alike).here:
        return None
    move = Move(new, diff, "step" if len(diff) == 1 else "pair", listed_directions(diff, cfg.space))
    if clashes(footprint(cls, move), in_flight(history)):
        return None
    return Choice(cls, point, move)

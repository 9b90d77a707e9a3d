"""Choosing the tune proposer's next proposal (engine.propose.tune states the search order).
Pure: params, config and history in, a `Choice` (or None: exhausted) out.

- What the history says (`Tried`): the points tried from the current best commit and from
  older ones, the lines already measured through the current point, the momentum of the keep
  that made it the best; and the first move not tried yet.
- Lanes that do not step on each other (docs/lanes.md): what a point touches (its
  `Footprint`: the params entry's classes and the params it changes) and the rule that no two
  points in flight at once overlap — the same parameter stepped for classes that meet (the "*"
  entry meets every class). Two such points measure the same knob on the same rows against
  the same BEST: whichever is kept second was decided against a BEST that no longer is, and
  its measurement is thrown away.
- The choice: which params entry (the global one, or the class whose turn it is) and which
  move from its point, the split rule's follow-ups first and, with shared_first, a step every
  class shares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kopt_supervisor.engine.config.sections import TuneConfig
from kopt_supervisor.engine.propose.tune_space import (
    ALL,
    Alike,
    Move,
    Point,
    alike_for,
    listed_directions,
    moves,
    point_key,
    point_of,
    same,
)

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

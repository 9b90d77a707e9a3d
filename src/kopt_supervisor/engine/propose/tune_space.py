"""The tune search's space, the params file it edits, and what the history says of it (the
`tune` proposer, which chooses from these: engine.propose.tune). Pure.

- What the history says (`Tried`): the points tried from the current best commit and from
  older ones, the lines already measured through the current point, the momentum of the keep
  that made it the best; and the first move not tried yet.
- Lanes that do not step on each other (docs/lanes.md): what a point touches (its
  `Footprint`: the params entry's classes and the params it changes) and the rule that no two
  points in flight at once overlap — the same parameter stepped for classes that meet (the "*"
  entry meets every class). Two such points measure the same knob on the same rows against
  the same BEST: whichever is kept second was decided against a BEST that no longer is, and
  its measurement is thrown away.
- The space and the params file:

The space: points (param -> value) compared by their JSON form, values that launch the same
kernel (`Alike`), and the moves from a point in search order: one-parameter steps and leaps,
two-parameter pairs, then exploration of the rest.

The params file, `{"*": {param: value}, "<class key>": {param: value}}`: read and checked,
written back with minimal diffs, a class's point read from it and a move written into it.

Pure: points and text in, moves and text out.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import TuneConfig

Point = dict[str, Any]
EXPLORE_LIMIT = 20000
"""Spaces larger than this are explored through this many seeded samples."""


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def same(a: Any, b: Any) -> bool:
    return canon(a) == canon(b)


def point_key(point: Point) -> str:
    return canon(point)


def dedupe(values: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for v in values:
        if canon(v) not in seen:
            seen.add(canon(v))
            out.append(v)
    return out


@dataclass(frozen=True)
class Alike:
    """Values of a param that launch the same kernel for one params entry
    (`[propose.tune].alike`): the search sees each group as its first listed value, so it
    never proposes a change between two of them (for a class whose rows are all at most 64
    long, BLOCK_D 64, 128 and 0 are one tile) and counts a point tried under any of them."""

    groups: dict[str, list[Any]] = field(default_factory=dict)
    """param -> the alike values, in the space's listed order."""

    @classmethod
    def of(cls, groups: dict[str, list[Any]], space: dict[str, list[Any]]) -> Alike:
        out = {}
        for p, values in groups.items():
            keys = {canon(v) for v in values}
            listed = [v for v in dedupe(space.get(p, [])) if canon(v) in keys]
            if len(listed) > 1:
                out[p] = listed
        return cls(out)

    def value(self, param: str, v: Any) -> Any:
        group = self.groups.get(param)
        return group[0] if group and any(same(v, w) for w in group) else v

    def point(self, point: Point) -> Point:
        return {p: self.value(p, v) for p, v in point.items()}

    def space(self, space: dict[str, list[Any]]) -> dict[str, list[Any]]:
        return {p: dedupe(self.value(p, v) for v in values) for p, values in space.items()}


def alike_for(cfg: TuneConfig, cls: str | None, classes: Sequence[str]) -> Alike:
    """The alike values of cls's entry; for the "*" entry, the values alike for every class."""
    if cls is not None:
        return Alike.of(cfg.alike.get(cls, {}), cfg.space)
    per_class = [cfg.alike.get(c, {}) for c in classes]
    if not per_class:
        return Alike()
    common = {
        p: [v for v in values if all(any(same(v, w) for w in other.get(p, [])) for other in per_class[1:])]
        for p, values in per_class[0].items()
    }
    return Alike.of(common, cfg.space)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def param_rank(name: str) -> int:
    """The prior: the order an engineer reaches for the knobs."""
    n = name.lower()
    if n == "num_warps":
        return 0
    if "row" in n or n in ("block_m", "block_size_m"):
        return 1
    if n.startswith("block"):
        return 2
    if n == "num_stages":
        return 3
    return 4


def ordered_params(space: dict[str, list[Any]], order: Sequence[str] = ()) -> list[str]:
    """The params in the order to try them: [propose.tune].order first (the engineer's own
    prior), then the rest by the built-in prior (param_rank)."""
    names = list(space)
    first = [p for p in order if p in space]
    rest = sorted((p for p in names if p not in first), key=lambda p: (param_rank(p), names.index(p)))
    return first + rest


def steps(value: Any, values: list[Any]) -> list[tuple[Any, int]]:
    """The adjacent values of `value` in its listed order: (value, +1 up | -1 down), up first.
    A number not in the list sits before the first listed number above it (after the largest
    when none is above: in [64, 128, 0], 32 steps up to 64 and 1000 sits between 128 and 0);
    any other value not in the list steps to every listed value."""
    keys = [canon(v) for v in values]
    if canon(value) in keys:
        i = keys.index(canon(value))
        return [(values[j], d) for j, d in ((i + 1, 1), (i - 1, -1)) if 0 <= j < len(values)]
    numbers = [i for i, v in enumerate(values) if is_number(v)]
    if not is_number(value) or not numbers:
        return [(v, 1) for v in values]
    above = [i for i in numbers if values[i] > value]
    pos = above[0] if above else max(numbers, key=lambda i: values[i]) + 1
    return [(values[j], d) for j, d in ((pos, 1), (pos - 1, -1)) if 0 <= j < len(values)]


def leaps(value: Any, values: list[Any]) -> list[tuple[Any, Any, int]]:
    """The values two places away from a listed `value` in its listed order: (value, the one
    in between, +1 | -1), up first; none for a value off the list."""
    keys = [canon(v) for v in values]
    if canon(value) not in keys:
        return []
    i = keys.index(canon(value))
    return [(values[i + 2 * d], values[i + d], d) for d in (1, -1) if 0 <= i + 2 * d < len(values)]


def listed_directions(changed: dict[str, tuple[Any, Any]], space: dict[str, list[Any]]) -> dict[str, int]:
    """param -> +1 or -1 by the listed order, for the changes whose both values are listed."""
    out = {}
    for p, (old, new) in changed.items():
        keys = [canon(v) for v in space.get(p, [])]
        if canon(old) in keys and canon(new) in keys:
            out[p] = 1 if keys.index(canon(new)) > keys.index(canon(old)) else -1
    return out


@dataclass(frozen=True)
class Move:
    point: Point
    changed: dict[str, tuple[Any, Any]]
    """param -> (old, new)"""
    kind: str
    """"step" (one parameter, adjacent value), "leap" (one parameter, two values along a line
    whose adjacent value was no better), "pair" (two) or "explore" (anywhere in the space)."""
    directions: dict[str, int] = field(default_factory=dict)
    """param -> +1 (later in its listed order) or -1; absent when the value was off the list."""
    past: Any = None
    """A leap's value in between (the adjacent one that was no better)."""


def _move(base: Point, new: Point, kind: str, directions: dict[str, int] | None = None) -> Move:
    changed = {p: (base[p], new[p]) for p in base if not same(base[p], new[p])}
    return Move(new, changed, kind, directions or {})


def neighbourhood(
    base: Point,
    space: dict[str, list[Any]],
    momentum: tuple[str, int] | None = None,
    worse: frozenset[str] = frozenset(),
    order: Sequence[str] = (),
    settled: frozenset[tuple[str, int]] = frozenset(),
    no_better: frozenset[tuple[str, int]] = frozenset(),
) -> Iterator[Move]:
    """Tiers 1 and 2: one-parameter then two-parameter adjacent moves, in prior order. The
    momentum move (the param and direction that made this point the best) comes first; a
    step along a line already measured (`settled`) goes after every other step and leap; a
    leap goes past an adjacent value measured no better from here (`no_better`; not back
    the way a keep came); a pair goes later for each of its one-parameter halves known to be
    worse (`worse`)."""
    names = ordered_params(space, order)
    per_param = {p: steps(base[p], dedupe(space[p])) for p in names}
    if momentum:
        p, d = momentum
        for new, dd in per_param.get(p, []):
            if dd == d:
                yield _move(base, {**base, p: new}, "step", {p: d})
    for p in names:
        for new, d in per_param[p]:
            if (p, d) not in settled:
                yield _move(base, {**base, p: new}, "step", {p: d})
    for p in names:
        for new, past, d in leaps(base[p], dedupe(space[p])):
            if (p, d) in no_better:
                yield replace(_move(base, {**base, p: new}, "leap", {p: d}), past=past)
    for p in names:
        for new, d in per_param[p]:
            if (p, d) in settled:
                yield _move(base, {**base, p: new}, "step", {p: d})
    pairs = []
    for a, b in itertools.combinations(names, 2):
        combos = [(x, y) for x in per_param[a] for y in per_param[b]]
        combos.sort(key=lambda c: (c[0][1] != c[1][1], -c[0][1]))  # same direction first, up first
        for (na, da), (nb, db) in combos:
            halves = (point_key({**base, a: na}), point_key({**base, b: nb}))
            pairs.append((sum(h in worse for h in halves), _move(base, {**base, a: na, b: nb}, "pair", {a: da, b: db})))
    pairs.sort(key=lambda x: x[0])  # stable: prior order within the same count
    for _, m in pairs:
        yield m


def explore(base: Point, space: dict[str, list[Any]], seed: str) -> Iterator[Move]:
    """Tier 3: every other point of the space (or EXPLORE_LIMIT seeded samples of a larger
    one), fewest changed params first, in a seeded order within each distance."""
    names = list(space)
    lists = [dedupe(space[p]) for p in names]
    rng = random.Random(seed)
    if math.prod(len(v) for v in lists) <= EXPLORE_LIMIT:
        points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]
        rng.shuffle(points)
    else:
        points = [{p: rng.choice(v) for p, v in zip(names, lists, strict=True)} for _ in range(EXPLORE_LIMIT)]
    points.sort(key=lambda pt: sum(not same(pt[p], base[p]) for p in names))
    for pt in points:
        yield _move(base, pt, "explore")


def moves(
    base: Point,
    space: dict[str, list[Any]],
    seed: str,
    momentum: tuple[str, int] | None = None,
    worse: frozenset[str] = frozenset(),
    order: Sequence[str] = (),
    settled: frozenset[tuple[str, int]] = frozenset(),
    no_better: frozenset[tuple[str, int]] = frozenset(),
) -> Iterator[Move]:
    """Every candidate move from base in search order, each point once, never base itself."""
    seen = {point_key(base)}
    for m in itertools.chain(
        neighbourhood(base, space, momentum, worse, order, settled, no_better), explore(base, space, seed)
    ):
        key = point_key(m.point)
        if key not in seen:
            seen.add(key)
            yield m


ALL = "*"
"""The params file's entry that holds every class's values."""


def load_params(text: str, name: str) -> dict[str, dict[str, Any]]:
    """Parse and check a params file's text; BadInput names the file and the key at fault."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{name}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get(ALL), dict):
        raise BadInput(
            f'{name}: must be a JSON object with a "*" entry holding every class\'s params '
            '(e.g. {"*": {"num_warps": 4}})'
        )
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise BadInput(f"{name}: entry {key!r} must be an object of param values, not {type(entry).__name__}")
        for param, value in entry.items():
            if isinstance(value, (dict, list)) or value is None:
                raise BadInput(f"{name}: {key!r}.{param} must be a number, string or bool, not {json.dumps(value)}")
    return data


def dump_params(params: dict[str, dict[str, Any]]) -> str:
    """The params file's text: sorted keys, indent 2, a trailing newline (minimal diffs)."""
    return json.dumps(params, indent=2, sort_keys=True) + "\n"


def point_of(params: dict[str, dict[str, Any]], cls: str | None, space: dict[str, list[Any]], name: str) -> Point:
    """The values of the space's params that `cls` (None: "*") runs with."""
    values = {**params[ALL], **(params.get(cls, {}) if cls else {})}
    missing = [p for p in space if p not in values]
    if missing:
        where = f'"*" or {cls!r}' if cls else '"*"'
        raise BadInput(f"{name}: {where} has no value for {', '.join(missing)} (named in [propose.tune].space)")
    return {p: values[p] for p in space}


def apply_point(
    params: dict[str, dict[str, Any]], cls: str | None, changed: dict[str, tuple[Any, Any]]
) -> dict[str, dict[str, Any]]:
    """A copy of the params with the changes made to "*" (cls None) or to cls's entry; an
    override equal to the "*" value is dropped (the kernel runs the same either way)."""
    out = {k: dict(v) for k, v in params.items()}
    if cls is None:
        for p, (_, new) in changed.items():
            out[ALL][p] = new
        return out
    entry = out.setdefault(cls, {})
    for p, (_, new) in changed.items():
        if p in out[ALL] and same(out[ALL][p], new):
            entry.pop(p, None)
        else:
            entry[p] = new
    if not entry:
        del out[cls]
    return out


# What the history says

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

"""The `tune` proposer: a kernel engineer's parameter search over a params file (issue 4).

The target keeps its launch parameters in a JSON params file (`[propose.tune].params`):
`{"*": {param: value, ...}, "<class key>": {param: value, ...}}`; "*" holds every class's
values and an entry keyed by a kopt class key (`engine.metrics.key_of`) overrides some of
them for that class. Each proposal changes one point of `[propose.tune].space` and writes a
plan whose hypothesis names the change and why an engineer would try it.

Search order around the current best point (per class when `per_class = true`):

1. one parameter to an adjacent value of its listed order (both directions; the declared
   `order`, else warps and rows per program first; the direction of the change that made
   the current best first). A line already measured from the current value (a step that
   way was no better, from any point of this entry, or the current value was kept coming
   from that side) goes after every new line: a coordinate search that does not re-walk
   what it has seen until nothing else is left;
   then a leap: one parameter two values along a line whose adjacent value was no better
   (a line need not be monotone: on the H100, adaLN's 3072- and 5120-wide rows ran slower
   in 2048-wide chunks than in 1024-wide ones, whose masked tail is shorter, yet fastest in
   one whole-row block two values further on);
2. two parameters, each to an adjacent value;
3. any other point of the space, nearest first, in a seeded order (up to EXPLORE_LIMIT).

With `shared_first = true` (per_class), a step of the "*" entry on a param no class
overrides goes first while one is left on a new line: one keep serves every class. The
split rule then hands a step that helped only some classes to those classes' entries, and
the classes go on alone. tests/engine/test_tune_search.py measures the climb on a model.

In a global search (`per_class = false`, or shared_first), a global change that made some
classes faster and others slower is first proposed again for each class it made faster, in
that class's own entry (the split rule: a specialised configuration behind the kernel's
per-class dispatch).

`alike` (per class key, values of a param that launch the same kernel for that class): the
search sees each such group as its first listed value, so it never proposes a change between
them and counts a point tried under any of them (class `Alike`).

A point already tried from the same BEST_COMMIT for the same class (kept, discarded or
failed; masked iterations do not count) is never proposed again. Points tried from an
older BEST_COMMIT, and earlier best points, are retried only when nothing fresh is left.
When nothing is left at all the proposal says so with `details["exhausted"] = True`.

The search itself (everything above `TuneProposer`) is pure: points in, moves out.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config import TuneConfig
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.propose.base import Proposal, ProposalContext, format_plan
from kopt_supervisor.engine.workspace import write_atomic

Point = dict[str, Any]

ALL = "*"
"""The params file's entry that holds every class's values."""
EXPLORE_LIMIT = 20000
"""Spaces larger than this are explored through this many seeded samples."""
NOT_TRIED = ("interrupted",)
"""Statuses whose point was never evaluated: proposed again on resume."""
KEPT = ("keep", "accepted")
WORSE = ("regression", "likely_regression", "fail_bench", "fail_correctness")
TIERS = ("split", "step", "leap", "pair", "explore")


# ----------------------------------------------------------------------------------------
# The params file


def load_params(text: str, name: str) -> dict[str, dict[str, Any]]:
    """Parse and check a params file's text; BadInput names the file and the key at fault."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{name}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get(ALL), dict):
        raise BadInput(f'{name}: must be a JSON object with a "*" entry holding every class\'s params '
                       '(e.g. {"*": {"num_warps": 4}})')
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


def apply_point(params: dict[str, dict[str, Any]], cls: str | None, changed: dict[str, tuple[Any, Any]]
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


# ----------------------------------------------------------------------------------------
# Points and moves


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
    common = {p: [v for v in values if all(any(same(v, w) for w in other.get(p, [])) for other in per_class[1:])]
              for p, values in per_class[0].items()}
    return Alike.of(common, cfg.space)


def _is_number(v: Any) -> bool:
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
    numbers = [i for i, v in enumerate(values) if _is_number(v)]
    if not _is_number(value) or not numbers:
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


def neighbourhood(base: Point, space: dict[str, list[Any]], momentum: tuple[str, int] | None = None,
                  worse: frozenset[str] = frozenset(), order: Sequence[str] = (),
                  settled: frozenset[tuple[str, int]] = frozenset(),
                  no_better: frozenset[tuple[str, int]] = frozenset()) -> Iterator[Move]:
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


def moves(base: Point, space: dict[str, list[Any]], seed: str, momentum: tuple[str, int] | None = None,
          worse: frozenset[str] = frozenset(), order: Sequence[str] = (),
          settled: frozenset[tuple[str, int]] = frozenset(),
          no_better: frozenset[tuple[str, int]] = frozenset()) -> Iterator[Move]:
    """Every candidate move from base in search order, each point once, never base itself."""
    seen = {point_key(base)}
    for m in itertools.chain(neighbourhood(base, space, momentum, worse, order, settled, no_better),
                             explore(base, space, seed)):
        key = point_key(m.point)
        if key not in seen:
            seen.add(key)
            yield m


# ----------------------------------------------------------------------------------------
# What the history says


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


def tried_for(history: list[dict[str, Any]], cls: str | None, base: str, current: Point,
              alike: Alike | None = None) -> Tried:
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


def next_move(base: Point, space: dict[str, list[Any]], tried: Tried, seed: str, *, fresh: bool,
              order: Sequence[str] = (), only: frozenset[str] | None = None) -> Move | None:
    """The first move to a point not tried from this best commit; with fresh, also never
    tried from another one. only: the params a move may change (None: any)."""
    for m in moves(base, space, seed, tried.momentum, frozenset(tried.worse), order, frozenset(tried.settled),
                   frozenset(tried.no_better)):
        key = point_key(m.point)
        if key in tried.here or (fresh and key in tried.elsewhere):
            continue
        if only is not None and not set(m.changed) <= only:
            continue
        return m
    return None


def shared_params(params: dict[str, dict[str, Any]], space: dict[str, list[Any]]) -> frozenset[str]:
    """The params every class runs with the "*" value (no class entry overrides them)."""
    return frozenset(p for p in space if not any(p in entry for key, entry in params.items() if key != ALL))


# ----------------------------------------------------------------------------------------
# The hypothesis


REASONS: list[tuple[str, dict[int, str]]] = [
    (r"^num_warps$", {1: "to keep more loads in flight",
                      -1: "to cut per-program overhead and register pressure (fewer threads per row)"}),
    (r"^num_stages$", {1: "to overlap more of the next tile's loads with this tile's math",
                       -1: "to free shared memory and registers for more resident programs"}),
    (r"row|^block_m$|^block_size_m$", {1: "to amortise each program's setup (index math, the loads every row "
                                          "shares) over more rows",
                                       -1: "to launch more programs and fill more SMs on small batches"}),
    (r"^block", {1: "to make fewer, wider passes over the data (wider loads, fewer loop trips)",
                 -1: "to lower register pressure (a smaller tile spills less)"}),
    (r"^group", {1: "to reuse more tiles from L2 (larger launch groups)",
                 -1: "to spread programs over more L2 slices (smaller launch groups)"}),
]


def reason(param: str, old: Any, new: Any, direction: int | None) -> str:
    """Why an engineer would try param old -> new."""
    n = param.lower()
    if n.startswith("block") and _is_number(new) and new == 0:
        return "(0 = the whole row in one block: one pass over the row reads x once instead of twice)"
    if n.startswith("block") and _is_number(old) and old == 0:
        return f"to tile the row in {new}-wide chunks (less register pressure on long rows)"
    if direction is None and _is_number(old) and _is_number(new):
        direction = 1 if new > old else -1
    if direction is not None:
        for pattern, text in REASONS:
            if re.search(pattern, n):
                return text[direction]
    if isinstance(new, bool):
        return f"(turn {param} {'on' if new else 'off'})"
    if direction is None:
        return "(another listed choice)"
    return f"(the next {'larger' if direction > 0 else 'smaller'} value in the search space)"


def _show(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def change_text(move: Move) -> str:
    return " and ".join(f"{p} {_show(o)}→{_show(n)}" for p, (o, n) in move.changed.items())


def hypothesis(choice: Choice) -> str:
    move, cls = choice.move, choice.cls
    where = f" on {cls}" if cls else " for every class"
    if move.kind == "explore":
        return (f"{change_text(move)}{where}: explore further from the best point "
                "(its one- and two-parameter neighbours are tried)")
    parts = [f"{p} {_show(o)}→{_show(n)} {reason(p, o, n, move.directions.get(p))}"
             for p, (o, n) in move.changed.items()]
    if move.kind == "split":
        return " and ".join(parts) + f"{where} only: {choice.why}"
    if move.kind == "leap":
        return " and ".join(parts) + where + f" (past {_show(move.past)}, which was no better)"
    return " and ".join(parts) + where


MOVE_TEXT = {"split": "a global change that split the classes, for the class it made faster",
             "step": "one parameter to an adjacent value",
             "leap": "one parameter two values on, past an adjacent value that was no better",
             "pair": "two parameters to adjacent values", "explore": "a point away from the best's neighbourhood"}


def plan_body(choice: Choice, base: str, params_name: str) -> str:
    move = choice.move
    lines = [f"tune: {change_text(move)} in {params_name} entry {choice.cls or ALL!r}",
             f"move: {MOVE_TEXT[move.kind]}"
             + (" (tried before from another best commit; nothing fresh is left)" if choice.retry else ""),
             f"from best {base[:10]}: {canon(choice.base_point)}",
             f"candidate: {canon(move.point)}"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# Choosing the next proposal


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


def split_followups(params: dict[str, dict[str, Any]], cfg: TuneConfig, classes: list[str],
                    history: list[dict[str, Any]], base: str, name: str) -> Iterator[Choice]:
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
            changed = {p: (point[p], new[p]) for p in point if not same(alike.value(p, point[p]), alike.value(p, new[p]))}
            new = {**point, **{p: v for p, (_, v) in changed.items()}}
            move = Move(new, changed, "split", listed_directions(changed, cfg.space))
            if changed:
                why = (f"v{r.get('version')}'s change for every class made {_deltas(results, [cls])}"
                       + (f" but {_deltas(results, lost)}" if lost else "")
                       + f"; {cls} takes its own value (the split rule)")
                yield Choice(cls, point, move, why=why)


def choose(params: dict[str, dict[str, Any]], cfg: TuneConfig, classes: list[str], history: list[dict[str, Any]],
           base: str, name: str) -> Choice | None:
    """The next proposal, or None when the space is exhausted from this best commit.
    Global: a split's follow-ups first (split_followups). shared_first: the follow-ups, then
    a shared step while one is left on a new line (_shared_step), then per class. per_class:
    the class of the latest keep first, then the class with the fewest points tried from this best (round robin), a
    class with a neighbour left before one that must explore. Fresh points before retries."""
    if not cfg.per_class or cfg.shared_first:
        for choice in split_followups(params, cfg, classes, history, base, name):
            alike = alike_for(cfg, choice.cls, classes)
            seen = tried_for(history, choice.cls, base, alike.point(choice.base_point), alike).here
            if point_key(alike.point(choice.move.point)) not in seen:
                return choice
    if cfg.per_class and cfg.shared_first:
        shared = _shared_step(params, cfg, classes, history, base)
        if shared is not None:
            return shared
    targets: list[str | None] = list(classes) if cfg.per_class else [None]
    state = [_entry(params, cfg, cls, classes, history, base, name) for cls in targets]
    state.sort(key=lambda e: (-e.tried.kept_at if e.tried.kept_at >= 0 and not e.tried.here else 1,
                              len(e.tried.here), targets.index(e.cls)))
    for fresh in (True, False):
        options = []
        for e in state:
            move = next_move(e.point, e.space, e.tried, f"{cfg.seed}:{base}:{e.cls or ALL}", fresh=fresh,
                             order=cfg.order)
            if move is not None:
                options.append((TIERS.index(move.kind), e.tried.is_settled(move),
                                Choice(e.cls, e.actual, e.as_written(move), retry=not fresh)))
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


def _entry(params: dict[str, dict[str, Any]], cfg: TuneConfig, cls: str | None, classes: Sequence[str],
           history: list[dict[str, Any]], base: str, name: str) -> _Entry:
    actual = point_of(params, cls, cfg.space, name)
    alike = alike_for(cfg, cls, classes)
    point = alike.point(actual)
    return _Entry(cls, actual, point, alike.space(cfg.space), tried_for(history, cls, base, point, alike))


def _shared_step(params: dict[str, dict[str, Any]], cfg: TuneConfig, classes: Sequence[str],
                 history: list[dict[str, Any]], base: str) -> Choice | None:
    """shared_first: a fresh one-parameter step of the global entry on a param no class
    overrides, along a line not yet measured; None once every such line is settled."""
    only = shared_params(params, cfg.space)
    if not only:
        return None
    e = _entry(params, cfg, None, classes, history, base, cfg.params)
    move = next_move(e.point, e.space, e.tried, f"{cfg.seed}:{base}:{ALL}", fresh=True, order=cfg.order, only=only)
    if move is None or move.kind != "step" or e.tried.is_settled(move):
        return None
    return Choice(None, e.actual, e.as_written(move))


# ----------------------------------------------------------------------------------------
# The proposer


class TuneProposer:
    kind = "tune"
    instant = True
    """Proposes in the engine in a moment: a serving bench stays up across it."""

    def __init__(self, cfg: TuneConfig) -> None:
        if not cfg.params or not cfg.space:
            raise BadInput("kopt.toml: [propose.tune] needs params (the params file) and space "
                           "for the tune proposer")
        self.cfg = cfg

    def propose(self, ctx: ProposalContext) -> Proposal:
        name = self.cfg.params
        if ctx.repair:
            return Proposal(False, f"the tune proposer does not repair: this point of {name} fails correctness "
                                   "and is not proposed again from this best", {"repair": ctx.repair})
        try:
            path = self._path(ctx.worktree)
            params = load_params(self._read(path), name)
            if self.cfg.per_class and not ctx.classes:
                raise BadInput("[propose.tune].per_class = true but the bench has no config classes yet")
            choice = choose(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name)
        except BadInput as e:
            return Proposal(False, str(e), {"error": str(e), "fatal": True})
        if choice is None:
            where = "every class" if self.cfg.per_class else "the global entry"
            return Proposal(False, f"search space exhausted: every point of [propose.tune].space for {where} "
                                   f"has been tried from best {ctx.best_commit[:10]}",
                            {"exhausted": True, "base": ctx.best_commit})
        move = choice.move
        new = apply_point(params, choice.cls, move.changed)
        write_atomic(path, dump_params(new), mode=path.stat().st_mode & 0o777)
        ctx.plan_path.parent.mkdir(parents=True, exist_ok=True)
        ctx.plan_path.write_text(format_plan(hypothesis(choice), choice.cls, plan_body(choice, ctx.best_commit, name)))
        return Proposal(True, "", {
            "proposer": "tune", "params_file": name, "class": choice.cls, "entry": choice.cls or ALL,
            "base": ctx.best_commit, "from": choice.base_point, "point": move.point,
            "changed": {p: list(v) for p, v in move.changed.items()}, "directions": move.directions,
            "move": move.kind, "retry": choice.retry})

    def _path(self, worktree: Path) -> Path:
        path = (worktree / self.cfg.params).resolve()
        if not path.is_relative_to(worktree.resolve()):
            raise BadInput(f"[propose.tune].params = {self.cfg.params!r} lies outside the repository")
        return path

    def _read(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadInput(f"{self.cfg.params}: not found in the candidate tree ([propose.tune].params)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"{self.cfg.params}: cannot read it: {e}") from None

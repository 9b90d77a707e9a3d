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

With lanes ([parallel].lanes > 1) the points in flight at once never overlap: a move that
steps a parameter another lane's point in flight steps, for classes the two entries have in
common ("*" has every class), is passed over (`Footprint`); when every point left
overlaps one in flight the proposal says `busy` and the loop asks again once a lane ends. A
point whose change no longer applies on a BEST another lane kept meanwhile is handed back
and proposed again there (`handed_back`: the same values in the same entry).

The search is pure, points in, moves out: `tune_space` (the params file, the space, alike
values, moves in search order, what the history says, what overlaps) and, here, the choice
(`choose`: which params entry, the global one or the class whose turn it is, and which move
from its point, the split rule's follow-ups first and, with shared_first, a step every class
shares; a `Choice`, or None: exhausted). This module writes the plan, the hypothesis an engineer would write for a move
(the change and why one would try it) and its body (entry, move, from and to which point),
and holds `TuneProposer`, the one part with side effects: it reads the params file from the
candidate tree, asks the search for the next point, writes the file and the plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import TuneConfig
from kopt_supervisor.engine.propose.proposer import Proposal, ProposalContext, format_plan
from kopt_supervisor.engine.propose.tune_space import (
    ALL,
    Footprint,
    Move,
    Point,
    Tried,
    alike_for,
    apply_point,
    canon,
    clashes,
    dump_params,
    footprint,
    in_flight,
    is_number,
    listed_directions,
    load_params,
    next_move,
    point_key,
    point_of,
    same,
    shared_params,
    tried_for,
    tune_records,
)
from kopt_supervisor.engine.workspace import write_atomic

REASONS: list[tuple[str, dict[int, str]]] = [
    (
        r"^num_warps$",
        {
            1: "to keep more loads in flight",
            -1: "to cut per-program overhead and register pressure (fewer threads per row)",
        },
    ),
    (
        r"^num_stages$",
        {
            1: "to overlap more of the next tile's loads with this tile's math",
            -1: "to free shared memory and registers for more resident programs",
        },
    ),
    (
        r"row|^block_m$|^block_size_m$",
        {
            1: "to amortise each program's setup (index math, the loads every row shares) over more rows",
            -1: "to launch more programs and fill more SMs on small batches",
        },
    ),
    (
        r"^block",
        {
            1: "to make fewer, wider passes over the data (wider loads, fewer loop trips)",
            -1: "to lower register pressure (a smaller tile spills less)",
        },
    ),
    (
        r"^group",
        {
            1: "to reuse more tiles from L2 (larger launch groups)",
            -1: "to spread programs over more L2 slices (smaller launch groups)",
        },
    ),
]


def reason(param: str, old: Any, new: Any, direction: int | None) -> str:
    """Why an engineer would try param old -> new."""
    n = param.lower()
    if n.startswith("block") and is_number(new) and new == 0:
        return "(0 = the whole row in one block: one pass over the row reads x once instead of twice)"
    if n.startswith("block") and is_number(old) and old == 0:
        return f"to tile the row in {new}-wide chunks (less register pressure on long rows)"
    if direction is None and is_number(old) and is_number(new):
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
        return (
            f"{change_text(move)}{where}: explore further from the best point "
            "(its one- and two-parameter neighbours are tried)"
        )
    parts = [
        f"{p} {_show(o)}→{_show(n)} {reason(p, o, n, move.directions.get(p))}" for p, (o, n) in move.changed.items()
    ]
    if move.kind == "split":
        return " and ".join(parts) + f"{where} only: {choice.why}"
    if move.kind == "leap":
        return " and ".join(parts) + where + f" (past {_show(move.past)}, which was no better)"
    return " and ".join(parts) + where


MOVE_TEXT = {
    "split": "a global change that split the classes, for the class it made faster",
    "step": "one parameter to an adjacent value",
    "leap": "one parameter two values on, past an adjacent value that was no better",
    "pair": "two parameters to adjacent values",
    "explore": "a point away from the best's neighbourhood",
}


def plan_body(choice: Choice, base: str, params_name: str) -> str:
    move = choice.move
    lines = [
        f"tune: {change_text(move)} in {params_name} entry {choice.cls or ALL!r}",
        f"move: {MOVE_TEXT[move.kind]}"
        + (" (tried before from another best commit; nothing fresh is left)" if choice.retry else ""),
        f"from best {base[:10]}: {canon(choice.base_point)}",
        f"candidate: {canon(move.point)}",
    ]
    return "\n".join(lines)


class TuneProposer:
    kind = "tune"
    instant = True
    """Proposes in the engine in a moment: a serving bench stays up across it."""

    def __init__(self, cfg: TuneConfig) -> None:
        if not cfg.params or not cfg.space:
            raise BadInput("kopt.toml: [propose.tune] needs params (the params file) and space for the tune proposer")
        self.cfg = cfg

    def propose(self, ctx: ProposalContext) -> Proposal:
        name = self.cfg.params
        if ctx.repair:
            return Proposal(
                False,
                f"the tune proposer does not repair: this point of {name} fails correctness "
                "and is not proposed again from this best",
                {"repair": ctx.repair},
            )
        try:
            path = self._path(ctx.worktree)
            params = load_params(self._read(path), name)
            if self.cfg.per_class and not ctx.classes:
                raise BadInput("[propose.tune].per_class = true but the bench has no config classes yet")
            previous = (ctx.handed_back or {}).get("proposal")
            again = (
                handed_back(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name, previous)
                if isinstance(previous, dict)
                else None
            )
            choice = again or choose(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name)
            busy = (
                choice is None
                and choose(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name, busy=()) is not None
            )
        except BadInput as e:
            return Proposal(False, str(e), {"error": str(e), "fatal": True})
        if busy:  # the loop waits for a lane to end and asks again
            return Proposal(
                False,
                "every point left overlaps a point another lane is deciding (the same parameter for classes in common)",
                {"busy": True, "base": ctx.best_commit},
            )
        if choice is None:
            where = "every class" if self.cfg.per_class else "the global entry"
            return Proposal(
                False,
                f"search space exhausted: every point of [propose.tune].space for {where} "
                f"has been tried from best {ctx.best_commit[:10]}",
                {"exhausted": True, "base": ctx.best_commit},
            )
        move = choice.move
        new = apply_point(params, choice.cls, move.changed)
        write_atomic(path, dump_params(new), mode=path.stat().st_mode & 0o777)
        ctx.plan_path.parent.mkdir(parents=True, exist_ok=True)
        ctx.plan_path.write_text(format_plan(hypothesis(choice), choice.cls, plan_body(choice, ctx.best_commit, name)))
        return Proposal(
            True,
            "",
            {
                "proposer": "tune",
                "params_file": name,
                "class": choice.cls,
                "entry": choice.cls or ALL,
                "base": ctx.best_commit,
                "from": choice.base_point,
                "point": move.point,
                "changed": {p: list(v) for p, v in move.changed.items()},
                "directions": move.directions,
                "move": move.kind,
                "retry": choice.retry,
                **({"handed_back": True} if again is not None else {}),
            },
        )

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


# The choice

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
    meanwhile (its change no longer applied there: engine/loop/__init__.py hands it back): the
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

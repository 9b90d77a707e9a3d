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
common ("*" has every class), is passed over (spread: `Footprint`); when every point left
overlaps one in flight the proposal says `busy` and the loop asks again once a lane ends. A
point whose change no longer applies on a BEST another lane kept meanwhile is handed back
and proposed again there (`handed_back`: the same values in the same entry).

The search itself (every module but `proposer`) is pure: points in, moves out.

Modules: params (the params file), points (the space, alike values, moves in search order),
tried (what the history says), spread (what a point touches, what overlaps), search (the next
choice), plan (hypothesis and plan text), proposer (`TuneProposer`, the one with side effects).
"""

from kopt_supervisor.engine.propose.tune.params import (
    ALL,
    apply_point,
    dump_params,
    load_params,
    point_of,
)
from kopt_supervisor.engine.propose.tune.plan import (
    MOVE_TEXT,
    REASONS,
    change_text,
    hypothesis,
    plan_body,
    reason,
)
from kopt_supervisor.engine.propose.tune.points import (
    EXPLORE_LIMIT,
    Alike,
    Move,
    Point,
    alike_for,
    canon,
    dedupe,
    explore,
    is_number,
    leaps,
    listed_directions,
    moves,
    neighbourhood,
    ordered_params,
    param_rank,
    point_key,
    same,
    steps,
)
from kopt_supervisor.engine.propose.tune.proposer import TuneProposer
from kopt_supervisor.engine.propose.tune.search import (
    TIERS,
    Choice,
    choose,
    handed_back,
    split_followups,
)
from kopt_supervisor.engine.propose.tune.spread import (
    IN_FLIGHT,
    Footprint,
    clashes,
    footprint,
    in_flight,
    overlapping_pairs,
)
from kopt_supervisor.engine.propose.tune.tried import (
    KEPT,
    NOT_TRIED,
    WORSE,
    Tried,
    next_move,
    shared_params,
    tried_for,
    tune_records,
)

__all__ = [
    "ALL",
    "EXPLORE_LIMIT",
    "IN_FLIGHT",
    "KEPT",
    "MOVE_TEXT",
    "NOT_TRIED",
    "REASONS",
    "TIERS",
    "WORSE",
    "Alike",
    "alike_for",
    "apply_point",
    "canon",
    "change_text",
    "Choice",
    "choose",
    "clashes",
    "dedupe",
    "Footprint",
    "footprint",
    "handed_back",
    "in_flight",
    "overlapping_pairs",
    "dump_params",
    "explore",
    "hypothesis",
    "is_number",
    "leaps",
    "listed_directions",
    "load_params",
    "Move",
    "moves",
    "neighbourhood",
    "next_move",
    "ordered_params",
    "param_rank",
    "plan_body",
    "Point",
    "point_key",
    "point_of",
    "reason",
    "same",
    "shared_params",
    "split_followups",
    "steps",
    "Tried",
    "tried_for",
    "tune_records",
    "TuneProposer",
]

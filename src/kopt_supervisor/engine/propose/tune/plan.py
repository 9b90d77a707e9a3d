"""The tune proposer's plan: the hypothesis an engineer would write for a move (the change
and why one would try it) and the plan's body (entry, move, from and to which point).
Pure: a `Choice` in, text out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kopt_supervisor.engine.propose.tune.params import ALL
from kopt_supervisor.engine.propose.tune.points import Move, canon, is_number
from kopt_supervisor.engine.propose.tune.search import Choice

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

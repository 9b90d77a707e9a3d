"""The pack within its size budget: the most history in full that fits
[propose].prompt_max_kib, found by bisection over how much is summarised. Pure.
"""

from __future__ import annotations

from collections.abc import Callable

from kopt_supervisor.engine.propose.context.data import _data
from kopt_supervisor.engine.propose.context.inputs import Pack, PackInputs
from kopt_supervisor.engine.propose.context.markdown import _md

ONE_LINERS = 40
"""When full entries and one line per older entry do not fit, the one-line summaries are
kept for this many entries before the full ones; older ones become counts."""


def _fit(n: int, fits: Callable[[int, int], bool]) -> tuple[int, int]:
    """(collapsed, detail_from) with the most history in full that fits: first one line per
    older entry; then one line for the ONE_LINERS entries before the full ones and counts for
    the rest; then counts only. Each stage bisects (O(log n) renders)."""

    def first(cut: Callable[[int], int]) -> int | None:
        if not fits(cut(n), n):
            return None
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(cut(mid), mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    for cut in (lambda s: 0, lambda s: max(0, s - ONE_LINERS), lambda s: s):
        s = first(cut)
        if s is not None:
            return cut(s), s
    return n, n


def build_pack(inputs: PackInputs) -> Pack:
    """The context pack for one proposal, within the size budget."""
    data = _data(inputs)
    budget = inputs.max_bytes or inputs.config.propose.prompt_max_kib * 1024
    collapsed, detail_from = _fit(len(data["history"]), lambda c, s: len(_md(data, c, s)[0].encode()) <= budget)
    text, summary = _md(data, collapsed, detail_from)
    size = len(text.encode())
    data["history_summary"] = summary
    data["history"] = data["history"][detail_from:]
    data["budget"] = {"max_bytes": budget, "bytes": size, "summarised": detail_from, "over_budget": size > budget}
    return Pack(text, data, detail_from, size > budget)

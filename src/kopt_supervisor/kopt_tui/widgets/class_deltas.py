"""Per-class deltas of one iteration: best, candidate, ratio with its interval, rounds, roofline."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui.model import ClassesView, ClassRow
from kopt_supervisor.kopt_tui.widgets.styles import VERDICT_STYLE, delta_style

COLUMNS = ("class", "best", "cand", "Δ", "interval %", "rnd", "verdict", "roof")
"""In display order."""
PRIORITY = ("class", "Δ", "interval %", "verdict", "cand", "best", "rnd", "roof")
"""What stays when the panel is narrow: the verdict and its numbers first, the raw values
and the look count after, the roofline (often "—") last."""
RIGHT = {"best", "cand", "Δ", "rnd", "roof"}
GAP = 2
CLASS_MAX = 28
"""The class column's widest (a longer class name ends in an ellipsis)."""


def _cells(r: ClassRow) -> dict[str, Text | str]:
    delta = (r.ratio - 1) * 100 if r.ratio is not None else None
    return {
        "class": Text(("▸ " if r.target else "") + r.cls, style="bold" if r.target else ""),
        "best": fmt.num(r.best),
        "cand": fmt.num(r.cand),
        "Δ": Text(fmt.change(delta), style=delta_style(delta)),
        "interval %": fmt.interval(r.lo, r.hi),
        "rnd": str(r.rounds) if r.rounds is not None else fmt.DASH,
        "verdict": Text(r.verdict or fmt.DASH, style=VERDICT_STYLE.get(r.verdict, "")),
        "roof": fmt.share(r.roof_pct),
    }


def fitting_columns(rows: list[dict[str, Text | str]], width: int | None) -> list[str]:
    """The columns that fit `width` cells at their natural width (two cells between columns:
    the table pads each cell by one on either side), taken in PRIORITY order, shown in display
    order; all of them when width is None.
    The class column always stays (Rich shortens it with an ellipsis if even it is too wide)."""
    if width is None:
        return list(COLUMNS)
    natural = {c: max([len(c), *(len(str(row[c])) for row in rows)]) for c in COLUMNS}
    natural["class"] = min(natural["class"], CLASS_MAX)  # the table cuts it there
    chosen, used = [], -GAP
    for c in PRIORITY:
        if c == "class" or used + GAP + natural[c] <= width:
            chosen.append(c)
            used += GAP + natural[c]
    return [c for c in COLUMNS if c in chosen]


def class_table(rows: tuple[ClassRow, ...], *, width: int | None = None) -> Table:
    """The per-class rows as a table; with width, only the columns that fit it whole."""
    cells = [_cells(r) for r in rows]
    shown = fitting_columns(cells, width)
    t = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, expand=False, header_style="bold dim")
    for c in shown:
        t.add_column(
            c,
            justify="right" if c in RIGHT else "left",
            no_wrap=True,
            overflow="ellipsis",
            max_width=CLASS_MAX if c == "class" else None,
        )
    for row in cells:
        t.add_row(*(row[c] for c in shown))
    return t


class ClassTable(Widget):
    """The per-class table alone, fitted to the width it gets (the review dialog's): at 80
    columns the raw values and the look count make way for class, Δ, interval and verdict,
    which stay whole instead of every column being cut to an ellipsis."""

    rows: reactive[tuple[ClassRow, ...]] = reactive((), layout=True)

    def render(self) -> Table | Text:
        if not self.rows:
            return Text(fmt.DASH)
        return class_table(self.rows, width=self.size.width)


class ClassDeltas(Widget):
    view: reactive[ClassesView | None] = reactive(None)

    def render(self) -> Table | Text:
        v = self.view
        if v is None or not v.rows:
            return Text("no per-class numbers for this iteration", style="dim")
        return class_table(v.rows, width=self.size.width)

    def watch_view(self, old: ClassesView | None, view: ClassesView | None) -> None:
        if len(old.rows if old else ()) != len(view.rows if view else ()):
            self.refresh(layout=True)  # only a different number of classes changes the panel's height
        self.border_title = f"Δ per class · {view.title}" if view and view.version is not None else "Δ per class"

"""Per-class deltas of one iteration: best, candidate, ratio with its interval, rounds, roofline."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from kopt_tui import fmt
from kopt_tui.model import ClassesView, ClassRow
from kopt_tui.widgets.styles import VERDICT_STYLE, delta_style


def class_table(rows: tuple[ClassRow, ...], *, compact: bool = False) -> Table:
    t = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, expand=False, header_style="bold dim")
    t.add_column("class", no_wrap=True, overflow="ellipsis", max_width=28)
    t.add_column("best", justify="right", no_wrap=True)
    t.add_column("cand", justify="right", no_wrap=True)
    t.add_column("Δ", justify="right", no_wrap=True)
    t.add_column("interval %", justify="left", no_wrap=True)
    if not compact:
        t.add_column("rnd", justify="right", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    if not compact:
        t.add_column("roof", justify="right", no_wrap=True)
    for r in rows:
        delta = (r.ratio - 1) * 100 if r.ratio is not None else None
        cells: list[Text | str] = [
            Text(("▸ " if r.target else "") + r.cls, style="bold" if r.target else ""),
            fmt.num(r.best), fmt.num(r.cand), Text(fmt.pct(delta), style=delta_style(delta)),
            fmt.interval(r.lo, r.hi)]
        if not compact:
            cells.append(str(r.rounds) if r.rounds is not None else fmt.DASH)
        cells.append(Text(r.verdict or fmt.DASH, style=VERDICT_STYLE.get(r.verdict, "")))
        if not compact:
            cells.append(f"{r.roof_pct:.0f}%" if r.roof_pct is not None else fmt.DASH)
        t.add_row(*cells)
    return t


class ClassDeltas(Widget):
    view: reactive[ClassesView | None] = reactive(None)

    def render(self) -> Table | Text:
        v = self.view
        if v is None or not v.rows:
            return Text("no per-class numbers for this iteration", style="dim")
        return class_table(v.rows, compact=self.size.width < 64)

    def watch_view(self, old: ClassesView | None, view: ClassesView | None) -> None:
        if len(old.rows if old else ()) != len(view.rows if view else ()):
            self.refresh(layout=True)  # only a different number of classes changes the panel's height
        self.border_title = f"Δ per class · {view.title}" if view and view.version is not None else "Δ per class"

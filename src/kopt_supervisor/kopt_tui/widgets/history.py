"""The iteration history: a DataTable updated in place, row by row, so a run with
thousands of iterations stays smooth and the cursor stays where the engineer put it.

Rows are keyed by version. A new look adds the new rows and rewrites only the cells that
changed; the table is rebuilt only when its width crosses a layout threshold. When the
cursor sits on the last row it follows new iterations (like `tail -f`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui.model import HistoryRow
from kopt_supervisor.kopt_tui.widgets.styles import STATUS_STYLE, delta_style


@dataclass(frozen=True)
class Col:
    key: str
    label: str
    width: int


STATUS_LABEL = {
    "fail_correctness": "fail:correct",
    "fail_protected": "fail:protect",
    "fail_propose": "fail:propose",
    "fail_bench": "fail:bench",
    "likely_regression": "likely regr.",
}
"""Statuses longer than the verdict column (12), written to fit it whole."""


def columns_for(width: int, time_width: int = 5) -> tuple[Col, ...]:
    """The columns that fit: the hypothesis takes what the others leave."""
    wide = width >= 90
    fixed = [Col("flag", "", 1), Col("v", "v", 5)]
    if wide:
        fixed.append(Col("time", "time", time_width))
    tail = [Col("cls", "class", 12 if wide else 9), Col("status", "verdict", 12), Col("delta", "Δ", 7)]
    if wide:
        tail.append(Col("commit", "commit", 8))
    used = sum(c.width + 2 for c in fixed + tail) + 2 + 2  # cell padding (hypothesis too), scrollbar
    hyp = Col("hyp", "hypothesis", max(10, width - used))
    return (*fixed, hyp, *tail)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def row_cells(row: HistoryRow, cols: Sequence[Col], best_version: int | None) -> list[Text]:
    dim = "dim" if row.masked else ""
    flag = (
        "m"
        if row.masked
        else "★"
        if row.version == best_version
        else "?"
        if row.status == "borderline"
        else "▶"
        if row.status == "running"
        else ""
    )
    values = {
        "flag": Text(flag, style="bold magenta" if flag == "?" else "bold yellow" if flag == "★" else dim),
        "v": Text(f"v{row.version}", style=f"bold {dim}".strip()),
        "time": Text(row.started, style="dim"),
        "cls": Text(row.cls, style=dim),
        "status": Text(
            STATUS_LABEL.get(row.status, row.status), style="dim" if row.masked else STATUS_STYLE.get(row.status, "")
        ),
        "delta": Text(fmt.pct(row.delta), style="dim" if row.masked else delta_style(row.delta), justify="right"),
        "commit": Text(row.commit, style="cyan" if not row.masked else "dim"),
        "hyp": Text(row.hypothesis, style=dim),
    }
    return [
        Text(_clip(values[c.key].plain, c.width), style=values[c.key].style, justify=values[c.key].justify)
        for c in cols
    ]


class HistoryTable(DataTable):
    """One row per iteration; masked rows dimmed."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, id=id, classes=classes)
        self._rows: dict[int, HistoryRow] = {}
        self._cols: tuple[Col, ...] = ()
        self._best: int | None = None
        self._pending: list[HistoryRow] | None = None

    @property
    def selected_version(self) -> int | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - an empty or changing table has no selection
            return None
        return int(key.value) if key.value is not None else None

    def show(self, rows: Sequence[HistoryRow], best_version: int | None) -> None:
        """Bring the table to `rows` (in version order) with as few changes as possible."""
        cols = columns_for(self.size.width or 80, max((len(r.started) for r in rows), default=5))
        following = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        keep = self.selected_version
        if cols != self._cols:
            self._rebuild(rows, cols, best_version)
            if keep is not None and not following and str(keep) in self.rows:
                self.move_cursor(row=self.get_row_index(str(keep)), animate=False)
        else:
            self._patch(rows, best_version)
        if following and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False, scroll=True)

    def _rebuild(self, rows: Sequence[HistoryRow], cols: tuple[Col, ...], best: int | None) -> None:
        self.clear(columns=True)
        self._cols, self._best = cols, best
        for c in cols:
            self.add_column(c.label, width=c.width, key=c.key)
        self._rows = {r.version: r for r in rows}
        for r in rows:
            self.add_row(*row_cells(r, cols, best), key=str(r.version))

    def _patch(self, rows: Sequence[HistoryRow], best: int | None) -> None:
        old_best, self._best = self._best, best
        flag_changed = {old_best, best} - {None} if old_best != best else set()
        for r in rows:
            old = self._rows.get(r.version)
            if old == r and r.version not in flag_changed:
                continue
            cells = row_cells(r, self._cols, best)
            if old is None:
                self.add_row(*cells, key=str(r.version))
            else:
                prev = row_cells(old, self._cols, old_best)
                for c, new, was in zip(self._cols, cells, prev, strict=True):
                    if (new.plain, new.style) != (was.plain, was.style):
                        self.update_cell(str(r.version), c.key, new)
            self._rows[r.version] = r

    def on_resize(self) -> None:
        time_width = max((len(r.started) for r in self._rows.values()), default=5)
        if self._rows and columns_for(self.size.width, time_width) != self._cols:
            self.show(list(self._rows.values()), self._best)
        elif self.row_count and self.cursor_row >= self.row_count - 1:
            # following the newest row: still in view when the table got shorter (a lanes
            # panel that appeared above it after the rows were shown)
            self.move_cursor(row=self.row_count - 1, animate=False, scroll=True)

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        """A scroll made while the table did not overflow yet leaves the scrollbar that appears
        with the overflow at the top (Textual moves it on scrolls only): put it where the table is."""
        if shown:
            self.vertical_scrollbar.position = self.scroll_y

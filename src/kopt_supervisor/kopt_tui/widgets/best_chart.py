"""A chart of the best latency per class over iterations: one sparkline per class."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Label, Sparkline

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui.model import SeriesView


def series_label(s: SeriesView) -> str:
    change = (s.last / s.first - 1) * 100 if s.first and s.last else None
    return f"{fmt.num(s.first)} → {fmt.num(s.last)} {fmt.pct(change, 1)}"


class BestChart(Widget):
    """Lower bars are faster; the x axis is the iteration number (masked ones skipped)."""

    view: reactive[tuple[SeriesView, ...]] = reactive(())

    def compose(self) -> ComposeResult:
        if not self.view:
            yield Label("no kept measurement yet", classes="dim")
        for s in self.view:
            with Horizontal(classes="series"):
                yield Label(s.cls, classes="series-name")
                yield Sparkline(list(s.values), summary_function=min, classes="series-spark")
                yield Label(series_label(s), classes="series-value")

    def watch_view(self, old: tuple[SeriesView, ...], new: tuple[SeriesView, ...]) -> None:
        if [s.cls for s in old] != [s.cls for s in new] or not self.is_mounted:
            self.refresh(recompose=True)
            return
        for row, s in zip(self.query(".series").results(Horizontal), new, strict=False):
            row.query_one(Sparkline).data = list(s.values)
            row.query_one(".series-value", Label).update(series_label(s))

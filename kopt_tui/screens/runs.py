"""Runs (home): every run under the root with its state, iteration, best speedup, pending
reviews and heartbeat age; enter opens one."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from kopt_tui import fmt, model
from kopt_tui.model import RunData, RunSummary
from kopt_tui.widgets.styles import state_badge

COLUMNS = (("tag", "run"), ("state", "state"), ("iter", "iter"), ("speedup", "speedup"), ("reviews", "reviews"),
           ("heartbeat", "heartbeat"), ("note", "note"))


def summary_cells(s: RunSummary) -> list[Text]:
    symbol, style = state_badge(s.state)
    return [
        Text(s.tag, style="bold"),
        Text(f"{symbol} {s.state.replace('_', ' ')}", style=style),
        Text(f"v{s.iteration}" if s.iteration is not None else fmt.DASH),
        Text(f"{s.speedup:.3f}x" if s.speedup else fmt.DASH, style="green" if (s.speedup or 0) > 1 else ""),
        Text(", ".join(f"v{v}" for v in s.reviews) or fmt.DASH, style="bold magenta" if s.reviews else "dim"),
        Text(s.heartbeat, style="red" if s.state == "crashed" else ""),
        Text(s.note, style="dim"),
    ]


class RunsScreen(Screen):
    BINDINGS = [
        Binding("enter", "open", "open", tooltip="Open the selected run's dashboard"),
    ]

    runs: reactive[tuple[RunData, ...] | None] = reactive(None, init=False)

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title")
        table = DataTable(id="runs", cursor_type="row")
        table.border_title = "runs"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        self.query_one("#runs-title", Static).update(Text.assemble(("kopt", "bold"), f"  runs under {self.app.root}"))
        self.app.watch_run(None, runs=True)
        self.watch(self.app, "now", self._on_tick, init=False)

    def on_screen_resume(self) -> None:
        self.app.watch_run(None, runs=True)

    def watch_runs(self) -> None:
        self._on_tick(self.app.now)

    def _on_tick(self, now: float) -> None:
        if self.runs is None:
            return
        table = self.query_one(DataTable)
        summaries = [model.run_summary(d, now) for d in self.runs]
        if not summaries:
            table.border_title = f"runs · none under {self.app.root}: `kopt init --repo PATH --tag TAG`, then `kopt run TAG`"
        else:
            table.border_title = f"runs · {len(summaries)}"
        present = {s.tag for s in summaries}
        for key in [k for k in table.rows if k.value not in present]:
            table.remove_row(key)
        for s in summaries:
            cells = summary_cells(s)
            if s.tag not in table.rows:
                table.add_row(*cells, key=s.tag)
                continue
            for (col, _), cell in zip(COLUMNS, cells, strict=True):
                if table.get_cell(s.tag, col) != cell or table.get_cell(s.tag, col).style != cell.style:
                    table.update_cell(s.tag, col, cell)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        from kopt_tui.screens.dashboard import DashboardScreen

        table = self.query_one(DataTable)
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key:
            self.app.push_screen(DashboardScreen(key))

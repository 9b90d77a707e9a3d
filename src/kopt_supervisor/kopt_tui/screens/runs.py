"""Runs (home): every run under the root with its state, iteration, best speedup, pending
reviews and heartbeat age; enter opens one."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.widgets import DataTable, Footer, Static

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.model import RunData, RunSummary
from kopt_supervisor.kopt_tui.screens.live import KoptScreen, renders_data
from kopt_supervisor.kopt_tui.widgets.styles import state_badge

COLUMNS = (
    ("tag", "run"),
    ("state", "state"),
    ("iter", "iter"),
    ("speedup", "speedup"),
    ("reviews", "reviews"),
    ("heartbeat", "heartbeat"),
    ("note", "note"),
)
NOTE_WIDTH = 80


def summary_cells(s: RunSummary) -> list[Text]:
    symbol, style = state_badge(s.state)
    return [
        Text(s.tag, style="bold"),
        Text(f"{symbol} {s.state.replace('_', ' ')}", style=style),
        Text(f"v{s.iteration}" if s.iteration is not None else fmt.DASH),
        Text(fmt.speedup(s.speedup) + " ⚠ no sandbox", style="bold red")
        if s.unsandboxed
        else Text(fmt.speedup(s.speedup), style="green" if (s.speedup or 0) > 1 else ""),
        Text(", ".join(f"v{v}" for v in s.reviews) or fmt.DASH, style="bold magenta" if s.reviews else "dim"),
        Text(s.heartbeat, style="red" if s.state == "crashed" else ""),
        Text(s.note, style="dim"),
    ]


class RunsScreen(KoptScreen[None]):
    BINDINGS = [
        Binding("enter", "open", "open", tooltip="Open the selected run's dashboard"),
    ]

    runs: var[tuple[RunData, ...] | None] = var(None, init=False)

    def __init__(self) -> None:
        super().__init__()
        self._widths: tuple[int, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title")
        table: DataTable[Text] = DataTable(id="runs", cursor_type="row")
        table.border_title = "runs"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs-title", Static).update(Text.assemble(("kopt", "bold"), f"  runs under {self.app.root}"))
        self.app.watch_run(None, runs=True)
        self.watch(self.app, "now", self._on_tick, init=False)

    def on_screen_resume(self) -> None:
        self.app.watch_run(None, runs=True)

    def watch_runs(self) -> None:
        self._on_tick(self.app.now)

    @renders_data
    def _on_tick(self, now: float) -> None:
        if self.runs is None:
            return
        table = self.query_one(DataTable)
        summaries = sorted((model.run_summary(d, now) for d in self.runs), key=lambda s: s.tag)
        root = self.app.root
        table.border_title = (
            f"runs · {len(summaries)}"
            if summaries
            else f"runs · none under {root}: `kopt init --repo PATH --tag TAG`, then `kopt run TAG`"
        )
        rows = {s.tag: summary_cells(s) for s in summaries}
        widths = tuple(
            min(NOTE_WIDTH, max([len(label), *(len(c[i].plain) for c in rows.values())]))
            for i, (_, label) in enumerate(COLUMNS)
        )
        if widths != self._widths or list(rows) != [k.value for k in table.rows]:
            self._rebuild(table, rows, widths)
            return
        for tag, cells in rows.items():
            for (col, _), cell in zip(COLUMNS, cells, strict=True):
                old = table.get_cell(tag, col)
                if (old.plain, old.style) != (cell.plain, cell.style):
                    table.update_cell(tag, col, cell)

    def _rebuild(self, table: DataTable[Text], rows: dict[str, list[Text]], widths: tuple[int, ...]) -> None:
        """Columns sized to their contents (a handful of runs: rebuilding is instant)."""
        selected = self._selected_tag()
        table.clear(columns=True)
        self._widths = widths
        for (key, label), width in zip(COLUMNS, widths, strict=True):
            table.add_column(label, key=key, width=width)
        for tag, cells in rows.items():
            table.add_row(*cells, key=tag)
        if selected in rows:
            table.move_cursor(row=list(rows).index(selected), animate=False)

    def _selected_tag(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen

        tag = self._selected_tag()
        if tag:
            self.app.push_screen(DashboardScreen(tag))

"""Every key on every screen, built from the screens' own bindings (so it cannot drift)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from kopt_supervisor.kopt_tui.commands import key_label

GENERAL = (
    ("ctrl+p", "Command palette: every action of the screen on view, by name"),
    ("↑ ↓ PgUp PgDn", "Move in tables, lists and logs"),
    ("ctrl+Home/End", "First / last row"),
)


def key_table() -> Table:
    from kopt_supervisor.kopt_tui.app import KoptApp
    from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen
    from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
    from kopt_supervisor.kopt_tui.screens.detail import DetailScreen
    from kopt_supervisor.kopt_tui.screens.logs import LogScreen
    from kopt_supervisor.kopt_tui.screens.restart import RestartScreen
    from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
    from kopt_supervisor.kopt_tui.screens.runs import RunsScreen
    from kopt_supervisor.kopt_tui.screens.transcript import TranscriptScreen

    sections = (
        ("everywhere", KoptApp),
        ("runs (home)", RunsScreen),
        ("dashboard", DashboardScreen),
        ("iteration detail", DetailScreen),
        ("review", ReviewScreen),
        ("restart", RestartScreen),
        ("logs", LogScreen),
        ("transcript", TranscriptScreen),
        ("confirm", ConfirmScreen),
    )
    t = Table(box=None, padding=(0, 2, 0, 0), show_header=False, expand=True)
    t.add_column("key", style="bold cyan", no_wrap=True, min_width=8)
    t.add_column("what", ratio=1)
    for name, cls in sections:
        t.add_row(Text(name, style="bold underline"), "")
        if cls is KoptApp:
            for key, what in GENERAL:
                t.add_row(key, what)
        for b in cls.BINDINGS:
            if isinstance(b, Binding):
                t.add_row(key_label(b), b.tooltip or b.description)
    return t


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark", "close", "close", tooltip="Close the help")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help"):
            yield Label("kopt keys", classes="dialog-title")
            with VerticalScroll(classes="dialog-scroll"):
                yield Static(key_table())

    def action_close(self) -> None:
        self.dismiss(None)

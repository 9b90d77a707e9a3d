"""A yes/no question for actions that cannot be taken back with one key (stop, start)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from kopt_supervisor.kopt_tui.screens.live import KoptModalScreen


class ConfirmScreen(KoptModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "yes", tooltip="Confirm"),
        Binding("n,escape", "answer(False)", "no", tooltip="Cancel"),
    ]

    def __init__(self, title: str, body: str, *, yes: str = "Yes", no: str = "Cancel") -> None:
        super().__init__()
        self.title_text, self.body, self.yes, self.no = title, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="warning", compact=True)
                yield Button(f"{self.no} (n)", id="no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

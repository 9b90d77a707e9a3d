"""The review of a borderline candidate: why it is borderline, its per-class numbers, and
accept / reject / more rounds (with an optional note kept with the decision)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Button, Input, Label, Static

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.flags import FLAG_HELP, flags_to_explain
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.screens.live import KoptModalScreen, renders_data
from kopt_supervisor.kopt_tui.widgets.class_deltas import class_table


class ReviewScreen(KoptModalScreen[None]):
    BINDINGS = [
        Binding("a", "answer('accept')", "accept", tooltip="Keep the candidate (it is committed as accepted)"),
        Binding("r", "answer('reject')", "reject", tooltip="Discard the candidate"),
        Binding("m", "answer('more_rounds')", "more rounds", tooltip="Measure best and candidate for more rounds"),
        Binding("escape", "later", "later", tooltip="Close; decide later (the review policy applies at the deadline)"),
    ]

    data: var[RunData | None] = var(None, init=False)

    def __init__(self, tag: str, version: int) -> None:
        super().__init__()
        self.tag = tag
        self.version = version

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="review"):
            yield Label(f"Review v{self.version}: borderline", classes="dialog-title")
            with VerticalScroll(classes="dialog-scroll"):
                yield Static(id="review-why", classes="dialog-body")
                yield Static(id="review-classes")
            yield Input(placeholder="note kept with the decision (optional)", id="review-note", compact=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Accept (a)", id="accept", variant="success", compact=True)
                yield Button("Reject (r)", id="reject", variant="error", compact=True)
                yield Button("More rounds (m)", id="more_rounds", compact=True)
                yield Button("Later (esc)", id="later", compact=True)

    def on_mount(self) -> None:
        self.watch(self.app, "now", self._render_view, init=False)
        data = self.app.latest.get(self.tag)
        if data is not None:
            self.data = data
        self.query_one("#accept", Button).focus()

    def watch_data(self) -> None:
        self._render_view(self.app.now)

    @renders_data
    def _render_view(self, now: float) -> None:
        if self.data is None:
            return
        v = model.review_view(self.data, self.version, now)
        if v is None:
            return
        it = self.data.by_version.get(self.version)
        if it is not None and not it.awaiting_review:
            self.query_one("#review-why", Static).update(
                Text(f"v{self.version} is no longer awaiting review: {it.status}", style="bold"))
            return
        lines = [
            Text.assemble(("hypothesis ", "dim"), v.hypothesis),
            Text.assemble(("target     ", "dim"), v.target),
            Text.assemble(("why        ", "dim"), (v.reason, "bold magenta")),
        ]
        for f in flags_to_explain(v.reason, v.flags):
            lines.append(Text.assemble(("           ", ""), (f"{f}: " if f in FLAG_HELP else f, "magenta"),
                                       FLAG_HELP.get(f, "")))
        cost = f"{v.rounds} rounds" if v.rounds is not None else ""
        if v.gpu_seconds is not None:
            cost += f", {fmt.seconds(v.gpu_seconds)} of timed runs"
        if cost:
            lines.append(Text.assemble(("measured   ", "dim"), cost))
        if v.deadline_left:
            lines.append(Text.assemble(("deadline   ", "dim"), f"unanswered, the engine will {v.policy} it in ",
                                       (v.deadline_left, "bold")))
        elif not self.data.alive:
            lines.append(Text("no engine is running: your answer is queued and applies when it starts "
                              "(or apply it now with E on the dashboard)", style="yellow"))
        self.query_one("#review-why", Static).update(Text("\n").join(lines))
        self.query_one("#review-classes", Static).update(class_table(v.rows) if v.rows else Text(fmt.DASH))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "later":
            self.dismiss(None)
        else:
            self.action_answer(str(event.button.id))

    def action_answer(self, kind: str) -> None:
        note = self.query_one("#review-note", Input).value.strip()
        args: dict[str, object] = {"version": self.version}
        if note and kind != "more_rounds":
            args["why"] = note
        self.app.send_command(self.tag, kind, args)
        self.dismiss(None)

    def action_later(self) -> None:
        self.dismiss(None)

"""The review queue: the borderline candidates awaiting the engineer, every lane's, one at a
time, oldest review first. For the one on screen: why it is borderline, its per-class
numbers, the GPU it was measured on, and accept / reject / more rounds (with an optional
note kept with the decision); `n` looks at the next one first.

An answer names the version on screen, and only while that version still waits for one: a
review answered elsewhere meanwhile (`kopt accept`, another TUI, the review policy at its
deadline) leaves the queue, the screen says so and shows the next, and a key pressed for the
one that left answers nothing. A review that just replaced another on screen takes no
answer for `Services.review_arm_s` (a key pressed twice must not answer the next one unseen).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Button, Input, Label, Static

from kopt_supervisor.engine.api import PendingReview, fmt
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.flags import FLAG_HELP, flags_to_explain
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.screens.live import KoptModalScreen, renders_data
from kopt_supervisor.kopt_tui.widgets.class_deltas import ClassTable


class ReviewScreen(KoptModalScreen[None]):
    BINDINGS = [
        Binding("a", "answer('accept')", "accept", tooltip="Keep the candidate (it is committed as accepted)"),
        Binding("r", "answer('reject')", "reject", tooltip="Discard the candidate"),
        Binding("m", "answer('more_rounds')", "more rounds", tooltip="Measure best and candidate for more rounds"),
        Binding("n", "next", "next", tooltip="Look at the next review in the queue first"),
        Binding("escape", "later", "later", tooltip="Close; decide later (the review policy applies at the deadline)"),
    ]

    data: var[RunData | None] = var(None, init=False)
    showing: var[int | None] = var(None, init=False)
    """The version on screen: every answer names it."""

    def __init__(self, tag: str, version: int | None = None) -> None:
        super().__init__()
        self.tag = tag
        self.first = version
        """The review to show first (None: the oldest waiting)."""
        self.shown_at = 0.0
        """When (monotonic) the review on screen replaced another (0: the first one shown)."""
        self.closing = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="review"):
            yield Label("Review", classes="dialog-title", id="review-title")
            with VerticalScroll(classes="dialog-scroll", id="review-details"):
                yield Static(id="review-why", classes="dialog-body")
                yield ClassTable(id="review-classes")
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
        # The details first: PageDown scrolls them at once, Tab goes on to the note, then the
        # buttons (a / r / m / n / esc answer from anywhere but the note).
        self.query_one("#review-details", VerticalScroll).focus()

    # -- the queue ----------------------------------------------------------------------

    def queue(self) -> tuple[PendingReview, ...]:
        """The reviews waiting for an answer, oldest first (app.open_reviews)."""
        return self.app.open_reviews(self.tag)

    def current(self) -> PendingReview | None:
        return next((r for r in self.queue() if r.version == self.showing), None)

    def watch_data(self) -> None:
        self._follow_queue()
        self._render_view(self.app.now)

    def watch_showing(self, old: int | None, new: int | None) -> None:
        if old is not None:  # another review replaced the one the engineer was looking at
            self.shown_at = time.monotonic()
        self.app.review_prompted.update((self.tag, r.version) for r in self.queue())
        self.refresh_bindings()
        self._render_view(self.app.now)

    def _follow_queue(self) -> None:
        """Keep the review on screen while it waits; when it left the queue, say why and
        show the next (none left: close)."""
        if self.data is None or self.closing:
            return
        queue = self.queue()
        versions = [r.version for r in queue]
        if self.showing is not None and self.showing in versions:
            return
        gone = self.showing
        if gone is None and self.first in versions:
            self.showing = self.first
            return
        if gone is not None and (self.tag, gone) not in self.app.answers_sent:
            self.notify(
                self._why_gone(gone),
                title=f"v{gone} left the review queue",
                severity="warning",
                timeout=8,
                markup=False,
            )
        if not queue:
            if gone is None:
                self.notify("no candidate is awaiting review", severity="warning")
            self.close_dialog()
            return
        self.showing = self._after(gone, queue)

    def _after(self, gone: int | None, queue: tuple[PendingReview, ...]) -> int:
        """The review to show once `gone` left: the next that opened after it, else the oldest."""
        order = {r.version: r.place for r in self.data.reviews} if self.data else {}
        place = order.get(gone, 0) if gone is not None else 0
        return next((r.version for r in queue if r.place > place), queue[0].version)

    def _why_gone(self, version: int) -> str:
        d = self.data
        pending = next((r for r in d.reviews if r.version == version), None) if d else None
        it = d.by_version.get(version) if d else None
        if pending is not None and pending.answer is not None:
            a = pending.answer
            return (
                f"v{version}: {a.kind.replace('_', ' ')} sent by {a.source or 'another client'}; "
                "the engine applies it. Nothing was sent from here."
            )
        if pending is not None and pending.more_rounds:
            return f"v{version} is being measured for more rounds; it comes back if it is still borderline."
        if it is not None:
            return f"v{version} is no longer awaiting review: {it.status}" + (" (masked)" if it.masked else "")
        return f"v{version} is no longer awaiting review"

    # -- showing it ---------------------------------------------------------------------

    @renders_data
    def _render_view(self, now: float) -> None:
        if self.data is None or self.showing is None:
            return
        v = model.review_view(self.data, self.showing, now)
        if v is None:
            return
        queue = self.queue()
        place = next((i for i, r in enumerate(queue, 1) if r.version == self.showing), 0)
        lanes = self.data.config.parallel.lanes if self.data.config else 1
        title = (
            "Review "
            + (f"{place} of {len(queue)} — " if len(queue) > 1 else "")
            + (f"lane {v.lane} · " if lanes > 1 and v.lane is not None else "")
            + f"v{v.version}: borderline"
        )
        self.query_one("#review-title", Label).update(title)
        lines = [
            Text.assemble(("hypothesis ", "dim"), v.hypothesis),
            Text.assemble(("target     ", "dim"), v.target),
            Text.assemble(("why        ", "dim"), (v.reason, "bold magenta")),
        ]
        for f in flags_to_explain(v.reason, v.flags):
            lines.append(
                Text.assemble(("           ", ""), (f"{f}: " if f in FLAG_HELP else f, "magenta"), FLAG_HELP.get(f, ""))
            )
        cost = f"{v.rounds} rounds" if v.rounds is not None else ""
        if v.gpu_seconds is not None:
            cost += f", {fmt.seconds(v.gpu_seconds)} of timed runs"
        if v.gpu and lanes > 1:
            cost += f" on {v.gpu}"
        if cost:
            lines.append(Text.assemble(("measured   ", "dim"), cost))
        if v.deadline_left:
            lines.append(
                Text.assemble(
                    ("deadline   ", "dim"), f"unanswered, the engine will {v.policy} it in ", (v.deadline_left, "bold")
                )
            )
        elif not self.data.alive:
            lines.append(
                Text(
                    "no engine is running: your answer is queued and applies when it starts "
                    "(or apply it now with E on the dashboard)",
                    style="yellow",
                )
            )
        if len(queue) > 1:
            others = ", ".join(
                f"v{r.version}" + (f" (lane {r.lane})" if lanes > 1 and r.lane is not None else "")
                for r in queue
                if r.version != self.showing
            )
            lines.append(Text.assemble(("queue      ", "dim"), f"then {others}", (" · n shows the next", "dim")))
        self.query_one("#review-why", Static).update(Text("\n").join(lines))
        self.query_one("#review-classes", ClassTable).rows = v.rows

    # -- answering ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next":
            return len(self.queue()) > 1
        return True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "later":
            self.close_dialog()
        else:
            self.action_answer(str(event.button.id))

    def action_answer(self, kind: str) -> None:
        v = self.showing
        if v is None:
            return
        if self.current() is None:  # answered or closed elsewhere since it came on screen
            self._follow_queue()
            return
        if time.monotonic() - self.shown_at < self.app.services.review_arm_s:
            self.notify(f"v{v} came on screen just now: read it first, then answer", severity="warning", timeout=4)
            return
        note = self.query_one("#review-note", Input)
        self.app.answer_review(self.tag, v, kind, note.value.strip())
        note.value = ""
        self._follow_queue()  # the next one, or close

    def action_next(self) -> None:
        queue = self.queue()
        if len(queue) < 2 or self.showing is None:
            return
        versions = [r.version for r in queue]
        i = versions.index(self.showing) if self.showing in versions else -1
        self.showing = versions[(i + 1) % len(versions)]

    def action_later(self) -> None:
        self.close_dialog()

    def close_dialog(self) -> None:
        """Dismiss once (an update arriving while the dialog closes must not dismiss it again)."""
        if not self.closing:
            self.closing = True
            self.dismiss(None)

"""The state line: phase, iteration, BEST_COMMIT, elapsed, heartbeat age, pending reviews.

A second line says what needs the engineer: a review, a crashed engine (with its last
error and how to start it again), why a finished run stopped, commands still queued, or a
standing notice about the run (the CPU demo says its timings are CPU timings).
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.kopt_tui.model import StateView
from kopt_supervisor.kopt_tui.widgets.styles import state_badge


class StateLine(Widget):
    view: reactive[StateView | None] = reactive(None)
    """Two rows, always (app.tcss), so a changing heartbeat never re-lays out the screen."""

    def render(self) -> Text:
        v = self.view
        if v is None:
            return Text("reading run.db…", style="dim")
        symbol, style = state_badge(v.state)
        label = "paused" if v.paused and v.state == "running" else v.state.replace("_", " ")
        top = Text.assemble(
            (f"{symbol} {label}", style), "  ", (v.tag, "bold"),
            ("  ⚠ CPU timings" if v.cpu_demo else "", "bold yellow"),
            ("  v" + str(v.version) if v.version is not None else "", "bold"),
            ("  " + v.step if v.step else "", ""),
            "  best ", (v.best_commit, "cyan"),
            "  ⏱ ", v.elapsed,
            "  ♥ ", (v.heartbeat, "dim" if v.state in ("stopped", "finished") else ""),
            (f"  pid {v.pid}" if v.pid else "", "dim"),
            no_wrap=True, overflow="ellipsis",
        )
        top.truncate(max(1, self.size.width), overflow="ellipsis")
        second = self._second_line(v)
        if second is None:
            return top
        second.truncate(max(1, self.size.width), overflow="ellipsis")
        return Text("\n").join([top, second])

    @staticmethod
    def _second_line(v: StateView) -> Text | None:
        review = f"⚑ {', '.join(f'v{x}' for x in v.reviews)} awaits your review" if v.reviews else ""
        if v.state == "crashed":
            return Text.assemble(("✖ engine gone", "bold red"), f" (heartbeat {v.heartbeat} ago) · E starts it",
                                 ("  " + review if review else "", "bold magenta"), "  ", (v.reason, "red"))
        if review:
            return Text.assemble((review, "bold magenta"), "  a accept · r reject · m more rounds")
        if v.queued:
            return Text.assemble(("queued for the next engine: ", "yellow"), ", ".join(v.queued))
        if v.state in ("stopped", "finished"):
            return Text.assemble(("stopped: ", "bold blue"), v.reason or "—", " · E resumes the run")
        if v.notice:
            return Text.assemble(("⚠ ", "bold yellow"), (v.notice, "yellow"))
        if v.last_event:
            return Text(v.last_event, style="dim")
        return None

"""The state line: phase, iteration, BEST_COMMIT, elapsed, heartbeat age, pending reviews.

The top line flags what makes every result of the run weaker: ⚠ NO SANDBOX when a session
ran with --no-sandbox, ⚠ CPU timings for the CPU demo; and what the agent cost so far.
A second line says what needs the engineer: a review, a crashed engine (with its last
error and how to start it again), why a finished run stopped, commands still queued, or the
standing caveats about the run (the sandbox, a decision that takes minutes with this bench,
the CPU demo's notice).
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
            (f"{symbol} {label}", style),
            "  ",
            (v.tag, "bold"),
            ("  ⚠ NO SANDBOX" if v.unsandboxed else "", "bold red"),
            ("  ⚠ CPU timings" if v.cpu_demo else "", "bold yellow"),
            ("  v" + str(v.version) if v.version is not None else "", "bold"),
            ("  " + v.step if v.step else "", ""),
            "  best ",
            (v.best_commit, "cyan"),
            "  ⏱ ",
            v.elapsed,
            ("  " + v.agent_cost if v.agent_cost else "", ""),
            "  ♥ ",
            (v.heartbeat, "dim" if v.state in ("stopped", "finished") else ""),
            (f"  pid {v.pid}" if v.pid else "", "dim"),
            no_wrap=True,
            overflow="ellipsis",
        )
        top.truncate(max(1, self.size.width), overflow="ellipsis")
        second = self._second_line(v)
        if second is None:
            return top
        second.truncate(max(1, self.size.width), overflow="ellipsis")
        return Text("\n").join([top, second])

    @staticmethod
    def _cautions(v: StateView, lead: str) -> list[tuple[str, str]]:
        """The standing caveats, the sandbox in red when it was off."""
        out = []
        for i, c in enumerate(v.cautions):
            style = "bold red" if v.unsandboxed and i == 0 else "yellow"
            out.append((f"{lead if i == 0 else '  '}⚠ {c}", style))
        return out

    @staticmethod
    def _second_line(v: StateView) -> Text | None:
        review = f"⚑ {v.review_text}" if v.review_text else ""
        if v.state == "crashed":
            return Text.assemble(
                ("✖ engine gone", "bold red"),
                f" (heartbeat {v.heartbeat} ago) · E starts it",
                ("  " + review if review else "", "bold magenta"),
                "  ",
                (v.reason, "red"),
            )
        if review:
            keys = (
                ""
                if not v.open_reviews
                else "  a accept · r reject · m more rounds"
                if v.open_reviews == 1
                else "  a / r / m: one at a time in the review queue"
            )
            return Text.assemble((review, "bold magenta"), keys)
        if v.queued:
            return Text.assemble(("queued for the next engine: ", "yellow"), ", ".join(v.queued))
        if v.state in ("stopped", "finished"):
            return Text.assemble(
                ("stopped: ", "bold blue"), v.reason or "—", " · E resumes the run", *StateLine._cautions(v, "  ")
            )
        if v.cautions:
            return Text.assemble(*StateLine._cautions(v, ""))
        if v.last_event:
            return Text(v.last_event, style="dim")
        return None

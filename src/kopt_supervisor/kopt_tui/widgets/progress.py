"""Progress of the step in flight: which round of how many, elapsed, time left."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.kopt_tui.model import ProgressView

BAR = 16


def bar(done: int, total: int, width: int = BAR) -> str:
    filled = max(0, min(width, round(width * done / total))) if total else 0
    return "█" * filled + "░" * (width - filled)


class ProgressLine(Widget):
    view: reactive[ProgressView | None] = reactive(None)

    def render(self) -> Text:
        v = self.view
        if v is None:
            return Text("")
        if not v.active:
            return Text(v.label, style="dim", no_wrap=True, overflow="ellipsis")
        parts: list[str | tuple[str, str]] = [("▶ ", "cyan"), v.label]
        if v.done is not None and v.total:
            parts += ["  ", (bar(v.done, v.total), "cyan")]
        if v.elapsed:
            parts += ["  ", v.elapsed, (" elapsed", "dim")]
        if v.left:
            parts += [("  ~", "dim"), v.left, (" left", "dim")]
        text = Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
        text.truncate(max(1, self.size.width), overflow="ellipsis")
        return text

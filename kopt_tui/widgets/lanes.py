"""Lanes: one line per lane of a run with several ([parallel].lanes): its iteration in flight,
what it does with the step's progress bar, and the GPU and host it runs on."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui.model import LaneRow, LanesView
from kopt_supervisor.kopt_tui.widgets.progress import bar

BAR = 8
HOST_WIDTH = 16


def lane_line(r: LaneRow, widths: tuple[int, int, int, int], live: bool) -> Text:
    lane_w, version_w, gpu_w, host_w = widths
    version = f"v{r.version}" if r.version is not None else fmt.DASH
    parts: list[str | tuple[str, str]] = [
        (f"lane {r.lane}".ljust(lane_w), "bold"), "  ",
        (version.ljust(version_w), "cyan" if r.version is not None else "dim"), "  ",
        (r.gpu or fmt.DASH).ljust(gpu_w), " ", (fmt.one_line(r.host, host_w).ljust(host_w), "dim"), "  ",
        # the bar in a column of its own: a long step never pushes it off a narrow terminal
        (bar(r.done, r.total, BAR) if r.done is not None and r.total else " " * BAR, "cyan"), "  ",
        (r.what, "" if r.version is not None else "dim")]
    if r.step:
        parts += [(" · ", "dim"), r.step]
    text = Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
    if not live:
        text.stylize("dim")
    return text


class LanesPanel(Widget):
    view: reactive[LanesView | None] = reactive(None, layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self.view.rows)) if self.view else 1

    def render(self) -> Text:
        v = self.view
        if v is None or not v.rows:
            return Text("")
        widths = (max(len(f"lane {r.lane}") for r in v.rows),
                  max(len(f"v{r.version}") if r.version is not None else 1 for r in v.rows),
                  max(len(r.gpu or fmt.DASH) for r in v.rows),
                  min(HOST_WIDTH, max(len(r.host) for r in v.rows)))
        rows = list(v.rows)
        room = max(1, self.size.height)
        more = len(rows) - room
        if more > 0:  # a short terminal: the lanes that fit, and how many do not
            rows = rows[:room - 1]
        lines = [lane_line(r, widths, v.live) for r in rows]
        if more > 0:
            lines.append(Text(f"+{more + 1} more lanes: kopt status shows every one", style="dim"))
        out = Text("\n").join(lines)
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out

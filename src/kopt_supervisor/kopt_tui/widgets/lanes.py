"""Lanes: one line per lane of a run with several ([parallel].lanes): the lane, its iteration
in flight, its GPU and host, what it does (a lane awaiting the engineer says its place in the
review queue), the interval its decision stands at, and its candidate. The subtitle (the
bottom border) says the run's progress per GPU-hour (its best speedup, wall time and
GPU-hours, the stale share) and where the lanes' time went (engine.api.progress).

The columns fit the panel: each is as wide as its widest cell, the candidate takes what is
left. Under `WIDE` cells the words are the short ones ("deciding 2/4", "review 1 of 2"), the
progress bar and the interval's class name go, and so does the host column when every lane
runs on this host (the title then says "on this host").
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.engine.api import Progress, fmt
from kopt_supervisor.kopt_tui.model import LaneRow, LanesView
from kopt_supervisor.kopt_tui.widgets.progress import bar
from kopt_supervisor.kopt_tui.widgets.styles import VERDICT_STYLE

BAR = 8
WIDE = 100
"""From this many cells of content width, the full words and the progress bar."""
CAPS = {"host": 16, "what": 44, "interval": 40}
"""The widest a column grows (its cells are cut with an ellipsis beyond)."""
GAP = 2
LOCAL = ("", "local")


@dataclass(frozen=True)
class Cell:
    column: str
    text: str
    style: str = ""


def lane_cells(r: LaneRow, *, wide: bool, hosts: bool) -> list[Cell]:
    """A lane's cells, in column order; the candidate last (it takes the rest of the line)."""
    cells = [
        Cell("lane", f"lane {r.lane}", "bold"),
        Cell(
            "version",
            f"v{r.version}" if r.version is not None else fmt.DASH,
            "cyan" if r.version is not None else "dim",
        ),
        Cell("gpu", r.gpu or fmt.DASH, "" if r.gpu else "dim"),
    ]
    if hosts:
        cells.append(Cell("host", r.host or fmt.DASH, "dim"))
    if wide:
        cells.append(Cell("bar", bar(r.done, r.total, BAR) if r.done is not None and r.total else "", "cyan"))
    what = (r.what + (f" · {r.step}" if r.step else "")) if wide else (r.short or r.what)
    style = (
        "bold magenta"
        if r.reviewing
        else "yellow"
        if r.what == "waiting for an idle GPU"
        else "dim"
        if r.version is None
        else ""
    )
    cells.append(Cell("what", what, style))
    interval = (f"{r.interval_cls} " if wide and r.interval_cls else "") + r.interval
    cells.append(Cell("interval", interval, VERDICT_STYLE.get(r.verdict, "")))
    cells.append(Cell("candidate", r.candidate))
    return cells


def shows_hosts(rows: tuple[LaneRow, ...], wide: bool) -> bool:
    """The host column: always when wide; on a narrow panel only when a lane runs elsewhere."""
    return wide or any(r.host not in LOCAL for r in rows)


def lane_lines(rows: tuple[LaneRow, ...], width: int, live: bool = True) -> list[Text]:
    """One line per row, its columns aligned, fitted to `width` cells (pure: the panel's
    `render` and the tests call it)."""
    wide = width >= WIDE
    hosts = shows_hosts(rows, wide)
    table = [lane_cells(r, wide=wide, hosts=hosts) for r in rows]
    widths: dict[str, int] = {}
    for cells in table:
        for c in cells[:-1]:
            widths[c.column] = min(CAPS.get(c.column, 1 << 10), max(widths.get(c.column, 0), len(c.text)))
    lines = []
    for cells in table:
        line = Text(no_wrap=True, overflow="ellipsis")
        for c in cells:
            w = widths.get(c.column)
            if w == 0:
                continue  # a column no lane has anything in
            if line:
                line.append(" " * GAP)
            text = c.text if w is None else fmt.one_line(c.text, w).ljust(w)
            line.append(text, c.style)
        line.rstrip()
        line.truncate(max(1, width), overflow="ellipsis")
        if not live:
            line.stylize("dim")
        lines.append(line)
    return lines


TIME_WORDS = (
    ("wait_s", "waiting"),
    ("propose_s", "proposing"),
    ("measure_s", "measuring"),
    ("confirm_s", "confirming"),
    ("review_s", "review"),
    ("stale_s", "stale"),
)
"""The buckets of a lane's time (engine.api.LaneTime) as the panel's subtitle names them."""


def time_split(p: Progress) -> str:
    """Where the lanes' time went, all lanes together, largest first: "measuring 61% ·
    confirming 22% · stale 4% · proposing 3%" (buckets under 1% left out; "" before any
    candidate ended)."""
    busy = sum(x.busy_s for x in p.lanes)
    if busy <= 0:
        return ""
    parts = sorted(
        ((sum(float(getattr(x, key)) for x in p.lanes) / busy, word) for key, word in TIME_WORDS), reverse=True
    )
    return " · ".join(f"{word} {fmt.share(100 * share, 2)}" for share, word in parts if share >= 0.01)


class LanesPanel(Widget):
    view: reactive[LanesView | None] = reactive(None, layout=True)
    title: reactive[str] = reactive("lanes")
    """What the dashboard says of the lanes ("lanes · 3 of 4 busy"); the panel adds "on this
    host" when its host column is left out."""
    gpu_time: reactive[Progress | None] = reactive(None)
    """The run's progress per GPU-hour (engine.api.progress), the panel's subtitle: "2.73× in
    7:02 (0.35 GPU-h) · stale 3% · measuring 61% · confirming 22% · ..."."""

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self.view.rows)) if self.view else 1

    def watch_view(self) -> None:
        self._retitle()

    def watch_title(self) -> None:
        self._retitle()

    def watch_gpu_time(self) -> None:
        self._retitle()

    def on_resize(self) -> None:
        self._retitle()

    def _retitle(self) -> None:
        v = self.view
        here = v is not None and v.rows and not shows_hosts(v.rows, self.content_size.width >= WIDE)
        self.border_title = self.title + (" · on this host" if here else "")
        p = self.gpu_time
        self.border_subtitle = " · ".join(x for x in (p.line(), time_split(p)) if x) if p is not None else ""

    def render(self) -> Text:
        v = self.view
        if v is None or not v.rows:
            return Text("")
        rows = v.rows
        room = max(1, self.size.height)
        more = len(rows) - room
        if more > 0:  # a short terminal: the lanes that fit, and how many do not
            rows = rows[: room - 1]
        lines = lane_lines(rows, max(1, self.size.width), v.live)
        if more > 0:
            waiting = sum(r.needs_you for r in v.rows[room - 1 :])
            lines.append(
                Text(
                    f"+{more + 1} more lanes"
                    + (f" ({waiting} awaiting review)" if waiting else "")
                    + ": kopt status shows every one",
                    style="dim",
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
        out = Text("\n").join(lines)
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out

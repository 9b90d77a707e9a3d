"""The log viewer: follows the live benchmark output (switching files as the engine moves
from run to run), or one log file. A thread worker tails the file; it reads only bytes
that were appended since the last look."""

from __future__ import annotations

import threading
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Log, Static
from textual.worker import get_current_worker

from kopt_supervisor.kopt_tui.screens.live import KoptScreen

TAIL_START = 64 * 1024
"""How much of an existing file to show when it is opened."""
CHUNK = 256 * 1024
POLL_S = 0.3


class LogText(Message):
    """Text read from the log file (`header` set when the file changed)."""

    def __init__(self, text: str, path: str = "", header: str = "") -> None:
        super().__init__()
        self.text, self.path, self.header = text, path, header


class LogScreen(KoptScreen[None]):
    BINDINGS = [
        Binding("escape", "back", "back", tooltip="Back"),
        Binding("f", "follow", "follow on/off", tooltip="Keep scrolling to the newest line, or stop to read"),
    ]

    def __init__(self, tag: str, path: Path | None = None) -> None:
        super().__init__()
        self.tag = tag
        self.path = path
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(id="log-title")
        yield Log(id="log", max_lines=20000, auto_scroll=True)
        yield Footer()

    def on_mount(self) -> None:
        self._title("waiting for output…" if self.path is None else str(self.path))
        self._tail()

    def on_unmount(self) -> None:
        self._stop.set()

    def _title(self, what: str) -> None:
        mode = "live benchmark output" if self.path is None else "log"
        follow = "following" if self.query_one(Log).auto_scroll else "paused (f follows)"
        self.query_one("#log-title", Static).update(
            Text.assemble((f"{self.tag} · {mode}: ", "bold"), what, (f"  [{follow}]", "dim"))
        )

    def _live_path(self) -> Path | None:
        data = self.app.latest.get(self.tag)
        p = data.run_meta.live_log if data else ""
        return Path(p) if p else None

    @work(thread=True, exclusive=True, group="log-tail", exit_on_error=False)
    def _tail(self) -> None:
        worker = get_current_worker()
        current: Path | None = None
        offset = 0
        while not worker.is_cancelled and not self._stop.is_set():
            path = self.path or self._live_path()
            if path is not None and path != current:
                current = path
                try:
                    size = path.stat().st_size
                except OSError:
                    size = 0
                offset = max(0, size - TAIL_START)
                header = f"── {path.parent.name}/{path.name} " + ("(last 64 KiB) " if offset else "") + "──\n"
                self.post_message(LogText("", str(path), header))
            if current is not None:
                chunk, offset = _read_from(current, offset)
                if chunk:
                    self.post_message(LogText(chunk))
            self._stop.wait(POLL_S)

    def on_log_text(self, msg: LogText) -> None:
        log = self.query_one(Log)
        if msg.header:
            self._title(msg.path)
            log.write(("\n" if log.line_count else "") + msg.header)
        if msg.text:
            log.write(msg.text)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_follow(self) -> None:
        log = self.query_one(Log)
        log.auto_scroll = not log.auto_scroll
        if log.auto_scroll:
            log.scroll_end(animate=False)
        self._title(str(self.path or self._live_path() or "waiting for output…"))


def _read_from(path: Path, offset: int) -> tuple[str, int]:
    """Text appended to `path` after `offset` (at most CHUNK bytes) and the new offset;
    starts over if the file was truncated or replaced by a shorter one."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            if size < offset:
                offset = 0
            if size == offset:
                return "", offset
            f.seek(offset)
            data = f.read(CHUNK)
    except OSError:
        return "", offset
    return data.decode("utf-8", errors="replace"), offset + len(data)

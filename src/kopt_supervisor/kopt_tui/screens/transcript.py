"""An agent's transcript: what the agent read, said and did in one run (its proposal or a
repair), kept by kopt in logs/vN/ (size-capped). JSON lines are shown one event a line
(kopt_tui.iteration_view.transcript_lines); `r` shows the lines as written. The file is read
once, in a thread worker, through `engine.api` (only from the run's logs/, at most its head
and tail when it is large); the agent's text is shown as text, never as markup or terminal
control sequences."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Log, Static

from kopt_supervisor.engine.api import RunReader, Transcript, fmt
from kopt_supervisor.kopt_tui.iteration_view import transcript_lines
from kopt_supervisor.kopt_tui.screens.live import KoptScreen


class TranscriptRead(Message):
    def __init__(self, transcript: Transcript) -> None:
        super().__init__()
        self.transcript = transcript


class TranscriptScreen(KoptScreen[None]):
    BINDINGS = [
        Binding("escape", "back", "back", tooltip="Back to the iteration"),
        Binding("r", "raw", "raw/readable", tooltip="Show the lines as the agent wrote them, or one event a line"),
    ]

    def __init__(self, tag: str, path: str, label: str = "") -> None:
        super().__init__()
        self.tag = tag
        self.path = path
        self.label = label
        self.raw = False
        self.transcript: Transcript | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="transcript-title")
        yield Log(id="transcript", max_lines=50000, auto_scroll=False)
        yield Footer()

    def on_mount(self) -> None:
        self._title("reading…")
        self._read()

    def _title(self, what: str) -> None:
        self.query_one("#transcript-title", Static).update(
            Text.assemble(
                (f"{self.tag} · transcript", "bold"),
                (f" of {self.label}" if self.label else "", "bold"),
                ": ",
                self.path,
                ("  " + what if what else "", "dim"),
                ("  [raw]" if self.raw else "", "yellow"),
            )
        )

    @work(thread=True, exclusive=True, group="transcript", exit_on_error=False)
    def _read(self) -> None:
        try:
            with RunReader(self.app.workspace(self.tag)) as reader:
                transcript = reader.transcript(self.path)
        except Exception as e:  # noqa: BLE001 - said in place of the transcript; the TUI stays up
            transcript = Transcript(self.path, "", error=f"{type(e).__name__}: {e}")
        self.post_message(TranscriptRead(transcript))

    def on_transcript_read(self, msg: TranscriptRead) -> None:
        self.transcript = msg.transcript
        self._show()

    def _show(self) -> None:
        t = self.transcript
        if t is None:
            return
        log = self.query_one(Log)
        log.clear()
        if t.error:
            self._title("")
            log.write_line(f"cannot show it: {t.error}")
            return
        self._title(fmt.size(t.size) + (" (head and tail: the middle is not shown)" if t.cut else ""))
        lines = transcript_lines(t.text, raw=self.raw)
        log.write_lines(lines if lines else ["(empty)"])
        log.scroll_home(animate=False)

    def action_raw(self) -> None:
        self.raw = not self.raw
        self._show()

    def action_back(self) -> None:
        self.app.pop_screen()

"""The kopt TUI: a Textual application that supervises runs, a pure client of `engine.api`.

One thread worker (`_poll`) looks at run.db about twice a second through
`kopt_tui.watch.Poller` and re-reads only what changed; it posts `RunUpdated`,
`RunsUpdated` and `GpusUpdated` messages, and the app hands each to the screens that show
that run (messages up, attributes down). Commands go through `engine.api.send` in short
thread workers, so the UI never waits on SQLite, a lock or a process start. One timer
moves `now` once a second for ages and countdowns; nothing else runs while nothing changes.

`q` leaves the TUI and never touches the engine: the engine runs in its own session, so
closing the terminal or losing SSH (SIGHUP to this process) does not reach it either.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.worker import get_current_worker

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import (
    BackendFactory,
    KoptError,
    Workspace,
    engine_alive,
    open_backend,
)
from kopt_supervisor.kopt_tui.commands import KoptCommands
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.watch import GpuReading, Poller, PollError, Probe, RunsSnapshot


def _start_engine(ws: Workspace) -> int:
    return api.start_detached(ws)


@dataclass(frozen=True)
class Services:
    """What the app takes from the world; tests and snapshots replace the clock and probes."""

    now: Callable[[], float] = time.time
    probe: Probe = engine_alive
    backend: BackendFactory = open_backend
    start_engine: Callable[[Workspace], int] = _start_engine
    poll_s: float = 0.5
    gpu_every_s: float = 2.0
    tick_s: float = 1.0
    auto_review: bool = True
    """Open the review dialog by itself when a candidate becomes borderline."""
    review_arm_s: float = 0.6
    """A review shown a moment ago takes no answer yet: the key pressed twice, or once just
    as the review on screen was answered elsewhere, must not answer the next one unseen."""


class RunUpdated(Message):
    def __init__(self, data: RunData) -> None:
        super().__init__()
        self.data = data


class RunsUpdated(Message):
    def __init__(self, runs: tuple[RunData, ...]) -> None:
        super().__init__()
        self.runs = runs


class GpusUpdated(Message):
    def __init__(self, reading: GpuReading) -> None:
        super().__init__()
        self.reading = reading


class KoptApp(App[int]):
    """`kopt attach TAG` opens a run's dashboard; with no tag, the runs (home) screen."""

    CSS_PATH = "app.tcss"
    TITLE = "kopt"
    COMMANDS = App.COMMANDS | {KoptCommands}
    BINDINGS = [
        Binding("q", "detach", "detach", tooltip="Leave the TUI; the engine keeps running (kopt attach comes back)"),
        Binding("question_mark", "help", "help", key_display="?", tooltip="Every key, on every screen"),
    ]

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    """Screens get these classes from the terminal's size; app.tcss lays out by them."""

    now: var[float] = var(0.0, init=False)

    def __init__(self, root: Path, tag: str | None = None, *, services: Services | None = None) -> None:
        super().__init__()
        self.root = Path(root)
        self.start_tag = tag
        self.services = services or Services()
        self.latest: dict[str, RunData] = {}
        self.gpus: dict[str, GpuReading] = {}
        self.review_prompted: set[tuple[str, int]] = set()
        """Borderline candidates whose review dialog opened by itself once already."""
        self.answers_sent: dict[tuple[str, int], str] = {}
        """(tag, version) -> the answer this TUI sent, until run.db shows it (or shows the review
        closed): a review answered here leaves the queue at once, never to be answered twice."""
        self._wake = threading.Event()
        self._poller_target: str | None = tag
        self._poller_runs = tag is None
        self._poller_force = True
        self._closing = False
        self.now = self.services.now()

    # -- lifecycle ----------------------------------------------------------------------

    def on_mount(self) -> None:
        from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
        from kopt_supervisor.kopt_tui.screens.runs import RunsScreen

        if self.start_tag is None:
            self.push_screen(RunsScreen())
        else:
            self.push_screen(DashboardScreen(self.start_tag))
        self.set_interval(self.services.tick_s, self._tick)
        self._poll()

    def on_unmount(self) -> None:
        self._closing = True  # the poller ends even when its worker is not cancelled yet
        self._wake.set()

    def _tick(self) -> None:
        self.now = self.services.now()

    # -- what the poller watches --------------------------------------------------------

    def watch_run(self, tag: str | None, *, runs: bool = False) -> None:
        """Point the poller at one run (a dashboard) and/or every run (the home screen)."""
        self._poller_target = tag
        self._poller_runs = runs
        self._poller_force = True
        self._wake.set()

    def refresh_now(self) -> None:
        self._poller_force = True
        self._wake.set()

    @work(thread=True, exclusive=True, group="poll", name="run.db poller")
    def _poll(self) -> None:
        worker = get_current_worker()
        s = self.services
        poller = Poller(self.root, probe=s.probe, backend=s.backend, gpu_every_s=s.gpu_every_s)
        try:
            while not worker.is_cancelled and not self._closing:
                poller.target, poller.want_runs = self._poller_target, self._poller_runs
                if self._poller_force:
                    self._poller_force = False
                    poller.force = True
                for item in poller.step():
                    self.post_message(_message(item))
                self._wake.wait(s.poll_s)
                self._wake.clear()
        finally:
            poller.close()

    def _live_screens(self) -> list[Screen]:
        """The screens that can take data now: mounted (a screen still composing reads
        `latest` in its on_mount) and not torn down with the app (after `q`, a late poll
        must not reach widgets that are gone)."""
        if not self.is_running:  # shutting down (q, or the end of a test): screens are being pruned
            return []
        return [s for s in self.screen_stack if s.is_mounted and s.is_attached]

    def on_run_updated(self, msg: RunUpdated) -> None:
        self.latest[msg.data.tag] = msg.data
        self._forget_answers_seen(msg.data)
        for screen in self._live_screens():
            if getattr(screen, "tag", None) == msg.data.tag and hasattr(screen, "data"):
                screen.data = msg.data

    def on_runs_updated(self, msg: RunsUpdated) -> None:
        for screen in self._live_screens():
            if hasattr(screen, "runs"):
                screen.runs = msg.runs

    def on_gpus_updated(self, msg: GpusUpdated) -> None:
        self.gpus[msg.reading.tag] = msg.reading
        for screen in self._live_screens():
            if getattr(screen, "tag", None) == msg.reading.tag and hasattr(screen, "gpu_reading"):
                screen.gpu_reading = msg.reading

    def on_poll_failed(self, msg: PollFailed) -> None:
        self.notify(msg.message, title="cannot read run.db", severity="error", timeout=8, markup=False)

    # -- commands -----------------------------------------------------------------------

    def open_reviews(self, tag: str) -> tuple[api.PendingReview, ...]:
        """The run's reviews waiting for an answer, oldest first, less those answered here a
        moment ago (run.db does not show the answer yet)."""
        data = self.latest.get(tag)
        if data is None:
            return ()
        return tuple(r for r in data.open_reviews if (tag, r.version) not in self.answers_sent)

    def answer_review(self, tag: str, version: int, kind: str, why: str = "") -> None:
        """Send `kind` (accept, reject, more_rounds) for vN's review, once: the review leaves
        this TUI's queue now; a refused send puts it back (engine.api.send says why)."""
        if (tag, version) in self.answers_sent:
            return
        self.answers_sent[(tag, version)] = kind
        args: dict[str, Any] = {"version": version}
        if why and kind != "more_rounds":
            args["why"] = why
        self.send_command(tag, kind, args)

    def _answer_not_sent(self, tag: str, version: int) -> None:
        self.answers_sent.pop((tag, version), None)

    def _forget_answers_seen(self, data: RunData) -> None:
        """Answers sent here that run.db now shows (a pending row, or the review closed or
        measured again) are run.db's to show from now on."""
        open_now = {r.version for r in data.open_reviews}
        for key in [k for k in self.answers_sent if k[0] == data.tag and k[1] not in open_now]:
            del self.answers_sent[key]

    def workspace(self, tag: str) -> Workspace:
        return Workspace(self.root, tag)

    @work(thread=True, group="send")
    def send_command(self, tag: str, kind: str, args: dict[str, Any] | None = None) -> None:
        """Send a durable command (the engine polls it), or apply it offline when no engine
        runs; say what happened either way."""
        label = kind.replace("_", " ") + (f" v{args['version']}" if args and "version" in args else "")
        try:
            sent = api.send(self.workspace(tag), kind, args or {}, source=f"tui:{os.getpid()}")
        except Exception as e:  # noqa: BLE001 - a failed send is reported; the TUI stays up
            if kind in ("accept", "reject", "more_rounds") and args:  # not sent: run.db's to show again
                self.call_from_thread(self._answer_not_sent, tag, args["version"])
            if isinstance(e, KoptError):
                self.notify(str(e), title=f"{label}: refused", severity="error", timeout=8, markup=False)
            else:
                self.notify(
                    f"{type(e).__name__}: {e}", title=f"{label}: failed", severity="error", timeout=10, markup=False
                )
        else:
            self.notify(sent.message, title=label, timeout=6, markup=False)
        self.refresh_now()

    @work(thread=True, group="send")
    def start_engine(self, tag: str) -> None:
        try:
            pid = self.services.start_engine(self.workspace(tag))
        except Exception as e:  # noqa: BLE001 - reported; the TUI stays up
            self.notify(
                str(e) if isinstance(e, KoptError) else f"{type(e).__name__}: {e}",
                title="cannot start the engine",
                severity="error",
                timeout=10,
                markup=False,
            )
        else:
            self.notify(
                f"the engine runs as pid {pid}; its log is logs/engine.log",
                title="engine started",
                timeout=6,
                markup=False,
            )
        self.refresh_now()

    # -- actions ------------------------------------------------------------------------

    def action_detach(self) -> None:
        self.exit(0)

    def action_help(self) -> None:
        from kopt_supervisor.kopt_tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())


class PollFailed(Message):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message


def _message(item: object) -> Message:
    if isinstance(item, RunData):
        return RunUpdated(item)
    if isinstance(item, RunsSnapshot):
        return RunsUpdated(item.runs)
    if isinstance(item, GpuReading):
        return GpusUpdated(item)
    assert isinstance(item, PollError)
    return PollFailed(item.message)


def run_app(root: Path, tag: str | None = None) -> int:
    """The TUI on `root`: a run's dashboard (`tag`) or the runs home screen (None)."""
    if tag is not None:
        Workspace(Path(root), tag).require()
    app = KoptApp(Path(root), tag)
    result = app.run()
    if result is not None:
        return int(result)
    return int(app.return_code or 0)

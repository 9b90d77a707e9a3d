"""The run dashboard (docs/design.md §8): state line, progress, history, GPUs, counters,
per-class deltas and the best-latency chart, with every action on a key; with several lanes
([parallel].lanes) a line per lane under the progress line (the screen's class -lanes).

The screen keeps the latest `RunData` (set by the app) and the clock (`app.now`); it turns
them into view records and hands each widget its record. Widgets re-render only when their
record changed. On a small terminal (under 110 columns or 30 rows: the app's breakpoint
classes -narrow / -short) the side panels share one slot and `v` cycles through them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import DataTable, Footer

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import LIVE_STATES
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.screens.live import KoptScreen, renders_data
from kopt_supervisor.kopt_tui.watch import GpuReading
from kopt_supervisor.kopt_tui.widgets.best_chart import BestChart
from kopt_supervisor.kopt_tui.widgets.class_deltas import ClassDeltas
from kopt_supervisor.kopt_tui.widgets.counters import Counters
from kopt_supervisor.kopt_tui.widgets.gpu_panel import GpuPanel
from kopt_supervisor.kopt_tui.widgets.history import HistoryTable
from kopt_supervisor.kopt_tui.widgets.lanes import LanesPanel
from kopt_supervisor.kopt_tui.widgets.progress import ProgressLine
from kopt_supervisor.kopt_tui.widgets.state_line import StateLine

SIDE_PANELS = ("deltas", "counters", "gpus", "chart")


class DashboardScreen(KoptScreen[None]):
    BINDINGS = [
        Binding(
            "a",
            "accept",
            "accept",
            tooltip="Accept the borderline candidate awaiting review (several: the review queue opens)",
        ),
        Binding(
            "r",
            "reject",
            "reject",
            tooltip="Reject the borderline candidate awaiting review (several: the review queue opens)",
        ),
        Binding(
            "m",
            "more_rounds",
            "more rounds",
            show=False,
            tooltip="Measure the borderline candidate for more rounds (several: the review queue opens)",
        ),
        Binding("p", "pause", "pause/resume", tooltip="Pause the run (a benchmark in flight is re-run), or resume it"),
        Binding("s", "stop", "stop", tooltip="Stop the run cleanly (asks first); `kopt run` resumes it later"),
        Binding(
            "R",
            "restart",
            "restart",
            key_display="R",
            tooltip="Masked partial restart from the selected iteration (asks first)",
        ),
        Binding("l", "logs", "logs", tooltip="Follow the live benchmark output"),
        Binding("enter", "detail", "detail", show=False, tooltip="Open the selected iteration"),
        Binding(
            "E",
            "start_engine",
            "start engine",
            key_display="E",
            tooltip="Start the engine again when none runs (a crash, or a stopped run)",
        ),
        Binding(
            "v",
            "cycle_panel",
            "next panel",
            show=False,
            tooltip="Narrow terminals: show the next side panel (Δ, counters, GPUs, chart)",
        ),
        Binding("escape", "runs", "runs", show=False, tooltip="Back to every run (home)"),
    ]

    data: var[RunData | None] = var(None, init=False)
    gpu_reading: var[GpuReading | None] = var(None, init=False)
    panel: var[str] = var("deltas", init=False)

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag
        self._actions_key: tuple[object, ...] = ()
        self._restartable = False

    def compose(self) -> ComposeResult:
        yield StateLine(id="state")
        yield ProgressLine(id="progress")
        yield LanesPanel(id="lanes")
        with Horizontal(id="body"):
            table = HistoryTable(id="history")
            table.border_title = "history"
            yield table
            with Vertical(id="side"):
                for widget, title in (
                    (ClassDeltas(id="deltas", classes="panel"), "Δ per class"),
                    (Counters(id="counters", classes="panel"), "counters"),
                    (GpuPanel(id="gpus", classes="panel"), "GPUs"),
                    (BestChart(id="chart", classes="panel"), "best per class over iterations"),
                ):
                    widget.border_title = title
                    yield widget
        yield Footer()

    def on_mount(self) -> None:
        self.app.watch_run(self.tag)
        self.watch(self.app, "now", self._on_tick, init=False)
        self.set_class(True, "-show-deltas")
        data = self.app.latest.get(self.tag)
        if data is not None:
            self.data = data
        reading = self.app.gpus.get(self.tag)
        if reading is not None:
            self.gpu_reading = reading

    def on_screen_resume(self) -> None:
        self.app.watch_run(self.tag)

    # -- data in ------------------------------------------------------------------------

    def watch_data(self, old: RunData | None, data: RunData | None) -> None:
        if data is None:
            return
        self._show_data(old, data)

    @renders_data
    def _show_data(self, old: RunData | None, data: RunData) -> None:
        if old is None or old.generation != data.generation:  # the history moved, not just a heartbeat
            table = self.query_one(HistoryTable)
            best = api.best_iteration(data.iterations)
            table.show(model.history_rows(data), best.version if best else None)
            table.border_title = f"history · {len(data.iterations)} iterations"
            self.query_one(Counters).view = model.counters_view(data)
            self.query_one(BestChart).view = model.best_series(data)
            self._restartable = bool(model.restart_points(data.iterations))
        self._show_selected()
        self._show_lanes(data)
        self._on_tick(self.app.now)
        actions = (
            data.state,
            data.alive,
            tuple(r.version for r in self.app.open_reviews(self.tag)),
            data.run_meta.paused,
            self._restartable,
        )
        if actions != self._actions_key:
            self._actions_key = actions
            self.refresh_bindings()  # the footer and the palette follow what applies now
        self._maybe_review(data)

    def watch_gpu_reading(self) -> None:
        self._show_gpus(self.app.now)

    def _show_lanes(self, data: RunData) -> None:
        view = model.lanes_view(data)
        panel = self.query_one(LanesPanel)
        panel.view = view
        if view is not None:
            title = (
                f"lanes · {view.busy} of {len(view.rows)} busy"
                if view.live
                else "lanes · paused"
                if data.alive
                else "lanes · no engine"
                if data.state == "crashed"
                else f"lanes · {data.state}"
            )
            panel.title = title + (f" · {view.needing_you} awaiting review" if view.needing_you else "")
            panel.gpu_time = api.progress(data.iterations, data.direction)
        self.set_class(view is not None, "-lanes")

    @renders_data
    def _on_tick(self, now: float) -> None:
        data = self.data
        if data is None:
            return
        self.query_one(StateLine).view = model.state_view(data, now)
        self.query_one(ProgressLine).view = model.progress_view(data, now)
        self._show_gpus(now)

    @renders_data
    def _show_gpus(self, now: float) -> None:
        if self.data is None:
            return
        reading = self.gpu_reading
        live = list(reading.assessments) if reading else None
        view = model.gpus_view(self.data, live, now)
        if reading and reading.error:
            view = model.GpusView(view.rows, view.source, reading.error)
        self.query_one(GpuPanel).view = view

    def _show_selected(self) -> None:
        if self.data is None:
            return
        v = self.query_one(HistoryTable).selected_version
        self.query_one(ClassDeltas).view = model.classes_view(self.data, v)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_selected()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_detail()

    def _maybe_review(self, data: RunData) -> None:
        """A review the TUI has not shown yet opens the review queue (at the oldest review
        waiting: every lane's reviews queue there, one at a time)."""
        if not self.app.services.auto_review or not self.is_current:
            return
        prompted = self.app.review_prompted
        fresh = [r.version for r in self.app.open_reviews(self.tag) if (self.tag, r.version) not in prompted]
        if fresh:
            prompted.update((self.tag, v) for v in fresh)
            self.open_review()

    # -- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        d = self.data
        if action in ("accept", "reject", "more_rounds"):
            return bool(d and self.app.open_reviews(self.tag))
        if action == "stop":
            return bool(d and (d.state in LIVE_STATES or d.state == "crashed"))
        if action == "pause":
            return bool(d and d.state not in ("stopped", "finished"))
        if action == "start_engine":
            return bool(d and not d.alive)
        if action == "restart":
            return bool(d and model.restart_points(d.iterations))
        if action == "cycle_panel":
            return self.has_class("-narrow") or self.has_class("-short")
        return True

    def _review_version(self) -> int | None:
        """The review a dashboard key answers: the only one waiting. With several waiting the
        review queue opens instead, at the oldest, so that a key never answers a review
        unseen (the cursor may sit on a row only because it follows the newest)."""
        waiting = [r.version for r in self.app.open_reviews(self.tag)]
        if len(waiting) == 1:
            return waiting[0]
        if waiting:
            self.notify(f"{len(waiting)} reviews are waiting: answer them one at a time here", timeout=5)
            self.open_review()
            return None
        d = self.data
        sent = next((r for r in (d.reviews if d else ()) if r.answer is not None), None)
        self.notify(
            f"v{sent.version}'s answer ({sent.answer.kind.replace('_', ' ')}) is on its way to the engine"
            if sent is not None and sent.answer is not None
            else "no candidate is awaiting review",
            severity="warning",
        )
        return None

    def _answer(self, kind: str) -> None:
        v = self._review_version()
        if v is not None:
            self.app.answer_review(self.tag, v, kind)

    def action_accept(self) -> None:
        self._answer("accept")

    def action_reject(self) -> None:
        self._answer("reject")

    def action_more_rounds(self) -> None:
        self._answer("more_rounds")

    def open_review(self, version: int | None = None) -> None:
        """The review queue, at `version` (None: the oldest review waiting)."""
        from kopt_supervisor.kopt_tui.screens.review import ReviewScreen

        if not any(isinstance(s, ReviewScreen) for s in self.app.screen_stack):
            self.app.push_screen(ReviewScreen(self.tag, version))

    def action_pause(self) -> None:
        d = self.data
        if d is None:
            return
        paused = d.run_meta.paused or d.state == "paused"
        self.app.send_command(self.tag, "resume" if paused else "pause")

    def action_stop(self) -> None:
        from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen

        def stop(yes: bool | None) -> None:
            if yes:
                self.app.send_command(self.tag, "stop")

        self.app.push_screen(
            ConfirmScreen(
                f"Stop run {self.tag}?",
                "The engine finishes cleanly: a benchmark in flight is killed and its iteration is closed "
                "as interrupted. `kopt run` (or E here) continues the run later.",
                yes="Stop the run",
            ),
            stop,
        )

    def action_restart(self) -> None:
        from kopt_supervisor.kopt_tui.screens.restart import RestartScreen

        if self.data is None:
            return
        self.app.push_screen(RestartScreen(self.tag, self.query_one(HistoryTable).selected_version))

    def action_logs(self) -> None:
        from kopt_supervisor.kopt_tui.screens.logs import LogScreen

        self.app.push_screen(LogScreen(self.tag))

    def action_detail(self) -> None:
        from kopt_supervisor.kopt_tui.screens.detail import DetailScreen

        v = self.query_one(HistoryTable).selected_version
        if v is not None:
            self.app.push_screen(DetailScreen(self.tag, v))

    def action_start_engine(self) -> None:
        from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen

        d = self.data
        if d is None or d.alive:
            return

        def start(yes: bool | None) -> None:
            if yes:
                self.app.start_engine(self.tag)

        why = (
            "The engine is gone (crashed or killed): starting it recovers the workspace and goes on."
            if d.state == "crashed"
            else f"The run stopped ({d.run_meta.stop_reason or 'no reason'}); starting the engine continues it."
        )
        self.app.push_screen(ConfirmScreen(f"Start the engine for {self.tag}?", why, yes="Start the engine"), start)

    def action_cycle_panel(self) -> None:
        i = SIDE_PANELS.index(self.panel)
        self.panel = SIDE_PANELS[(i + 1) % len(SIDE_PANELS)]

    def watch_panel(self, old: str, new: str) -> None:
        self.set_class(False, f"-show-{old}")
        self.set_class(True, f"-show-{new}")

    def action_runs(self) -> None:
        from kopt_supervisor.kopt_tui.screens.runs import RunsScreen

        below = self.app.screen_stack[:-1]
        if below and isinstance(below[-1], RunsScreen):
            self.app.pop_screen()
        else:
            self.app.switch_screen(RunsScreen())

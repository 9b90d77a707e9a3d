"""One iteration in full: the decision and per-class numbers, the plan, the candidate's
diff, its log files and its events. Files are read in a thread worker; the numbers follow
the run live (an iteration in flight updates as its rounds come in)."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.widgets import Footer, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import RunReader, fmt
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.screens.live import KoptScreen, renders_data
from kopt_supervisor.kopt_tui.widgets.class_deltas import class_table
from kopt_supervisor.kopt_tui.widgets.styles import STATUS_STYLE

TABS = ("classes", "plan", "diff", "logs", "events")


class FilesRead(Message):
    def __init__(self, plan: str, diff: str, logs: list[tuple[Path, int]], events: list) -> None:
        super().__init__()
        self.plan, self.diff, self.logs, self.events = plan, diff, logs, events


class DetailScreen(KoptScreen[None]):
    BINDINGS = [
        Binding("escape", "back", "back", tooltip="Back to the dashboard"),
        Binding("a", "review", "review", tooltip="Review this borderline candidate (accept, reject, more rounds)"),
        Binding("R", "restart", "restart from here", key_display="R",
                tooltip="Masked partial restart from this iteration (asks first)"),
        Binding("l", "logs", "logs", tooltip="Open this iteration's newest log (the live one while it runs)"),
        Binding("left", "tab(-1)", "prev tab", show=False, tooltip="Previous tab"),
        Binding("right", "tab(1)", "next tab", show=False, tooltip="Next tab"),
    ]

    data: var[RunData | None] = var(None, init=False)

    def __init__(self, tag: str, version: int) -> None:
        super().__init__()
        self.tag = tag
        self.version = version
        self._logs: list[Path] = []
        self.files_loaded = False

    def compose(self) -> ComposeResult:
        yield Static(id="detail-head")
        with TabbedContent(id="detail-tabs"):
            with TabPane("classes", id="tab-classes"), VerticalScroll():
                yield Static(id="detail-decision")
                yield Static(id="detail-classes")
            with TabPane("plan", id="tab-plan"), VerticalScroll():
                yield Static(id="detail-plan", markup=False)
            with TabPane("diff", id="tab-diff"), VerticalScroll():
                yield Static(id="detail-diff")
            with TabPane("logs", id="tab-logs"):
                yield OptionList(id="detail-logs")
            with TabPane("events", id="tab-events"), VerticalScroll():
                yield Static(id="detail-events")
        yield Footer()

    def on_mount(self) -> None:
        data = self.app.latest.get(self.tag)
        if data is not None:
            self.data = data
        self._load_files()

    # -- live numbers -------------------------------------------------------------------

    @renders_data
    def watch_data(self, data: RunData | None) -> None:
        if data is None:
            return
        it = data.by_version.get(self.version)
        if it is None:
            self.query_one("#detail-head", Static).update(Text(f"v{self.version} does not exist", style="red"))
            return
        dec = it.record.get("decision") or {}
        head = Text.assemble(
            (f"v{it.version} ", "bold"), (it.status, STATUS_STYLE.get(it.status, "")),
            (" (masked)" if it.masked else "", "dim"), "  ", (fmt.one_line(it.hypothesis, 200), "bold"),
            "\n", ("target ", "dim"), it.target_class or "all classes (global)",
            ("  parent ", "dim"), f"v{it.parent}" if it.parent is not None else fmt.DASH,
            ("  from ", "dim"), (fmt.sha(it.best_commit_before), "cyan"),
            ("  commit ", "dim"), (fmt.sha(it.commit), "cyan"),
            ("  started ", "dim"), fmt.when(it.started_at, data.last.started_at if data.last else None),
            ("  took ", "dim"), fmt.clock(it.finished_at - it.started_at) if it.finished_at
            else (fmt.clock(self.app.now - it.started_at) + " so far" if data.alive else fmt.DASH),
        )
        self.query_one("#detail-head", Static).update(head)
        gpu = it.record.get("gpu") or {}
        flagged = gpu.get("flagged_rounds") or []
        decision = [
            Text.assemble(("decision ", "dim"), (str(dec.get("verdict") or it.status), "bold"), ": ",
                          fmt.one_line(dec.get("reason"), 400), ("  by ", "dim"), str(dec.get("by") or "engine")),
            Text.assemble(("measured ", "dim"), f"{dec.get('rounds') or fmt.DASH} rounds",
                          f", {fmt.seconds(dec['gpu_seconds'])} of timed runs" if fmt.is_num(dec.get("gpu_seconds")) else "",
                          ("  repairs ", "dim"), str(it.repair_attempts),
                          ("  files ", "dim"), ", ".join(it.record.get("changed_files") or []) or fmt.DASH),
            Text.assemble(("GPU ", "dim"), str(gpu.get("name") or fmt.DASH),
                          (f"  {len(flagged)} round(s) flagged: " + "; ".join(
                              ", ".join(f["flags"]) for f in flagged[:3]) if flagged else "", "yellow")),
        ]
        if dec.get("flags"):
            decision.append(Text.assemble(("flags ", "dim"), ", ".join(dec["flags"]), style="magenta"))
        self.query_one("#detail-decision", Static).update(Text("\n").join(decision))
        rows = model.class_rows(it, data.meta.get("live_classes"))
        self.query_one("#detail-classes", Static).update(class_table(rows) if rows else Text("no per-class numbers",
                                                                                                style="dim"))
        self.refresh_bindings()

    # -- files (thread) -----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="detail-files")
    def _load_files(self) -> None:
        try:
            with RunReader(self.app.workspace(self.tag)) as reader:
                plan = reader.plan(self.version)
                diff = reader.diff(self.version)
                logs = reader.log_files(self.version)
                events = reader.events(version=self.version, limit=500)
        except Exception as e:  # noqa: BLE001 - shown in place of the files; the TUI stays up
            plan, diff, logs, events = f"cannot read this iteration's files: {type(e).__name__}: {e}", "", [], []
        sizes = []
        for p in logs:
            try:
                sizes.append(p.stat().st_size)
            except OSError:
                sizes.append(0)
        self.post_message(FilesRead(plan, diff, list(zip(logs, sizes, strict=True)), events))

    def on_files_read(self, msg: FilesRead) -> None:
        plan, diff, logs, events = msg.plan, msg.diff, msg.logs, msg.events
        self.query_one("#detail-plan", Static).update(
            Text(plan) if plan else Text("no plan was written for this iteration", style="dim"))
        self.query_one("#detail-diff", Static).update(
            Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=False)
            if diff else Text("no diff (nothing changed, or the baseline)", style="dim"))
        self._logs = [p for p, _ in logs]
        options = self.query_one("#detail-logs", OptionList)
        options.clear_options()
        for p, size in logs:
            options.add_option(Option(Text.assemble((p.name, "bold"), "  ", (fmt.size(size), "dim"))))
        if not logs:
            options.add_option(Option(Text("no log files", style="dim"), disabled=True))
        ref = self.data.last.started_at if self.data and self.data.last else None
        lines = [Text.assemble((fmt.when(e.t, ref), "dim"), " ", (f"{e.level:<5}", "yellow" if e.level != "info" else "dim"),
                               " ", (f"{e.kind:<9}", "cyan"), " ", e.message) for e in events]
        self.query_one("#detail-events", Static).update(Text("\n").join(lines) if lines else Text("no events", style="dim"))
        self.files_loaded = True

    # -- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        it = self.data.by_version.get(self.version) if self.data else None
        if action == "review":
            return bool(it and it.awaiting_review)
        if action == "restart":
            return it is not None and api.restart_point_problem(it, it.version) is None
        return True

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "detail-logs" and 0 <= event.option_index < len(self._logs):
            from kopt_supervisor.kopt_tui.screens.logs import LogScreen

            self.app.push_screen(LogScreen(self.tag, self._logs[event.option_index]))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        i = TABS.index((tabs.active or "tab-classes").removeprefix("tab-"))
        tabs.active = f"tab-{TABS[(i + step) % len(TABS)]}"

    def action_review(self) -> None:
        from kopt_supervisor.kopt_tui.screens.review import ReviewScreen

        self.app.push_screen(ReviewScreen(self.tag, self.version))

    def action_restart(self) -> None:
        from kopt_supervisor.kopt_tui.screens.restart import RestartScreen

        self.app.push_screen(RestartScreen(self.tag, self.version))

    def action_logs(self) -> None:
        from kopt_supervisor.kopt_tui.screens.logs import LogScreen

        it = self.data.by_version.get(self.version) if self.data else None
        if it is not None and it.status == "running":
            self.app.push_screen(LogScreen(self.tag))
        elif self._logs:
            self.app.push_screen(LogScreen(self.tag, self._logs[-1]))
        else:
            self.notify("no log files for this iteration", severity="warning")

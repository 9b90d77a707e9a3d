"""One iteration in full, one tab each: the decision (its flags explained, the keep decided
again in fresh processes, the profiler per class beside the bench, the diff scan's quoted
lines) and the per-class numbers; the plan beside the evidence it cites; the candidate's
diff; where the time went and what the agent cost, with its transcripts (`t` or `enter`
opens one); the log files; the events. Files are read in a thread worker; the numbers follow
the run live (an iteration in flight updates as its rounds come in)."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.widgets import Footer, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import RunReader, fmt
from kopt_supervisor.kopt_tui import iteration_view, model
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.screens.live import KoptScreen, renders_data
from kopt_supervisor.kopt_tui.widgets.class_deltas import class_table
from kopt_supervisor.kopt_tui.widgets.styles import STATUS_STYLE

TABS = ("decision", "plan", "diff", "cost", "logs", "events")
TONE = {"bad": "magenta", "good": "green", "": ""}


class FilesRead(Message):
    def __init__(self, plan: str, diff: str, logs: list[tuple[Path, int]], events: list) -> None:
        super().__init__()
        self.plan, self.diff, self.logs, self.events = plan, diff, logs, events


class DetailScreen(KoptScreen[None]):
    BINDINGS = [
        Binding("escape", "back", "back", tooltip="Back to the dashboard"),
        Binding("a", "review", "review", tooltip="Review this borderline candidate (accept, reject, more rounds)"),
        Binding(
            "R",
            "restart",
            "restart from here",
            key_display="R",
            tooltip="Masked partial restart from this iteration (asks first)",
        ),
        Binding("l", "logs", "logs", tooltip="Open this iteration's newest log (the live one while it runs)"),
        Binding(
            "t", "transcript", "transcript", tooltip="Read the agent's transcript of this iteration (the newest run)"
        ),
        Binding("left", "tab(-1)", "prev tab", show=False, tooltip="Previous tab"),
        Binding("right", "tab(1)", "next tab", show=False, tooltip="Next tab"),
    ]

    data: var[RunData | None] = var(None, init=False)

    def __init__(self, tag: str, version: int) -> None:
        super().__init__()
        self.tag = tag
        self.version = version
        self._logs: list[Path] = []
        self._shown: object = None
        """The iteration whose evidence, plan and costs are on screen."""
        self._transcripts: list[tuple[str, str]] = []
        """(label, path relative to the workspace) of each agent run that kept one."""
        self.files_loaded = False

    def compose(self) -> ComposeResult:
        yield Static(id="detail-head")
        with TabbedContent(id="detail-tabs"):
            with TabPane("decision", id="tab-decision"), VerticalScroll():
                yield Static(id="detail-decision")
                yield Static(id="detail-classes")
                yield Static(id="detail-evidence")
            with TabPane("plan", id="tab-plan"), Horizontal(id="plan-split"):
                with VerticalScroll(id="plan-text"):
                    yield Static(id="detail-plan", markup=False)
                with VerticalScroll(id="plan-evidence"):
                    yield Static(id="detail-citations")
            with TabPane("diff", id="tab-diff"), VerticalScroll():
                yield Static(id="detail-diff")
            with TabPane("cost", id="tab-cost"), VerticalScroll():
                yield Static(id="detail-cost")
                yield OptionList(id="detail-transcripts")
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
        dec = api.recorded_decision(it.record)
        head = Text.assemble(
            (f"v{it.version} ", "bold"),
            (it.status, STATUS_STYLE.get(it.status, "")),
            (" (masked)" if it.masked else "", "dim"),
            "  ",
            (fmt.one_line(it.hypothesis, 200), "bold"),
            "\n",
            ("proposed by ", "dim"),
            iteration_view.proposal_origin(it),
            "\n",
            ("target ", "dim"),
            it.target_class or "all classes (global)",
            ("  parent ", "dim"),
            f"v{it.parent}" if it.parent is not None else fmt.DASH,
            ("  from ", "dim"),
            (fmt.sha(it.best_commit_before), "cyan"),
            ("  commit ", "dim"),
            (fmt.sha(it.commit), "cyan"),
            ("  started ", "dim"),
            fmt.when(it.started_at, data.last.started_at if data.last else None),
            ("  took ", "dim"),
            fmt.clock(it.finished_at - it.started_at)
            if it.finished_at
            else (fmt.clock(self.app.now - it.started_at) + " so far" if data.alive else fmt.DASH),
        )
        self.query_one("#detail-head", Static).update(head)
        gpu = api.recorded_gpu(it.record)
        flagged = gpu.flagged_rounds
        decision = [
            Text.assemble(
                ("decision ", "dim"),
                (str(dec.verdict or it.status), "bold"),
                ": ",
                fmt.one_line(dec.reason, 400),
                ("  by ", "dim"),
                dec.by or "engine",
            ),
            Text.assemble(
                ("measured ", "dim"),
                f"{dec.rounds or fmt.DASH} rounds",
                f", {fmt.seconds(dec.gpu_seconds)} of timed runs" if dec.gpu_seconds is not None else "",
                ("  repairs ", "dim"),
                str(it.repair_attempts),
                ("  files ", "dim"),
                ", ".join(api.changed_files(it.record)) or fmt.DASH,
            ),
            Text.assemble(
                ("GPU ", "dim"),
                (gpu.gpu.name if gpu.gpu else "") or fmt.DASH,
                (
                    f"  {len(flagged)} round(s) flagged: " + "; ".join(", ".join(f) for f in flagged[:3])
                    if flagged
                    else "",
                    "yellow",
                ),
            ),
        ]
        if dec.flags:
            decision.append(Text.assemble(("flags ", "dim"), ", ".join(dec.flags), style="magenta"))
        self.query_one("#detail-decision", Static).update(Text("\n").join(decision))
        rows = model.class_rows(it, data.run_meta.live_classes)
        self.query_one("#detail-classes", Static).update(
            class_table(rows) if rows else Text("no per-class numbers", style="dim")
        )
        if it is not self._shown:  # the record moved (the poller keeps an unchanged iteration's object)
            self._shown = it
            runs = iteration_view.agent_rows(it)
            self.query_one("#detail-evidence", Static).update(evidence_text(iteration_view.decision_notes(it)))
            self.query_one("#detail-citations", Static).update(citations_text(iteration_view.plan_view(it)))
            self.query_one("#detail-cost", Static).update(cost_text(iteration_view.timing_rows(it), runs))
            self._show_transcripts(runs)
        self.refresh_bindings()

    def _show_transcripts(self, runs: tuple[iteration_view.AgentRow, ...]) -> None:
        kept = [(r.label, r.transcript) for r in runs if r.transcript]
        self._transcripts = kept
        options = self.query_one("#detail-transcripts", OptionList)
        options.clear_options()
        for (label, path), run in zip(kept, [r for r in runs if r.transcript], strict=True):
            options.add_option(
                Option(
                    Text.assemble(
                        ("transcript ", "dim"),
                        (label, "bold"),
                        "  ",
                        path,
                        ("  " + run.transcript_size if run.transcript_size else "", "dim"),
                        (" (cut to [propose].transcript_max_kib)" if run.transcript_cut else "", "yellow"),
                    )
                )
            )
        if not kept:
            options.add_option(
                Option(Text("no agent transcript was kept for this iteration", style="dim"), disabled=True)
            )

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
            Text(plan) if plan else Text("no plan was written for this iteration", style="dim")
        )
        self.query_one("#detail-diff", Static).update(
            Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=False)
            if diff
            else Text("no diff (nothing changed, or the baseline)", style="dim")
        )
        self._logs = [p for p, _ in logs]
        options = self.query_one("#detail-logs", OptionList)
        options.clear_options()
        for p, size in logs:
            options.add_option(Option(Text.assemble((p.name, "bold"), "  ", (fmt.size(size), "dim"))))
        if not logs:
            options.add_option(Option(Text("no log files", style="dim"), disabled=True))
        ref = self.data.last.started_at if self.data and self.data.last else None
        lines = [
            Text.assemble(
                (fmt.when(e.t, ref), "dim"),
                " ",
                (f"{e.level:<5}", "yellow" if e.level != "info" else "dim"),
                " ",
                (f"{e.kind:<9}", "cyan"),
                " ",
                e.message,
            )
            for e in events
        ]
        self.query_one("#detail-events", Static).update(
            Text("\n").join(lines) if lines else Text("no events", style="dim")
        )
        self.files_loaded = True

    # -- actions ------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        it = self.data.by_version.get(self.version) if self.data else None
        if action == "review":  # waiting for an answer (none sent yet: the review queue's)
            return it is not None and any(r.version == it.version for r in self.app.open_reviews(self.tag))
        if action == "restart":
            return it is not None and api.restart_point_problem(it, it.version) is None
        if action == "transcript":
            return bool(self._transcripts)
        return True

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "detail-logs" and 0 <= event.option_index < len(self._logs):
            from kopt_supervisor.kopt_tui.screens.logs import LogScreen

            self.app.push_screen(LogScreen(self.tag, self._logs[event.option_index]))
        elif event.option_list.id == "detail-transcripts" and 0 <= event.option_index < len(self._transcripts):
            self._open_transcript(*self._transcripts[event.option_index])

    def _open_transcript(self, label: str, path: str) -> None:
        from kopt_supervisor.kopt_tui.screens.transcript import TranscriptScreen

        self.app.push_screen(TranscriptScreen(self.tag, path, f"v{self.version} {label}"))

    def action_transcript(self) -> None:
        if self._transcripts:
            self._open_transcript(*self._transcripts[-1])
        else:
            self.notify("no agent transcript was kept for this iteration", severity="warning")

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        i = TABS.index((tabs.active or "tab-decision").removeprefix("tab-"))
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


# ---------------------------------------------------------------------------------------
# Text of the tabs (from the pure views of kopt_tui.iteration_view)


def evidence_text(notes: tuple[iteration_view.Note, ...]) -> Text:
    if not notes:
        return Text("")
    width = min(18, max(len(n.label) for n in notes))
    lines = [
        Text.assemble(
            (f"{n.label:<{width}} ", "bold " + TONE[n.tone] if n.label else ""),
            (n.text, TONE[n.tone] if n.tone == "bad" else ""),
        )
        for n in notes
    ]
    return Text("\n").join([Text("evidence", style="bold dim"), *lines])


def citations_text(p: iteration_view.PlanView) -> Text:
    lines = [
        Text.assemble(("hypothesis ", "dim"), (p.hypothesis or fmt.DASH, "bold")),
        Text.assemble(("target     ", "dim"), p.target or fmt.DASH),
        Text(""),
    ]
    if not p.assessed:
        lines.append(Text("the plan was not read against a context pack (no plan, or a failed proposal)", style="dim"))
        return Text("\n").join(lines)
    for flag, help_ in p.flags:
        lines.append(Text.assemble((f"{flag}: ", "bold magenta"), (help_ or flag, "magenta")))
    if p.reason:
        lines.append(Text(p.reason, style="magenta"))
    if p.citations:
        lines.append(Text(f"the evidence it cites ({len(p.citations)})", style="bold dim"))
        for c in p.citations:
            lines.append(Text.assemble((f"{c.kind:<7}", "dim"), (c.term, "bold cyan")))
            lines.append(Text.assemble("        ", c.evidence))
    elif not p.flags:
        lines.append(Text("the plan cites no evidence of the context pack", style="dim"))
    return Text("\n").join(lines)


def cost_text(timings: tuple[iteration_view.TimingRow, ...], runs: tuple[iteration_view.AgentRow, ...]) -> Text:
    lines = [Text("where the time went", style="bold dim")]
    if not timings:
        lines.append(Text("no phase timings recorded (an older kopt, or the iteration just started)", style="dim"))
    for t in timings:
        strong = t.phase in ("total", "kopt itself")
        lines.append(
            Text.assemble(
                (f"{t.phase:<12}", "bold" if strong else ""),
                f"{fmt.seconds(t.seconds, 2):>10}",
                (f"{fmt.share(t.share, 2):>7}" if t.share is not None else " " * 7, "dim"),
                (f"  {t.note}" if t.note else "", "dim"),
            )
        )
    lines += [Text(""), Text("what the agent cost", style="bold dim")]
    if not runs:
        lines.append(Text("no agent ran in this iteration", style="dim"))
    for r in runs:
        lines.append(
            Text.assemble(
                (f"{r.label:<10}", "bold"),
                (r.cost, "bold"),
                ("  wall ", "dim"),
                r.wall,
                ("  exit ", "dim"),
                r.exit,
                "  ",
                (r.agent, "cyan"),
                (f" {r.model}" if r.model else "", "dim"),
            )
        )
        lines.append(Text.assemble("          ", ("tokens ", "dim"), r.tokens))
        if r.session:
            lines.append(Text.assemble("          ", ("session ", "dim"), r.session))
        for n in r.notes:
            lines.append(Text.assemble("          ", (n, "yellow")))
    return Text("\n").join(lines)

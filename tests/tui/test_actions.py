"""Every TUI action, driven with Pilot on copies of the frozen engine runs, checked in run.db.

No engine runs these workspaces (the real probe says so), so `engine.api.send` queues what
needs an engine (accept, reject, more rounds) and applies the rest offline (pause, resume,
stop, restart with masking), exactly as `kopt accept|pause|...` would. test_live.py drives
the same keys against a real engine.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.app import KoptApp, RunUpdated
from kopt_supervisor.kopt_tui.commands import available_actions
from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.screens.detail import DetailScreen
from kopt_supervisor.kopt_tui.screens.help import HelpScreen
from kopt_supervisor.kopt_tui.screens.logs import LogScreen
from kopt_supervisor.kopt_tui.screens.restart import RestartScreen
from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
from kopt_supervisor.kopt_tui.screens.runs import RunsScreen
from kopt_supervisor.kopt_tui.widgets.history import HistoryTable
from tests.tui.fixtures import DONE, PENDING, REVIEW, offline_services, until

SIZE = (120, 40)


def store(root: Path, tag: str = REVIEW) -> Store:
    return Store(Workspace(root, tag).db_path, readonly=True)


def pending(root: Path, tag: str = REVIEW) -> list[tuple[str, dict]]:
    with store(root, tag) as s:
        return [(c.kind, c.args) for c in s.pending_commands()]


def meta(root: Path, key: str, tag: str = REVIEW) -> object:
    with store(root, tag) as s:
        return s.get(key)


def masked(root: Path, tag: str = REVIEW) -> list[int]:
    with store(root, tag) as s:
        return [it.version for it in s.iterations() if it.masked]


def dashboard(app: KoptApp) -> DashboardScreen | None:
    s = app.screen
    return s if isinstance(s, DashboardScreen) and s.data is not None else None


async def select_version(pilot, app: KoptApp, version: int) -> None:
    table = app.screen.query_one(HistoryTable)
    table.move_cursor(row=table.get_row_index(str(version)))
    await pilot.pause()


async def test_a_poll_reaching_a_screen_still_composing_waits_for_its_mount(runs_root: Path):
    # the poller's data arrives whenever the engine writes: a dashboard pushed a moment ago
    # has no widgets yet, and must take the data in on_mount, not crash on a missing table
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        data = app.screen.data
        fresh = DashboardScreen(REVIEW)
        app.push_screen(fresh)
        assert not fresh.is_mounted
        app.on_run_updated(RunUpdated(dataclasses.replace(data, generation=data.generation + 1)))
        await until(pilot, lambda: app.screen is fresh and fresh.data is not None, what="the new dashboard's data")
        assert fresh.query_one(HistoryTable).row_count == len(data.iterations)


async def test_a_dashboard_losing_its_widgets_takes_data_without_crashing(runs_root: Path):
    # when the app closes, a screen's widgets are removed one by one while the engine's
    # updates may still arrive (CI saw "No nodes match 'StateLine'" at the end of a test)
    from kopt_supervisor.kopt_tui.widgets.state_line import StateLine

    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        screen, data = app.screen, app.screen.data
        await screen.query_one(StateLine).remove()
        screen.data = dataclasses.replace(data, generation=data.generation + 1)
        app.now += 1.0  # a tick
        await pilot.pause()
        assert screen.query_one(HistoryTable).row_count == len(data.iterations)


async def test_accept_key_queues_an_accept_for_the_pending_candidate(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        assert app.screen.data.state == "crashed" and app.screen.data.pending_reviews == (PENDING,)
        await pilot.press("a")
        await until(pilot, lambda: pending(runs_root), what="the accept in run.db")
    [(kind, args)] = pending(runs_root)
    assert (kind, args["version"]) == ("accept", PENDING)
    with store(runs_root) as s:
        assert s.pending_commands()[0].source.startswith("tui:")


async def test_review_dialog_opens_by_itself_and_rejects_with_a_note(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root, auto_review=True))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review dialog")
        why = app.screen.query_one("#review-why").render()
        assert "undecided after 8 rounds" in str(why)
        assert "still straddles the ±min_effect band" in str(why)  # the flag's help, once
        await pilot.click("#review-note")
        await pilot.press(*"noisy")
        await pilot.click("#reject")
        await until(pilot, lambda: pending(runs_root), what="the reject in run.db")
        assert isinstance(app.screen, DashboardScreen)  # the dialog closed
    assert pending(runs_root) == [("reject", {"version": PENDING, "why": "noisy"})]


async def test_more_rounds_key(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("m")
        await until(pilot, lambda: pending(runs_root))
    assert pending(runs_root) == [("more_rounds", {"version": PENDING})]


async def test_pause_then_resume(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("p")
        await until(pilot, lambda: meta(runs_root, "paused") is True, what="paused in run.db")
        await until(pilot, lambda: app.screen.data.meta.get("paused") is True, what="the TUI to see it")
        await pilot.press("p")
        await until(pilot, lambda: meta(runs_root, "paused") is False, what="resumed in run.db")


async def test_stop_asks_first_and_stops_on_yes(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await pilot.pause(0.2)
        assert meta(runs_root, "state") == "awaiting_review"  # "no" changed nothing
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: meta(runs_root, "state") == "stopped", what="stopped in run.db")
        await until(pilot, lambda: app.screen.data.state == "stopped", what="the TUI to see it")
        assert "stopped by the engineer" in meta(runs_root, "stop_reason")


async def test_restart_from_the_selected_iteration_masks_the_later_ones(runs_root: Path):
    assert masked(runs_root) == [3]
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await select_version(pilot, app, 6)  # a regression: the dialog proposes v4, the kept point before it
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RestartScreen))
        preview = str(app.screen.query_one("#restart-preview").render())
        assert "masks 4 iteration(s)" in preview and "v5" in preview and "v8" in preview
        await pilot.press("ctrl+s")
        await until(pilot, lambda: masked(runs_root) != [3], what="the masks in run.db")
        await until(pilot, lambda: dashboard(app) and app.screen.data.iterations[5].masked, what="the TUI to see it")
        table = app.screen.query_one(HistoryTable)
        assert str(table.get_cell("6", "flag")) == "m"
    assert masked(runs_root) == [3, 5, 6, 7, 8]
    with store(runs_root) as s:
        assert any("restarted from v4" in e.message for e in s.events(limit=5))


async def test_restart_dialog_moves_between_points_and_cancels(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RestartScreen))
        points = app.screen.query_one("#restart-points")
        assert [points.get_option_at_index(i).id for i in range(points.option_count)] == ["0", "1", "4"]
        await pilot.press("up")  # v4 → v1: v2, v4..v8 would be masked (v3 already is)
        preview = str(app.screen.query_one("#restart-preview").render())
        assert "masks 6 iteration(s)" in preview and "BEST_COMMIT becomes" in preview
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
    assert masked(runs_root) == [3] and pending(runs_root) == []


async def test_q_detaches_without_touching_the_run(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    before = (runs_root / REVIEW / "run.db").read_bytes()
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 0
    assert (runs_root / REVIEW / "run.db").read_bytes() == before


async def test_help_lists_every_key_of_the_dashboard(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table_text = _table_text(app)
        for b in DashboardScreen.BINDINGS:
            assert b.tooltip in table_text, b.action
        assert "ctrl+p" in table_text
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


def _table_text(app: KoptApp) -> str:
    from rich.console import Console

    from kopt_supervisor.kopt_tui.screens.help import key_table

    console = Console(width=200, record=True)
    console.print(key_table())
    return console.export_text()


async def test_palette_offers_the_actions_and_runs_them(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        titles = [b.tooltip for b, _ in available_actions(app.screen)]
        for action in (
            "accept",
            "reject",
            "more_rounds",
            "pause",
            "stop",
            "restart",
            "logs",
            "start_engine",
            "detach",
            "help",
        ):
            assert any(b.action == action for b, _ in available_actions(app.screen)), action
        assert len(titles) == len(set(titles))
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.screen.query("CommandInput"), what="the palette")
        await pilot.press(*"reject the")
        await until(pilot, lambda: app.screen.query_one("CommandList").option_count, what="the palette's hits")
        await pilot.press("enter")
        await until(pilot, lambda: pending(runs_root), what="the palette's reject in run.db")
    assert pending(runs_root) == [("reject", {"version": PENDING})]


async def test_actions_that_do_not_apply_are_hidden(runs_root: Path):
    app = KoptApp(runs_root, DONE, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        actions = {b.action for b, _ in available_actions(app.screen)}
        assert {"accept", "reject", "more_rounds", "stop", "pause"}.isdisjoint(actions)
        assert {"start_engine", "restart", "logs", "detach"} <= actions
        await pilot.press("a")  # a hidden action does nothing
        await pilot.pause(0.2)
    assert pending(runs_root, DONE) == []


async def test_engine_gone_is_said_and_E_offers_to_start_it(runs_root: Path):
    started: list[Workspace] = []
    app = KoptApp(
        runs_root, REVIEW, services=offline_services(runs_root, start_engine=lambda ws: started.append(ws) or 31337)
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        line = str(app.screen.query_one("#state").render())
        assert "engine gone" in line and "E starts it" in line
        await pilot.press("E")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: started, what="the engine to be started")
    assert started == [Workspace(runs_root, REVIEW)]


async def test_log_viewer_follows_the_live_output(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    live = Path(str(meta(runs_root, "live_log")))
    assert live.is_file()
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await pilot.press("l")
        await until(pilot, lambda: isinstance(app.screen, LogScreen))
        log = app.screen.query_one("#log")
        await until(pilot, lambda: any("fake bench starting" in line for line in log.lines), what="the log")
        with open(live, "a") as f:
            f.write("round 9: 149.2 us\n")
        await until(pilot, lambda: any("round 9: 149.2 us" in line for line in log.lines), what="the new line")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


async def test_detail_shows_decision_plan_diff_logs_and_events(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        await select_version(pilot, app, 4)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.files_loaded)
        screen = app.screen
        assert "repairs 1" in str(screen.query_one("#detail-decision").render())
        assert "wrong_fixed_on_repair" in str(screen.query_one("#detail-plan").render())
        assert "kernel.json" in screen.query_one("#detail-diff").content.code
        assert "repair" in str(screen.query_one("#detail-events").render())
        assert screen.query_one("#detail-logs").option_count >= 1
        await pilot.press("right", "right")
        assert screen.query_one("TabbedContent").active == "tab-diff"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))


async def test_runs_home_lists_every_run_and_opens_one(runs_root: Path):
    app = KoptApp(runs_root, None, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs is not None)
        table = app.screen.query_one("DataTable")
        await until(pilot, lambda: table.row_count == 2)
        states = {str(table.get_cell(tag, "tag")): str(table.get_cell(tag, "state")) for tag in (REVIEW, DONE)}
        assert "crashed" in states[REVIEW] and "stopped" in states[DONE]
        assert str(table.get_cell(REVIEW, "reviews")) == f"v{PENDING}"
        table.move_cursor(row=table.get_row_index(DONE))
        await pilot.press("enter")
        await until(pilot, lambda: dashboard(app) and app.screen.tag == DONE)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen))


async def test_history_follows_the_engine_in_place(runs_root: Path):
    """New iterations are added and changed rows rewritten without rebuilding the table."""
    app = KoptApp(runs_root, DONE, services=offline_services(runs_root))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: dashboard(app))
        table = app.screen.query_one(HistoryTable)
        assert table.row_count == 4 and table.selected_version == 3
        with Store(Workspace(runs_root, DONE).db_path) as s:  # what an engine would write
            from kopt_supervisor.engine.store import Iteration

            s.save_iteration(Iteration(4, "running", phase="propose", parent=2, started_at=time.time()))
            s.set_masked([2], True)
        await until(pilot, lambda: table.row_count == 5, what="the new row")
        await until(pilot, lambda: str(table.get_cell("2", "flag")) == "m", what="the masked row")
        assert table.selected_version == 4  # the cursor followed the newest row
        assert str(table.get_cell("4", "status")) == "running"

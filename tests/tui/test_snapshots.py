"""SVG snapshots of the main screens at 80×24 and 160×48, on the frozen engine runs.

The clock, the engine probe and the GPU backend are fixed (tests/tui/fixtures.py), so every
value on screen comes from run.db. Update after an intended change with
`pytest tests/tui/test_snapshots.py --snapshot-update` and look at the SVGs before committing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kopt_supervisor.kopt_tui.app import KoptApp
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.screens.detail import DetailScreen
from kopt_supervisor.kopt_tui.screens.help import HelpScreen
from kopt_supervisor.kopt_tui.screens.restart import RestartScreen
from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
from kopt_supervisor.kopt_tui.screens.runs import RunsScreen
from kopt_supervisor.kopt_tui.screens.transcript import TranscriptScreen
from kopt_supervisor.kopt_tui.widgets.history import HistoryTable
from kopt_supervisor.kopt_tui.widgets.lanes import LanesPanel
from tests.tui.fixtures import (
    LANES,
    LANES4,
    LANES_REVIEW,
    PENDING,
    REVIEW,
    frozen_services,
    install_runs,
    until,
)

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def dashboard_ready(app: KoptApp) -> bool:
    s = app.screen_stack[1] if len(app.screen_stack) > 1 else None
    return isinstance(s, DashboardScreen) and s.data is not None and s.gpu_reading is not None


@pytest.mark.parametrize("size", SIZES)
def test_runs_home(snap_compare, runs_root: Path, size: tuple[int, int], monkeypatch):
    monkeypatch.chdir(runs_root.parent)  # the screen names its root: keep the temporary path out
    app = KoptApp(Path(runs_root.name), None, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, RunsScreen)
                and app.screen.runs is not None
                and app.screen.query_one("DataTable").row_count == 2
            ),
        )

    assert snap_compare(app, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_dashboard(snap_compare, runs_root: Path, size: tuple[int, int]):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_dashboard_with_lanes(snap_compare, tmp_path: Path):
    """fake-lanes: two lanes measuring at once, each on its own GPU (the third is busy)."""
    root = install_runs(tmp_path / "workspaces", (LANES,))
    app = KoptApp(root, LANES, services=frozen_services(root, alive=(LANES,), clock=LANES, gpus_file="gpus-lanes.json"))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))

    assert snap_compare(app, terminal_size=(160, 48), run_before=ready)


@pytest.mark.parametrize("size", [pytest.param((80, 24), id="80x24"), pytest.param((200, 60), id="200x60")])
def test_dashboard_four_lanes(snap_compare, tmp_path: Path, size: tuple[int, int]):
    """fake-lanes4: lane 0 awaits review, lane 1 measures (its interval after 2 looks), lane 2
    waits for a GPU (GPU 0 is busy, 1 to 3 are taken), lane 3 proposes."""
    root = install_runs(tmp_path / "workspaces", (LANES4,))
    app = KoptApp(
        root, LANES4, services=frozen_services(root, alive=(LANES4,), clock=LANES4, gpus_file="gpus-lanes4.json")
    )

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))
        # the lanes panel laid out above the history (4 lanes and its border), then the history
        # scrolled to the newest row it follows (at 80×24 it is shorter than the run)
        panel, table = app.screen.query_one(LanesPanel), app.screen.query_one(HistoryTable)
        await until(pilot, lambda: panel.outer_size.height == 6, what="the lanes panel laid out")
        await until(
            pilot, lambda: table.scroll_y == table.max_scroll_y and table.cursor_row == 3, what="the history at its end"
        )
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_review_queue(snap_compare, tmp_path: Path):
    """fake-lanes-review: two lanes' reviews queue; the oldest on screen, 80×24."""
    root = install_runs(tmp_path / "workspaces", (LANES_REVIEW,))
    app = KoptApp(
        root, LANES_REVIEW, services=frozen_services(root, alive=(LANES_REVIEW,), clock=LANES_REVIEW, auto_review=True)
    )

    async def ready(pilot):
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen) and app.screen.showing is not None)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_review_modal(snap_compare, runs_root: Path, size: tuple[int, int]):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root, auto_review=True))

    async def ready(pilot):
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen) and app.screen.data is not None)

    assert snap_compare(app, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_iteration_detail(snap_compare, runs_root: Path, size: tuple[int, int]):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press("up", "up", "up", "up", "enter")  # v4: kept after a correctness repair
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.files_loaded)

    assert snap_compare(app, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("tab", [pytest.param(1, id="plan"), pytest.param(3, id="cost")])
def test_iteration_detail_tab(snap_compare, runs_root: Path, size: tuple[int, int], tab: int):
    """v4's plan beside the evidence it cites, and where its time went with both agent runs."""
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press("up", "up", "up", "up", "enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.files_loaded)
        await pilot.press(*["right"] * tab)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_transcript(snap_compare, runs_root: Path):
    """v4's repair transcript, one event a line, at 80×24."""
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press("up", "up", "up", "up", "enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.files_loaded)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen.transcript is not None)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_restart_dialog(snap_compare, runs_root: Path, size: tuple[int, int]):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press("up", "up", "up", "R")  # cursor on v5: the nearest restart point is v4
        await until(pilot, lambda: isinstance(app.screen, RestartScreen))

    assert snap_compare(app, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, runs_root: Path, size: tuple[int, int]):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))

    async def ready(pilot):
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_pending_review_is_the_fixtures_borderline(runs_root: Path):
    """The snapshots above show v8 awaiting review: the frozen run must still say so."""
    from kopt_supervisor.engine.store import Store
    from kopt_supervisor.engine.workspace import Workspace

    with Store(Workspace(runs_root, REVIEW).db_path, readonly=True) as s:
        assert s.iteration(PENDING).status == "borderline"

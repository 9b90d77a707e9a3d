"""The dashboard's lanes panel, driven with Pilot on the frozen runs of several lanes
(fake-lanes: two lanes measuring at once when its engine was killed; fake-lanes4: lanes
reviewing, measuring, waiting for a GPU and proposing): one line per lane with its iteration,
what it does, its progress bar, its GPU and host, its interval, its review and its candidate,
fitted to 80 and 200 columns; hidden with one lane; following run.db as a lane goes idle; and
the model's rows from engine.api.lane_states."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.text import Text

from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.app import KoptApp
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.watch import RunCache
from kopt_supervisor.kopt_tui.widgets.lanes import LanesPanel, lane_lines
from tests.tui.fixtures import DONE, LANES, LANES4, frozen_services, install_runs, until


def lanes_root(tmp_path: Path) -> Path:
    return install_runs(tmp_path / "workspaces", (LANES, DONE))


def panel_text(app: KoptApp) -> list[str]:
    panel = app.screen.query_one(LanesPanel)
    return [line.rstrip() for line in panel.render().plain.splitlines()]


def lanes_shown(app: KoptApp) -> bool:
    s = app.screen
    return isinstance(s, DashboardScreen) and s.data is not None and s.query_one(LanesPanel).view is not None


def test_the_model_has_a_row_per_lane_and_none_with_one_lane(tmp_path: Path):
    root = lanes_root(tmp_path)
    data = RunCache(Workspace(root, LANES), probe=lambda ws: (True, 4242)).refresh()
    assert data is not None
    view = model.lanes_view(data)
    assert view is not None and view.live and view.busy == 2
    assert [(r.lane, r.version, r.what, r.gpu, r.host) for r in view.rows] == [
        (0, 5, "deciding", "GPU 1", "local"),
        (1, 6, "deciding", "GPU 2", "local"),
    ]
    assert all(r.step == "round 2 of up to 4" and (r.done, r.total) == (1, 4) for r in view.rows)
    # the GPU panel marks each lane's GPU (not the last gate's choice of whichever lane)
    gpus = model.gpus_view(data, None, 0.0)
    assert [(g.index, g.lanes, g.chosen) for g in gpus.rows] == [(0, (), False), (1, (0,), False), (2, (1,), False)]
    assert gpus.note.startswith("gate chose GPU 2 for lane 1")
    done = RunCache(Workspace(root, DONE), probe=lambda ws: (False, None)).refresh()
    assert done is not None and model.lanes_view(done) is None and done.lanes == ()


def test_a_lane_row_from_junk_shows_what_it_can():
    row = model.lane_row(
        {
            "lane": 3,
            "version": "7",
            "phase": "gate",
            "done": "1",
            "total": 4,
            "gpu": {"index": True, "name": "no GPU (CPU-only target)"},
            "host": None,
        }
    )
    assert (row.version, row.what, row.done, row.gpu, row.host) == (
        None,
        "taking its GPU",
        None,
        "no GPU (CPU-only target)",
        "",
    )
    waiting = model.lane_row({"lane": 1, "phase": "waiting_gpu", "step": "lane 1: no idle GPU", "gpu": None})
    assert (waiting.what, waiting.step, waiting.gpu) == ("waiting for an idle GPU", "", "")


async def test_the_dashboard_shows_a_line_per_lane_and_follows_a_lane_going_idle(tmp_path: Path):
    root = lanes_root(tmp_path)
    services = frozen_services(root, alive=(LANES,), clock=LANES, gpus_file="gpus-lanes.json")
    app = KoptApp(root, LANES, services=services)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: lanes_shown(app), what="the lanes panel")
        screen = app.screen
        assert screen.has_class("-lanes") and screen.query_one(LanesPanel).display
        # 80 columns: the short words, no bar; every lane on this host, so the title says it once
        assert screen.query_one(LanesPanel).border_title == "lanes · 2 of 2 busy · on this host"
        lines = panel_text(app)
        assert len(lines) == 2
        assert lines[0] == "lane 0  v5  GPU 1  deciding 2/4  gain5: scripted hypothesis for v5"
        assert lines[1] == "lane 1  v6  GPU 2  deciding 2/4  loss5: scripted hypothesis for v6"
        # lane 1's iteration ends: the panel follows run.db, the lane idle on the GPU it last had
        with Store(Workspace(root, LANES).db_path) as s:
            v6 = s.iteration(6)
            s.save_iteration(dataclasses.replace(v6, status="interrupted", phase="done", finished_at=v6.started_at + 9))
        await until(pilot, lambda: "idle" in panel_text(app)[1], what="lane 1 idle")
        assert panel_text(app)[1] == "lane 1  —   GPU 2  idle"
        assert screen.query_one(LanesPanel).border_title == "lanes · 1 of 2 busy · on this host"
        assert panel_text(app)[0].startswith("lane 0  v5")
        # paused: the steps shown are the ones the pause preempted, dimmed, and the title says so
        with Store(Workspace(root, LANES).db_path) as s:
            s.set_many({"state": "paused", "paused": True})
        await until(
            pilot, lambda: screen.query_one(LanesPanel).border_title == "lanes · paused · on this host", what="paused"
        )
        assert not screen.query_one(LanesPanel).view.live


async def test_with_one_lane_the_panel_stays_hidden(tmp_path: Path):
    root = lanes_root(tmp_path)
    app = KoptApp(root, DONE, services=frozen_services(root, alive=(), clock=LANES))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.data is not None)
        panel = app.screen.query_one(LanesPanel)
        assert panel.view is None and not app.screen.has_class("-lanes")
        assert panel.region.height == 0  # takes no room


async def test_more_lanes_than_rows_say_how_many_are_not_shown(tmp_path: Path):
    root = lanes_root(tmp_path)
    app = KoptApp(root, LANES, services=frozen_services(root, alive=(LANES,), clock=LANES, gpus_file="gpus-lanes.json"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: lanes_shown(app), what="the lanes panel")
        panel = app.screen.query_one(LanesPanel)
        rows = panel.view.rows
        many = model.LanesView(tuple(dataclasses.replace(rows[i % 2], lane=i) for i in range(8)), True)
        panel.view = many
        await pilot.pause()
        lines = panel_text(app)
        room = panel.size.height
        assert room < 8 and len(lines) == room  # a short terminal: -short caps the panel
        assert lines[-1] == f"+{8 - room + 1} more lanes: kopt status shows every one"
        assert lines[0].startswith("lane 0")


async def test_without_an_engine_the_lanes_are_what_they_did_last_dimmed(tmp_path: Path):
    root = lanes_root(tmp_path)  # fake-lanes' engine was killed: crashed
    app = KoptApp(root, LANES, services=frozen_services(root, alive=(), clock=LANES, gpus_file="gpus-lanes.json"))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: lanes_shown(app), what="the lanes panel")
        panel = app.screen.query_one(LanesPanel)
        assert panel.border_title == "lanes · no engine" and not panel.view.live  # 120 columns: hosts shown
        text = panel.render()
        assert text.plain.startswith("lane 0  v5")
        dimmed = {i for span in text.spans if "dim" in str(span.style) for i in range(span.start, span.end)}
        assert all(i in dimmed for i, ch in enumerate(text.plain) if ch != "\n")  # every character


def four_lanes_view(tmp_path: Path) -> model.LanesView:
    root = install_runs(tmp_path / "workspaces", (LANES4,))
    data = RunCache(Workspace(root, LANES4), probe=lambda ws: (True, 4242)).refresh()
    assert data is not None
    view = model.lanes_view(data)
    assert view is not None
    return view


def test_four_lanes_each_show_lane_gpu_phase_interval_review_and_candidate(tmp_path: Path):
    """fake-lanes4 (the real engine, killed with lane 0 in review, lane 1 measuring, lane 2
    waiting for a GPU and lane 3 proposing): every field of every lane, at 80 and 200 columns."""
    view = four_lanes_view(tmp_path)
    assert (view.busy, view.needing_you) == (3, 1)
    narrow = [line.plain for line in lane_lines(view.rows, 76)]  # an 80-column terminal's panel
    assert narrow == [
        "lane 0  v1  GPU 1  review           -70.0% faster [-83.4, -45.7]  skip the …",
        "lane 1  v2  GPU 2  deciding 3/4     -1.1% faster [-18.8, +20.5]   split K o…",
        "lane 2  —   —      waiting for GPU",
        "lane 3  v3  GPU 3  proposing",
    ]
    wide = [line.plain for line in lane_lines(view.rows, 196)]  # 200 columns: the host, the bar, the words
    assert wide[0] == (
        "lane 0  v1  GPU 1  local            awaiting your review            "
        "cls=large -70.0% faster [-83.4, -45.7]  skip the softmax rescale in the inner loop"
    )
    assert wide[1] == (
        "lane 1  v2  GPU 2  local  ████░░░░  deciding · round 3 of up to 4   "
        "cls=large -1.1% faster [-18.8, +20.5]   split K over two warps and reduce in shared memory"
    )
    assert wide[2] == "lane 2  —   —      —                waiting for an idle GPU"
    assert wide[3] == "lane 3  v3  GPU 3  local            proposing · proposer (command)"

    # the styles say what needs the engineer, what is settled and what is not
    def styles(line: Text) -> dict[str, str]:
        return {line.plain[s.start : s.end].strip(): str(s.style) for s in line.spans}

    lines = lane_lines(view.rows, 196)
    assert styles(lines[0])["awaiting your review"] == "bold magenta"
    assert styles(lines[0])["cls=large -70.0% faster [-83.4, -45.7]"] == "green"  # improved
    assert styles(lines[1])["cls=large -1.1% faster [-18.8, +20.5]"] == "yellow"  # undecided so far
    assert styles(lines[2])["waiting for an idle GPU"] == "yellow"
    for width in (20, 40, 76, 120, 196):  # never wider than the panel
        assert all(line.cell_len <= width for line in lane_lines(view.rows, width))


def test_a_lane_on_another_host_keeps_the_host_column_on_a_narrow_panel(tmp_path: Path):
    rows = four_lanes_view(tmp_path).rows
    ray = (dataclasses.replace(rows[0], host="gpu-node-b"), *rows[1:])
    assert lane_lines(ray, 76)[0].plain.startswith("lane 0  v1  GPU 1  gpu-node-b  review ")
    assert lane_lines(ray, 76)[1].plain.startswith("lane 1  v2  GPU 2  local       deciding 3/4 ")


async def test_the_dashboard_shows_four_lanes_at_80x24_and_says_where_they_run(tmp_path: Path):
    root = install_runs(tmp_path / "workspaces", (LANES4,))
    app = KoptApp(
        root, LANES4, services=frozen_services(root, alive=(LANES4,), clock=LANES4, gpus_file="gpus-lanes4.json")
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: lanes_shown(app), what="the lanes panel")
        panel = app.screen.query_one(LanesPanel)
        assert panel.border_title == "lanes · 3 of 4 busy · 1 awaiting review · on this host"
        assert [line.split("  ")[0] for line in panel_text(app)] == ["lane 0", "lane 1", "lane 2", "lane 3"]
        await pilot.resize_terminal(200, 60)
        await until(
            pilot, lambda: panel.border_title == "lanes · 3 of 4 busy · 1 awaiting review", what="the host column back"
        )
        assert "local" in panel_text(app)[0]

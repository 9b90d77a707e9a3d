"""The TUI against a real engine (`kopt run --headless` on the fake target): accept a
borderline candidate, detach, attach again, pause and resume, restart with masking, stop,
start the engine again — each checked by what the engine did in run.db."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import engine_alive
from kopt_supervisor.engine.store import Store
from kopt_supervisor.kopt_tui.app import KoptApp, Services
from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.screens.restart import RestartScreen
from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
from kopt_supervisor.kopt_tui.widgets.history import HistoryTable
from tests.tui.fixtures import until
from tests.tui.live import (
    BORDERLINE_NOISE,
    cli,
    init_run,
    iterations,
    kill_engine,
    pending_review,
    state,
    wait_for,
)

SIZE = (120, 40)


def command_status(ws, kind: str) -> list[str]:
    with Store(ws.db_path, readonly=True) as s:
        return [r["status"] for r in s.db.execute("SELECT status FROM commands WHERE kind = ?", (kind,))]


@pytest.mark.slow
async def test_tui_drives_a_real_engine(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", BORDERLINE_NOISE)
    repo, root = fake_env(
        ["gain05", "gain5", "loss5", "gain5", "loss5", "gain5", "loss5"],
        toml_replace={"review_timeout_s = 2": "review_timeout_s = 120"},
    )
    ws = init_run(repo, root, "live")
    services = Services(poll_s=0.1, auto_review=True)
    try:
        started = cli("--root", str(root), "run", "live", "--headless")
        assert started.returncode == 0, started.stderr
        v = wait_for(lambda: pending_review(ws), 60, "a borderline candidate", ws)

        # 1. The review dialog opens by itself; `a` accepts; the engine commits the candidate.
        app = KoptApp(root, "live", services=services)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review dialog")
            await pilot.press("a")
            await until(pilot, lambda: iterations(ws)[v].status == "accepted", 30, "the engine to accept")
            assert iterations(ws)[v].commit  # kept: committed on the run's branch
            # 2. `q` detaches: the app ends, the engine goes on.
            await pilot.press("q")
        assert app.return_value == 0
        assert engine_alive(ws)[0]
        last = iterations(ws)[-1].version
        wait_for(lambda: iterations(ws)[-1].version > last, 30, "the engine to advance after the detach")

        # 3. Attach again: pause, then resume, acted on by the engine.
        app = KoptApp(root, "live", services=Services(poll_s=0.1, auto_review=False))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.data is not None)
            await pilot.press("p")
            await until(pilot, lambda: state(ws) == "paused", 20, "the engine to pause")
            await until(pilot, lambda: app.screen.data.state == "paused", 5, "the TUI to show it")
            await pilot.press("p")
            await until(
                pilot, lambda: state(ws) in ("running", "waiting_gpu", "awaiting_review"), 20, "the engine to resume"
            )
            assert command_status(ws, "pause") == ["done"] and command_status(ws, "resume") == ["done"]

            # 4. Restart from the accepted iteration: the engine masks every later one.
            table = app.screen.query_one(HistoryTable)
            table.move_cursor(row=table.get_row_index(str(v)))
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, RestartScreen))
            later = [it.version for it in iterations(ws) if it.version > v]
            await pilot.press("ctrl+s")
            await until(pilot, lambda: command_status(ws, "restart") == ["done"], 20, "the engine to restart")
            by_version = {it.version: it for it in iterations(ws)}
            assert later and all(by_version[x].masked for x in later)
            assert not by_version[v].masked

            # 5. Stop (confirmed): the engine ends cleanly and releases the workspace.
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await until(pilot, lambda: not engine_alive(ws)[0], 30, "the engine to stop")
            assert state(ws) == "stopped"

            # 6. E starts the engine again from the TUI.
            # the TUI's reading after the engine's process is gone (E does nothing while it looks alive)
            await until(
                pilot,
                lambda: app.screen.data.state == "stopped" and not app.screen.data.alive,
                15,
                "the TUI to see the stop",
            )
            await pilot.press("E")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await until(pilot, lambda: engine_alive(ws)[0], 30, "the engine to start again")
    finally:
        kill_engine(ws)


@pytest.mark.slow
async def test_tui_answers_two_lanes_reviews_each_in_its_own_lane(fake_env, monkeypatch, tmp_path):
    """A real engine with two lanes ([parallel] lanes = 2, two fake idle GPUs) leaves both
    lanes' candidates awaiting review at once; the TUI's queue shows the older first: `a`
    accepts it, `r` rejects the other, and the engine applies each answer to its own lane's
    iteration (the accepted one is committed, the rejected one is not)."""
    import json

    from tests.lanes.test_lanes import FAST_GATE, gpus
    from tests.reliability.helpers import FAST

    monkeypatch.setenv("FAKE_NOISE", BORDERLINE_NOISE)
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps([gpus(2)]))
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(fake))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    repo, root = fake_env(
        ["gain05", "gain05", "loss5", "loss5"],
        toml_replace={**FAST, **dict([FAST_GATE]), "review_timeout_s = 2": "review_timeout_s = 300"},
        extra_toml="\n[parallel]\nlanes = 2\n",
    )
    ws = init_run(repo, root, "lanes")
    try:
        # four candidates, then the run ends: a fake proposer starts its script again, and on a
        # loaded machine lane 0 had reached a fifth borderline candidate before the TUI's second
        # answer, so the queue never emptied (runs FL and FO)
        started = cli("--root", str(root), "run", "lanes", "--headless", "--max-iters", "4")
        assert started.returncode == 0, started.stderr
        wait_for(lambda: len(api.status(ws)["pending_reviews"]) == 2, 120, "both lanes awaiting review", ws)
        first, second = api.status(ws)["reviews"]
        assert {first["lane"], second["lane"]} == {0, 1}
        app = KoptApp(root, "lanes", services=Services(poll_s=0.1, auto_review=True, review_arm_s=0.0))
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: isinstance(app.screen, ReviewScreen) and app.screen.showing is not None,
                what="the review queue",
            )
            assert app.screen.showing == first["version"]
            await pilot.press("a")
            await until(pilot, lambda: app.screen.showing == second["version"], what="the next review")
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="the queue closing")
            its = lambda: {it.version: it for it in iterations(ws)}  # noqa: E731
            await until(
                pilot,
                lambda: its()[first["version"]].status == "accepted" and its()[second["version"]].status == "rejected",
                60,
                "the engine to apply both answers",
            )
        by_version = its()
        assert by_version[first["version"]].commit and not by_version[second["version"]].commit
        assert by_version[first["version"]].record["lane"] == first["lane"]
        assert by_version[second["version"]].record["lane"] == second["lane"]
        with Store(ws.db_path, readonly=True) as s:
            rows = [
                (r["kind"], json.loads(r["args"])["version"], r["status"])
                for r in s.db.execute("SELECT kind, args, status FROM commands WHERE kind IN ('accept', 'reject')")
            ]
        assert rows == [("accept", first["version"], "done"), ("reject", second["version"], "done")]
    finally:
        kill_engine(ws)

"""Reviews from several lanes queue in the TUI, driven with Pilot on fake-lanes-review (a run
the real engine made: v1 in lane 0 and v2 in lane 1 both await the engineer; no engine runs it
now, so answers are queued in run.db as `kopt accept` would queue them).

Each answer must name the review on screen and only that one: the tests read the command rows
back from run.db. The hostile cases: a review answered by the CLI, or closed by the engine,
while the TUI still shows it (the TUI's poller held back, so its view is stale when the key
is pressed); a key pressed twice; a forged answer row.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.app import KoptApp
from kopt_supervisor.kopt_tui.cli import main as kopt
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
from kopt_supervisor.kopt_tui.widgets.lanes import LanesPanel
from tests.tui.fixtures import LANES_REVIEW, install_runs, offline_services, until

SIZE = (120, 40)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return install_runs(tmp_path / "workspaces", (LANES_REVIEW,))


def commands(root: Path) -> list[tuple[str, int, str]]:
    """(kind, version, source) of every command row, in the order they were sent."""
    with Store(Workspace(root, LANES_REVIEW).db_path, readonly=True) as s:
        return [
            (r["kind"], json.loads(r["args"]).get("version"), r["source"].split(":")[0])
            for r in s.db.execute("SELECT kind, args, source FROM commands ORDER BY id")
        ]


def review(app: KoptApp) -> ReviewScreen | None:
    s = app.screen
    return s if isinstance(s, ReviewScreen) and s.data is not None and s.showing is not None else None


def title(app: KoptApp) -> str:
    return str(app.screen.query_one("#review-title").render())


def lanes(app: KoptApp) -> list[str]:
    screen = next(s for s in app.screen_stack if isinstance(s, DashboardScreen))
    return [line.rstrip() for line in screen.query_one(LanesPanel).render().plain.splitlines()]


def edit(root: Path, version: int, **changes: Any) -> None:
    """Change an iteration through the engine's store (as the engine would write it)."""
    with Store(Workspace(root, LANES_REVIEW).db_path) as s:
        it = s.iteration(version)
        record = changes.pop("record", None)
        s.save_iteration(dataclasses.replace(it, **changes, record={**it.record, **(record or {})}))


async def test_the_queue_shows_each_review_in_turn_and_each_key_answers_the_one_on_screen(root: Path):
    app = KoptApp(root, LANES_REVIEW, services=offline_services(root, auto_review=True, review_arm_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: review(app), what="the review queue")
        assert app.screen.showing == 1 and title(app) == "Review 1 of 2 — lane 0 · v1: borderline"
        body = str(app.screen.query_one("#review-why").render())
        assert "on GPU 1 (local)" in body and "then v2 (lane 1) · n shows the next" in body
        assert lanes(app)[0].startswith("lane 0  v1  GPU 1  local") and "awaiting your review · 1 of 2" in lanes(app)[0]
        assert "awaiting your review · 2 of 2" in lanes(app)[1]
        await pilot.press("a")
        await until(pilot, lambda: commands(root) == [("accept", 1, "tui")], what="the accept of v1")
        assert app.screen.showing == 2 and title(app) == "Review lane 1 · v2: borderline"
        await until(pilot, lambda: "accept sent" in lanes(app)[0], what="lane 0's answer on the dashboard")
        await pilot.click("#review-note")
        await pilot.press(*"flaky")
        await pilot.press("tab", "tab")  # off the note, onto the buttons: r is a key again
        await pilot.press("r")
        await until(pilot, lambda: len(commands(root)) == 2, what="the reject of v2")
        assert isinstance(app.screen, DashboardScreen)  # the queue is empty: the dialog closed
        await until(pilot, lambda: "reject sent" in lanes(app)[1], what="lane 1's answer on the dashboard")
    assert commands(root) == [("accept", 1, "tui"), ("reject", 2, "tui")]
    with Store(Workspace(root, LANES_REVIEW).db_path, readonly=True) as s:
        assert [c.args for c in s.pending_commands()] == [{"version": 1}, {"version": 2, "why": "flaky"}]


async def test_the_queue_follows_the_order_the_reviews_opened_not_the_versions(root: Path):
    edit(root, 2, record={"review": {"opened_at": 1.0e9, "deadline": 2.0e9, "reason": "opened first"}})
    app = KoptApp(root, LANES_REVIEW, services=offline_services(root, auto_review=True, review_arm_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: review(app), what="the review queue")
        assert app.screen.showing == 2 and title(app) == "Review 1 of 2 — lane 1 · v2: borderline"
        await pilot.press("n")  # look at the next one first: the key answers the one on screen
        await until(pilot, lambda: app.screen.showing == 1)
        assert title(app) == "Review 2 of 2 — lane 0 · v1: borderline"
        await pilot.press("m")
        await until(pilot, lambda: commands(root), what="more rounds for v1")
        assert app.screen.showing == 2
    assert commands(root) == [("more_rounds", 1, "tui")]


async def test_a_review_answered_by_the_cli_while_shown_is_not_answered_again_nor_the_next(root: Path):
    # the poller looks only when told to (a send, a screen change): the TUI's view goes stale;
    # a review that replaced another takes no answer for 30 s here (whatever the machine's load)
    app = KoptApp(
        root, LANES_REVIEW, services=offline_services(root, auto_review=True, poll_s=3600.0, review_arm_s=30.0)
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: review(app), what="the review queue")
        screen = app.screen
        assert screen.showing == 1
        assert kopt(["--root", str(root), "accept", LANES_REVIEW, "v1"]) == 0  # the engineer, from a shell
        assert app.open_reviews(LANES_REVIEW)[0].version == 1  # the TUI has not seen it
        await pilot.press("r")  # meant for v1, on screen
        # refused by engine.api.send (v1 has an answer waiting); the TUI looks again and moves on
        await until(
            pilot,
            lambda: screen.showing == 2 and screen.data.reviews[0].answer is not None,
            what="the refusal and a fresh look",
        )
        await pilot.press("r", "a")  # v2 just came on screen: these keys answer nothing
        await pilot.pause(0.2)
        assert screen.showing == 2 and app.screen is screen
    assert commands(root) == [("accept", 1, "cli")]


async def test_a_review_the_engine_closed_while_shown_takes_no_answer_and_the_next_none(root: Path):
    app = KoptApp(
        root, LANES_REVIEW, services=offline_services(root, auto_review=True, poll_s=3600.0, review_arm_s=30.0)
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: review(app), what="the review queue")
        screen = app.screen
        edit(root, 1, status="rejected", phase="done", finished_at=time.time())  # the review policy decided it
        await pilot.press("a")
        await until(
            pilot,
            lambda: screen.showing == 2 and 1 not in screen.data.pending_reviews,
            what="a fresh look after the refusal",
        )
        await pilot.press("a")  # v2 replaced v1 a moment ago: answers nothing
        await pilot.pause(0.2)
        assert screen.showing == 2
    assert commands(root) == []


async def test_a_key_pressed_twice_answers_one_review_only(root: Path):
    # 2 s to read a review that replaced another (0.6 s by default: longer here, for a loaded machine)
    app = KoptApp(root, LANES_REVIEW, services=offline_services(root, auto_review=True, review_arm_s=2.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: review(app), what="the review queue")
        screen = app.screen
        await pilot.press("a", "a")
        await until(pilot, lambda: commands(root), what="the accept of v1")
        await pilot.pause(0.2)
        assert commands(root) == [("accept", 1, "tui")] and screen.showing == 2
        await pilot.pause(app.services.review_arm_s)  # v2 has been on screen long enough to be read
        await pilot.press("r")
        await until(pilot, lambda: len(commands(root)) == 2, what="the reject of v2")
    assert commands(root) == [("accept", 1, "tui"), ("reject", 2, "tui")]


async def test_dashboard_keys_open_the_queue_when_several_reviews_wait(root: Path):
    app = KoptApp(root, LANES_REVIEW, services=offline_services(root, auto_review=False, review_arm_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.data is not None)
        state = str(app.screen.query_one("#state").render())
        assert "⚑ v1 (lane 0), v2 (lane 1) await your review" in state  # beside "engine gone": none runs
        await pilot.press("a")  # the cursor sits on v2 (it follows the newest): nothing is answered blind
        await until(pilot, lambda: review(app), what="the review queue")
        assert app.screen.showing == 1 and commands(root) == []
        await pilot.press("a")
        await until(pilot, lambda: commands(root), what="the accept of v1")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await until(
            pilot,
            lambda: (
                "v2 (lane 1) awaits your review; v1 (lane 0): accept sent"
                in str(app.screen.query_one("#state").render())
            ),
            what="the state line",
        )
        await pilot.press("r")  # one review waits now: the dashboard key answers it
        await until(pilot, lambda: len(commands(root)) == 2, what="the reject of v2")
        await until(pilot, lambda: app.screen.data.open_reviews == (), what="both answered")
        await pilot.press("a")  # nothing waits: nothing is sent
        await pilot.pause(0.2)
    assert commands(root) == [("accept", 1, "tui"), ("reject", 2, "tui")]


async def test_a_forged_answer_row_does_not_take_a_review_out_of_the_queue(root: Path):
    with Store(Workspace(root, LANES_REVIEW).db_path) as s:  # not sealed with the run's secret
        s.send_command("accept", {"version": 1}, source="intruder")
    app = KoptApp(root, LANES_REVIEW, services=offline_services(root, auto_review=True, review_arm_s=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: review(app), what="the review queue")
        assert app.screen.showing == 1 and title(app).startswith("Review 1 of 2")
        await pilot.press("r")
        await until(pilot, lambda: len(commands(root)) == 2, what="the engineer's answer")
    assert commands(root) == [("accept", 1, "intruder"), ("reject", 1, "tui")]

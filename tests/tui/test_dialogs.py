"""The dialogs at 80×24, driven with Pilot on the frozen fake-review run (v8 awaits review):
`?` opens the help over any dialog (Textual stops the app's bindings at a modal screen), the
review's keyboard order starts on its details, its per-class table stays readable, and the
restart list shows the point it has chosen.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input, OptionList

from kopt_supervisor.kopt_tui.app import KoptApp
from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.screens.help import HelpScreen
from kopt_supervisor.kopt_tui.screens.restart import RestartScreen
from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
from tests.tui.fixtures import PENDING, REVIEW, frozen_services, until

SMALL = (80, 24)


def shown_lines(widget: Widget) -> list[str]:
    """The text the widget shows now (its scrolled window, for a scrolling one)."""
    width, height = widget.outer_size
    return [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]


def review_ready(app: KoptApp) -> bool:
    s = app.screen
    return isinstance(s, ReviewScreen) and s.data is not None and s.showing is not None


def dashboard_ready(app: KoptApp) -> bool:
    s = app.screen
    return isinstance(s, DashboardScreen) and s.data is not None


async def test_question_mark_opens_the_help_over_the_review_dialog_which_keeps_its_note(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root, auto_review=True))
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: review_ready(app), what="the review dialog")
        dialog = app.screen
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), timeout=5, what="the help over the dialog")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dialog, timeout=5, what="the dialog back")

        await pilot.click("#review-note")
        await pilot.press(*"noisy?")  # in the note, ? is a character of the note
        assert app.screen is dialog and dialog.query_one("#review-note", Input).value == "noisy?"
        await pilot.press("tab")  # off the note: ? is the help key again
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), timeout=5, what="the help from the buttons")
        await pilot.press("question_mark")  # closes the help, as esc does
        await until(pilot, lambda: app.screen is dialog, timeout=5, what="the dialog back")
        assert dialog.query_one("#review-note", Input).value == "noisy?" and dialog.showing == PENDING


@pytest.mark.parametrize("key, dialog_type", [("R", RestartScreen), ("s", ConfirmScreen)], ids=["restart", "stop"])
async def test_question_mark_opens_the_help_over_the_other_dialogs(runs_root: Path, key: str, dialog_type: type):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, dialog_type), what="the dialog")
        dialog = app.screen
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), timeout=5, what="the help over the dialog")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is dialog, timeout=5, what="the dialog back")


async def test_the_review_dialog_starts_on_its_details_then_tab_reaches_the_note_and_the_buttons(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root, auto_review=True))
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: review_ready(app), what="the review dialog")
        details = app.screen.query_one(".dialog-scroll")
        assert app.focused is details
        assert details.max_scroll_y > 0  # at 80×24 the per-class table is below the fold
        await pilot.press("pagedown")
        await until(pilot, lambda: details.scroll_y > 0, timeout=5, what="PageDown to scroll the details")
        order = []
        for _ in range(5):
            await pilot.press("tab")
            order.append(app.focused.id if app.focused else None)
        assert order == ["review-note", "accept", "reject", "more_rounds", "later"]


async def test_the_review_dialogs_class_table_is_readable_at_80_columns(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root, auto_review=True))
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: review_ready(app), what="the review dialog")
        await pilot.pause(0.1)
        table = app.screen.query_one("#review-classes")
        text = "\n".join(shown_lines(table))
        assert "…" not in text, text
        header, large, small = (line.split() for line in text.splitlines()[:3])
        assert header[:1] == ["class"] and {"Δ", "interval", "verdict"} <= set(header), text
        assert large[0] == "cls=large" and "-0.66%" in large and "[-2.0," in large and "undecided" in large, text
        assert small[0] == "cls=small" and "+0.22%" in small and "+1.2]" in small, text


async def test_the_restart_dialog_shows_the_point_it_has_chosen(runs_root: Path):
    app = KoptApp(runs_root, REVIEW, services=frozen_services(runs_root))
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: dashboard_ready(app))
        await pilot.press("up", "up", "up", "R")  # cursor on v5: the nearest restart point is v4
        await until(pilot, lambda: isinstance(app.screen, RestartScreen), what="the restart dialog")
        await pilot.pause(0.1)
        points = app.screen.query_one(OptionList)
        assert str(app.screen.query_one("#confirm").label) == "Restart from v4 (ctrl+s)"

        def shown() -> list[str]:
            return re.findall(r"\bv\d+\b", "\n".join(shown_lines(points)))

        assert "v4" in shown() and "v0" not in shown(), shown()
        await pilot.press("home")
        await until(pilot, lambda: "v0" in shown(), timeout=5, what="v0 in view")
        assert str(app.screen.query_one("#confirm").label) == "Restart from v0 (ctrl+s)"
        await pilot.press("end")
        await until(pilot, lambda: "v4" in shown(), timeout=5, what="v4 in view again")

"""docs/user-guide.md stays true: its screenshots are the current snapshots and its key
table names every key the screens bind."""

from __future__ import annotations

import re

from textual.binding import Binding

from kopt_supervisor.kopt_tui.app import KoptApp
from kopt_supervisor.kopt_tui.screens.confirm import ConfirmScreen
from kopt_supervisor.kopt_tui.screens.dashboard import DashboardScreen
from kopt_supervisor.kopt_tui.screens.detail import DetailScreen
from kopt_supervisor.kopt_tui.screens.logs import LogScreen
from kopt_supervisor.kopt_tui.screens.restart import RestartScreen
from kopt_supervisor.kopt_tui.screens.review import ReviewScreen
from kopt_supervisor.kopt_tui.screens.runs import RunsScreen
from kopt_supervisor.kopt_tui.screens.transcript import TranscriptScreen
from tests.tui.export_screenshots import IMG, ROOT, SHOWN, SNAPSHOTS

GUIDE = ROOT / "docs" / "user-guide.md"
DOC_KEY = {"left": "←", "right": "→", "question_mark": "?"}
"""How the guide writes the keys Textual names."""


def test_docs_screenshots_are_current():
    text = GUIDE.read_text()
    for name, snap in SHOWN.items():
        assert f"img/{name}" in text, name
        assert (IMG / name).read_bytes() == (SNAPSHOTS / snap).read_bytes(), (
            f"docs/img/{name} differs from {snap}: run python -m tests.tui.export_screenshots"
        )


def test_the_key_table_names_every_key():
    table = GUIDE.read_text().split("## Keys", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([^`]+)`", table))
    for cls in (
        KoptApp,
        RunsScreen,
        DashboardScreen,
        DetailScreen,
        ReviewScreen,
        RestartScreen,
        LogScreen,
        TranscriptScreen,
        ConfirmScreen,
    ):
        for b in cls.BINDINGS:
            assert isinstance(b, Binding)
            for key in b.key.split(","):
                assert DOC_KEY.get(key, key) in documented, (
                    f"{cls.__name__}: {key!r} ({b.description}) is not in the guide"
                )

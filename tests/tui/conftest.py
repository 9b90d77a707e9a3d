"""Fixtures of the TUI tests: frozen runs under a fresh root, local time fixed to UTC."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.tui.fixtures import install_runs


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    """fake-review (crashed while v8 awaits review, v3 masked) and fake-done (stopped)."""
    return install_runs(tmp_path / "workspaces")

"""Fixtures of the hostile end-to-end tests: `hostile` builds a target, a workspace and the
scripted hostile proposer (tests/security/harness.py); whatever a test leaves behind (a
survivor, a canary file outside the tree) is removed after it, pass or fail.

The target repo and the workspaces lie in tests/security/.runs/<id>, not under pytest's
tmp_path: every sandbox replaces /tmp with a private one, so an attack aimed at a path under
/tmp would only ever write into its own scratch; outside /tmp the sandbox's read-only view
of the filesystem is what stops it, as on a user's machine. HOSTILE_KEEP=1 keeps the folder."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.harness import HERE, TEMPLATES, Hostile

RUNS = HERE / ".runs"


class Factory:
    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp, self.monkeypatch = tmp, monkeypatch
        self.made: list[Hostile] = []

    def fake(self, script: list[dict[str, Any]], **kw: Any) -> Hostile:
        h = Hostile.fake(self.tmp, self.monkeypatch, script, **kw)
        self.made.append(h)
        return h

    def py(self, script: list[dict[str, Any]], **kw: Any) -> Hostile:
        h = Hostile.py(self.tmp, self.monkeypatch, script, **kw)
        self.made.append(h)
        return h


@pytest.fixture(scope="session", autouse=True)
def _templates() -> Iterator[None]:
    """The baselined targets this worker kept (harness.Hostile.baseline), removed at its end."""
    yield
    for template in TEMPLATES.values():
        shutil.rmtree(template, ignore_errors=True)


@pytest.fixture
def hostile(monkeypatch: pytest.MonkeyPatch) -> Iterator[Factory]:
    # one slot per worker (its tests run one after the other), so that a baselined target
    # kept by an earlier test lies where this one builds its own (harness.Hostile.baseline)
    base = RUNS / (uuid.uuid4().hex[:12] if os.environ.get("HOSTILE_KEEP") else f"slot-{os.getpid()}")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    factory = Factory(base, monkeypatch)
    try:
        yield factory
    finally:
        for h in factory.made:
            h.kill_survivors()
            h.remove_canaries()
        if not os.environ.get("HOSTILE_KEEP"):
            shutil.rmtree(base, ignore_errors=True)

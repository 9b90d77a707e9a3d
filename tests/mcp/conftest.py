"""Baselined fake targets for the MCP judge's tests, built once per worker: the default fake
target with a review timeout long enough for an engineer's answer from the CLI (the default
fake's 2 s would let the policy answer first on a loaded machine), with one lane (`mcp_run`)
and with two (`mcp_lanes_run`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

# anyio imports its subprocess module lazily, on the first open_process: inside the MCP
# client's async stack, where CPython 3.11.7's ast.parse (pytest rewrites anyio, a plugin)
# can raise "AST constructor recursion depth mismatch" (python/cpython#106905, fixed in
# 3.11.8; run BD, 2026-11-30). Imported here, at the top of the stack, for every test here.
import anyio._core._subprocesses  # noqa: F401
import pytest

from tests.conftest import make_fake_repo

LANES2 = "\n[parallel]\nlanes = 2\n"


def _template(tmp_path_factory: pytest.TempPathFactory, name: str, extra_toml: str = "") -> tuple[Path, Path]:
    from kopt_supervisor.engine.daemon import run_engine
    from kopt_supervisor.engine.workspace import Workspace
    from kopt_supervisor.kopt_tui.cli import main as kopt

    base = tmp_path_factory.mktemp(name)
    slot, template = base / "slot", base / "template"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_SCRIPT", str(slot / "target.script.json"))
        mp.delenv("KOPT_FAKE_GPUS", raising=False)
        mp.delenv("KOPT_ROOT", raising=False)
        repo = make_fake_repo(
            slot / "target",
            script=[],
            extra_toml=extra_toml,
            toml_replace={"review_timeout_s = 2": "review_timeout_s = 300"},
        )
        assert kopt(["--root", str(slot / "workspaces"), "init", "--repo", str(repo), "--tag", "t"]) == 0
        ws = Workspace(slot / "workspaces", "t")
        assert run_engine(ws, max_iters=0) == 0
    shutil.copytree(slot, template, symlinks=True)
    return slot, template


@pytest.fixture(scope="session")
def _mcp_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _template(tmp_path_factory, "mcp-baselined")


@pytest.fixture(scope="session")
def _mcp_lanes_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _template(tmp_path_factory, "mcp-lanes-baselined", LANES2)


def _restorer(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Callable[[], tuple[Path, Any]]:
    """make() -> (root, workspace): run `t` with its baseline measured, restored fresh from the
    worker's copy (the slot is the worker's: one test at a time)."""
    from kopt_supervisor.engine.workspace import Workspace

    slot, template = built
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    monkeypatch.setenv("FAKE_NOISE", "0.0005")  # 5% and 0.5% changes decide in a few rounds

    def make() -> tuple[Path, Workspace]:
        shutil.rmtree(slot, ignore_errors=True)
        shutil.copytree(template, slot, symlinks=True)
        (slot / "target.script.json").write_text(json.dumps([]))
        monkeypatch.setenv("FAKE_SCRIPT", str(slot / "target.script.json"))
        return slot / "workspaces", Workspace(slot / "workspaces", "t")

    return make


@pytest.fixture
def mcp_run(_mcp_template: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch):
    """Returns make() -> (root, workspace) of a run of one lane."""
    return _restorer(_mcp_template, monkeypatch)


@pytest.fixture
def mcp_lanes_run(_mcp_lanes_template: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch):
    """Returns make() -> (root, workspace) of a run of two lanes ([parallel] lanes = 2)."""
    return _restorer(_mcp_lanes_template, monkeypatch)

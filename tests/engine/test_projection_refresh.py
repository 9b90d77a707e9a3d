"""Projections.refresh_memory_files and write_projections (engine/history.py): every
projection file is what run.db says after an iteration ends, whatever an unconfined
proposer did to it, and each find is said (a `tamper` event).

Hostile cases: an edited memory/v0.json; a symbolic link in its place (to a file holding
the right text, which the attacker edits later); a hard link; a FIFO (a reader must not
block); a folder of that name; a planted vN.json for no iteration; memory/ itself replaced
by a link to a folder outside (kopt must neither write nor delete there); performance.md
edited between two renders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kopt_supervisor.engine.history import memory_is_the_stores
from kopt_supervisor.engine.loop.context import RunContext, open_run
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import write_memory
from tests.engine.test_chain_of_keeps import sealed_run


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    ws = sealed_run(tmp_path)
    c = open_run(ws, proposer_kind="manual", no_sandbox=True, log=lambda m: None, poll_interval_s=0.05)
    for it in c.store.iterations():
        write_memory(ws, it)
    c.projections.write_projections()
    return c


def tamper_events(ctx: RunContext) -> list[str]:
    return [e.message for e in ctx.store.events(limit=1000) if e.kind == "tamper"]


def is_the_stores(ctx: RunContext, version: int) -> bool:
    path = ctx.ws.memory_path(version)
    it = ctx.store.iteration(version)
    assert it is not None
    return (
        not path.is_symlink()
        and path.is_file()
        and os.stat(path).st_nlink == 1
        and memory_is_the_stores(path, it)
        and json.loads(path.read_text())["status"] == it.status
    )


def test_nothing_to_refresh_says_nothing(ctx: RunContext) -> None:
    assert ctx.projections.refresh_memory_files() == []
    assert tamper_events(ctx) == []


def test_an_edited_memory_file_is_rewritten_and_said(ctx: RunContext) -> None:
    path = ctx.ws.memory_path(0)
    rec = json.loads(path.read_text())
    rec.update(status="keep", hypothesis="forged keep")
    path.write_text(json.dumps(rec))
    assert ctx.projections.refresh_memory_files() == ["v0.json"]
    assert is_the_stores(ctx, 0) and "forged keep" not in path.read_text()
    assert any("v0.json" in m for m in tamper_events(ctx))


def test_a_link_in_place_of_a_memory_file_is_replaced_even_when_its_text_is_right(
    ctx: RunContext, tmp_path: Path
) -> None:
    """The link's target holds the store's text now (so a comparison through the link says
    equal); the attacker would edit the target later. The link must go."""
    path = ctx.ws.memory_path(0)
    target = tmp_path / "attacker.json"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)
    assert "v0.json" in ctx.projections.refresh_memory_files()
    assert is_the_stores(ctx, 0)
    assert target.read_bytes() == path.read_bytes()  # the target was not written through


def test_a_hard_link_of_a_memory_file_is_replaced(ctx: RunContext, tmp_path: Path) -> None:
    path = ctx.ws.memory_path(1)
    other = tmp_path / "other-name.json"
    os.link(path, other)
    assert "v1.json" in ctx.projections.refresh_memory_files()
    assert is_the_stores(ctx, 1)
    other.write_text('{"status": "keep"}')  # a write through the other name no longer reaches memory/
    assert is_the_stores(ctx, 1)


def test_a_fifo_or_a_folder_in_place_of_a_memory_file_does_not_block_and_is_replaced(ctx: RunContext) -> None:
    fifo, folder = ctx.ws.memory_path(2), ctx.ws.memory_path(3)
    fifo.unlink()
    os.mkfifo(fifo)
    folder.unlink()
    folder.mkdir()
    (folder / "inside").write_text("x")
    assert set(ctx.projections.refresh_memory_files()) >= {"v2.json", "v3.json"}
    assert is_the_stores(ctx, 2) and is_the_stores(ctx, 3)


def test_a_planted_memory_file_for_no_iteration_is_removed(ctx: RunContext) -> None:
    planted = ctx.ws.memory / "v99.json"
    planted.write_text(json.dumps({"version": 99, "status": "keep"}))
    other = ctx.ws.memory / "notes.txt"  # not a projection's name: left alone
    other.write_text("mine")
    assert any("v99.json" in t for t in ctx.projections.refresh_memory_files())
    assert not planted.exists() and other.read_text() == "mine"


def test_memory_replaced_by_a_link_to_a_folder_outside_is_never_written_or_emptied_through(
    ctx: RunContext, tmp_path: Path
) -> None:
    outside = tmp_path / "users-folder"
    outside.mkdir()
    (outside / "v7.json").write_text("the user's own file")  # named like a stray projection
    for p in ctx.ws.memory.iterdir():
        p.unlink()
    ctx.ws.memory.rmdir()
    ctx.ws.memory.symlink_to(outside, target_is_directory=True)
    ctx.projections.refresh_memory_files()
    assert ctx.ws.memory.is_dir() and not ctx.ws.memory.is_symlink()
    assert (
        sorted(p.name for p in outside.iterdir()) == ["v7.json"]
        and (outside / "v7.json").read_text() == "the user's own file"
    )
    assert all(is_the_stores(ctx, v) for v in range(4))


def test_an_edited_performance_md_is_said_and_rewritten(ctx: RunContext) -> None:
    with open(ctx.ws.performance, "a") as f:
        f.write("\n| v9 | keep | forged keep -50% |\n")
    ctx.projections.write_projections()
    assert "forged keep" not in ctx.ws.performance.read_text()
    assert any("performance.md" in m for m in tamper_events(ctx))
    n = len(tamper_events(ctx))
    ctx.projections.write_projections()  # unchanged since: nothing said
    assert len(tamper_events(ctx)) == n


def test_an_iteration_close_refreshes_every_memory_file(ctx: RunContext) -> None:
    """The loop's own path: RunContext.close ends an iteration and rewrites what differs."""
    from kopt_supervisor.engine.records import Iteration, Phase, Status

    path = ctx.ws.memory_path(0)
    path.write_text(path.read_text().replace('"baseline"', '"keep"'))
    with Store(ctx.ws.db_path) as s:
        v = s.next_version()
    it = Iteration(v, Status.RUNNING, phase=Phase.POLICE, best_commit_before="3" * 40, started_at=0.0)
    ctx.save(it)
    ctx.close(it, Status.FAIL_PROPOSE, "the proposer changed nothing")
    assert is_the_stores(ctx, 0) and is_the_stores(ctx, v)


def test_performance_md_rendered_by_another_reader_of_the_store_is_no_tamper(ctx: RunContext) -> None:
    """`kopt report` re-renders performance.md from the same store while the engine runs: the
    engine's next render finds what the store says, not an edit."""
    from kopt_supervisor.engine.history import write_projections

    before = ctx.ws.performance.read_text()
    with Store(ctx.ws.db_path) as s:  # a change of the store the engine has not rendered yet
        s.set("sandbox", {"confined": False, "summary": "UNSANDBOXED (--no-sandbox)", "ever_unconfined": True})
        write_projections(ctx.ws, s, ctx.cfg)
    assert ctx.ws.performance.read_text() != before
    ctx.projections.write_projections()
    assert tamper_events(ctx) == []

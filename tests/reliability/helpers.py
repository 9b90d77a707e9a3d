"""Shared pieces of the reliability suite: a run on the fake target and the invariants that
must hold after any fault (docs/design.md §6-§7)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

from kopt_supervisor.engine import api
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git

FAST = {"min_rounds = 3": "min_rounds = 2", "max_rounds = 8": "max_rounds = 4"}


def init(repo: Path, root: Path, tag: str = "t") -> Workspace:
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag]) == 0
    return Workspace(root, tag)


def iterations(ws: Workspace):
    with Store(ws.db_path, readonly=True) as s:
        return s.iterations()


def statuses(ws: Workspace) -> list[str]:
    return [it.status for it in iterations(ws)]


def events(ws: Workspace, kind: str | None = None) -> list[str]:
    with Store(ws.db_path, readonly=True) as s:
        return [e.message for e in s.events(limit=100000) if kind is None or e.kind == kind]


def memory(ws: Workspace, v: int) -> dict:
    return json.loads(ws.memory_path(v).read_text())


def marked_processes(ws: Workspace) -> list[psutil.Process]:
    """Live processes that kopt started for this workspace (they carry its marker)."""
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get("KOPT_WORKSPACE") == str(ws.dir):
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def check_invariants(ws: Workspace, repo: Path) -> None:
    """What must hold whenever no engine runs: the store, git and the projections agree."""
    its = iterations(ws)
    assert [it.version for it in its] == list(range(len(its))), "an iteration was lost or duplicated"
    assert its[0].status == "baseline" and its[0].commit
    assert not [it.version for it in its if it.status == "running"], "an iteration was left running"
    kept = [it for it in its if it.kept and not it.masked]
    # one commit per keep, in order, each a child of the previous best; nothing else
    chain = git(repo, "rev-list", "--reverse", f"kopt/{ws.tag}").splitlines()
    base_at = chain.index(its[0].commit)
    assert chain[base_at:] == [it.commit for it in kept], "a keep is missing from the branch or committed twice"
    for prev, it in zip(kept, kept[1:], strict=False):
        assert it.best_commit_before == prev.commit
    best = kept[-1].commit
    st = api.status(ws)
    assert st["best_commit"] == best
    assert git(ws.best, "rev-parse", "HEAD") == best == git(ws.cand, "rev-parse", "HEAD")
    assert git(ws.best, "rev-parse", "--abbrev-ref", "HEAD") == f"kopt/{ws.tag}"
    assert git(ws.best, "status", "--porcelain") == "" and git(ws.cand, "status", "--porcelain") == ""
    # projections agree with the store
    for it in its:
        rec = memory(ws, it.version)
        assert (rec["status"], rec["commit"], rec["masked"]) == (it.status, it.commit, it.masked), (it.version, rec)
    # no duplicated samples, no child recorded, no orphan
    with Store(ws.db_path, readonly=True) as s:
        dup = s.db.execute(
            "SELECT version, stage, round, block, side, config, COUNT(*) FROM samples "
            "GROUP BY 1, 2, 3, 4, 5, 6 HAVING COUNT(*) > 1"
        ).fetchall()
        assert not dup, [tuple(r) for r in dup]
        assert s.get("child_pgid") is None
    assert not marked_processes(ws), "a benchmark process outlived the engine"


def kill_marked(ws: Workspace) -> None:
    for p in marked_processes(ws):
        try:
            os.killpg(os.getpgid(p.pid), 9)
        except (ProcessLookupError, PermissionError):
            pass

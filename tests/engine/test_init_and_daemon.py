"""`kopt init` refusals, the workspace layout, and the detached engine's process model."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import (
    WorkspaceBusy,
    engine_alive,
    run_engine,
    start_detached,
    workspace_lock,
)
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import REPO_ROOT, git


def test_init_creates_the_layout_privately(fake_env, capsys):
    repo, root = fake_env([])
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "apr16-pa"]) == 0
    ws = Workspace(root, "apr16-pa")
    for name in ("kopt.toml", "run.db", "README.md", "performance.md"):
        assert (ws.dir / name).is_file(), name
    for name in ("memory", "plans", "profiles", "logs", "best", "cand"):
        assert (ws.dir / name).is_dir(), name
    assert stat.S_IMODE(ws.dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(ws.db_path.stat().st_mode) == 0o600
    head = git(repo, "rev-parse", "HEAD")
    assert git(ws.best, "rev-parse", "--abbrev-ref", "HEAD") == "kopt/apr16-pa"
    assert git(ws.best, "rev-parse", "HEAD") == head == git(ws.cand, "rev-parse", "HEAD")
    frozen = ws.config_path.read_text()
    assert "[decide]" in frozen and "consecutive_regressions = 5" in frozen  # every effective value
    readme = ws.readme.read_text()
    assert head in readme and "bench.py" in readme and "Not yet measured" in readme


@pytest.mark.parametrize("tag", ["../escape", "a/b", "", ".hidden", "x" * 65, "a b", "tag;rm"])
def test_bad_tags_are_refused(fake_env, capsys, tag):
    repo, root = fake_env([])
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kopt: tag") and err.count("\n") == 1
    assert not (root.parent / "escape").exists()


def test_taken_tag_dirty_repo_and_bad_config_are_refused(fake_env, capsys):
    repo, root = fake_env([])
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"]) == 0
    capsys.readouterr()
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"]) == 2
    assert "is taken" in capsys.readouterr().err
    (repo / "kernel.json").write_text('{"speed": {"small": 0.5, "large": 0.5}}')
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t2"]) == 2
    assert "uncommitted changes in files the bench reads (kernel.json" in capsys.readouterr().err
    git(repo, "checkout", "kernel.json")
    (repo / "notes.txt").write_text("untracked files do not block")
    bad = repo.parent / "bad.toml"
    bad.write_text('[target]\nbench = "x"\nmetric = "us"\n[decide]\nconfidance = 0.9\n')
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t3", "--config", str(bad)]) == 2
    assert "unknown key [decide].confidance (did you mean 'confidence'?)" in capsys.readouterr().err
    assert not (root / "t3").exists()
    assert kopt(["--root", str(root), "init", "--repo", str(repo.parent), "--tag", "t4"]) == 2
    assert "not a git repository" in capsys.readouterr().err


def test_sources_limit_the_dirty_check(fake_env):
    repo, root = fake_env([], extra_toml="")
    toml = (
        (repo / "kopt.toml")
        .read_text()
        .replace('protected = ["bench.py"]', 'protected = ["bench.py"]\nsources = ["bench.py"]')
    )
    (repo / "kopt.toml").write_text(toml)
    git(repo, "commit", "-qam", "sources")
    (repo / "kernel.json").write_text("{}")  # not a source the bench reads, by declaration
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"]) == 0


def test_one_engine_per_workspace(fake_env):
    repo, root = fake_env([])
    kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"])
    ws = Workspace(root, "t")
    with workspace_lock(ws):
        assert engine_alive(ws) == (True, os.getpid())
        with pytest.raises(WorkspaceBusy, match=f"pid {os.getpid()}"):
            run_engine(ws, max_iters=1)
    assert engine_alive(ws) == (False, None)


def test_a_start_that_loses_the_race_for_the_workspace_says_so(fake_env, monkeypatch):
    """Two `kopt run TAG --headless` at once both said "engine started (pid X)" (the winner's
    pid): the loser's engine had refused the workspace in engine.log alone. Here another
    process takes the lock after the start's own check; the start then says it is busy."""
    from kopt_supervisor.engine import daemon

    repo, root = fake_env([])
    kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"])
    ws = Workspace(root, "t")
    checks = iter([(False, None)])  # the start's check before it spawns finds no engine
    real = daemon.engine_alive
    monkeypatch.setattr(daemon, "engine_alive", lambda w: next(checks, None) or real(w))
    with workspace_lock(ws), pytest.raises(WorkspaceBusy, match=f"pid {os.getpid()}"):
        start_detached(ws, max_iters=1)
    assert "already runs" in ws.engine_log.read_text()  # the spawned engine refused, and ended


def test_a_probe_holding_the_lock_for_a_moment_does_not_read_as_an_engine(fake_env):
    # engine_alive (any TUI, `kopt status`) takes the lock shared for a moment: an engine
    # starting in that moment waits for it instead of refusing with "pid ?"
    import fcntl
    import threading

    repo, root = fake_env([])
    kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"])
    ws = Workspace(root, "t")
    ws.lock_path.touch()
    fd = os.open(ws.lock_path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    threading.Timer(0.3, lambda: os.close(fd)).start()
    t0 = time.monotonic()
    with workspace_lock(ws):
        assert engine_alive(ws) == (True, os.getpid()) and 0.2 < time.monotonic() - t0 < 1.0


def test_detached_engine_survives_sighup_and_its_terminal(fake_env, monkeypatch):
    repo, root = fake_env(["gain5"] * 50)
    kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"])
    ws = Workspace(root, "t")
    monkeypatch.setenv("FAKE_SLEEP", "0.2")
    # Start it the way a shell in an SSH session would, then hang up that session.
    shell = subprocess.Popen(
        [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root), "run", "t", "--headless"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    out, _ = shell.communicate(timeout=30)
    assert shell.returncode == 0, out
    alive, pid = engine_alive(ws)
    assert alive and pid
    assert os.getsid(pid) == pid  # its own session: no controlling terminal to lose
    os.killpg(shell.pid, signal.SIGHUP) if _exists_group(shell.pid) else None
    os.kill(pid, signal.SIGHUP)
    time.sleep(1.0)
    assert engine_alive(ws)[0], "SIGHUP must not stop the engine"
    before = api.status(ws)["iteration"] or 0
    deadline = time.monotonic() + 30
    while (api.status(ws)["iteration"] or 0) <= before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (api.status(ws)["iteration"] or 0) > before, "the engine keeps advancing"
    with pytest.raises(Exception, match="already runs"):
        start_detached(ws)
    assert kopt(["--root", str(root), "stop", "t"]) == 0
    deadline = time.monotonic() + 20
    while engine_alive(ws)[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    st = api.status(ws)
    assert not engine_alive(ws)[0] and st["state"] == "stopped" and st["stop_reason"] == "stopped by the engineer"
    assert "engine started" in (ws.engine_log).read_text()


def _exists_group(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_status_json_has_the_documented_fields(fake_env, capsys):
    repo, root = fake_env(["gain5"])
    kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t"])
    assert run_engine(Workspace(root, "t"), max_iters=1) == 0
    capsys.readouterr()
    assert kopt(["--root", str(root), "status", "t", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    for key in (
        "tag",
        "state",
        "iteration",
        "best_commit",
        "baseline_commit",
        "consecutive_regressions",
        "recent_regressions",
        "pending_reviews",
        "stop_reason",
        "engine_pid",
        "heartbeat_age_s",
    ):
        assert key in st, key
    assert st["state"] == "stopped" and st["iteration"] == 1 and st["best_speedup"] > 1.03
    assert kopt(["--root", str(root), "ls"]) == 0
    assert "t " in capsys.readouterr().out
    assert kopt(["--root", str(root), "status", "nope"]) == 2
    assert kopt(["--root", str(root), "memory", "t", "show", "v9"]) == 2
    assert kopt(["--root", str(root), "memory", "t", "mask", "v1"]) == 0
    assert json.loads((root / "t" / "memory" / "v1.json").read_text())["masked"] is True
    assert kopt(["--root", str(root), "memory", "t", "mask", "v0"]) == 2

"""End to end, in a real terminal: the real `kopt` in tmux, as an engineer over SSH uses it.

Start a run (engine detached + TUI), detach with `q`, attach again and kill the tmux
session (what a dropped SSH connection does: SIGHUP to the TUI), check that the engine still
advances, attach once more, accept the borderline candidate with one key, and read the
result in `kopt status --json`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import psutil
import pytest

from kopt_supervisor.engine.daemon import engine_alive
from tests.conftest import REPO_ROOT
from tests.tui.live import (
    BORDERLINE_NOISE,
    cli,
    init_run,
    iterations,
    kill_engine,
    pending_review,
    wait_for,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the terminal the test drives)"),
]


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Tmux:
    """A private tmux server (its own socket), so the test never touches the user's sessions."""

    def __init__(self, name: str) -> None:
        self.sock = name

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, check=check)

    def start(self, session: str, argv: list[str], env: dict[str, str]) -> None:
        command = "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(argv)
        self.run("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)

    def screen(self, session: str) -> str:
        res = self.run("capture-pane", "-p", "-t", session, check=False)
        return res.stdout if res.returncode == 0 else ""

    def alive(self, session: str) -> bool:
        return self.run("has-session", "-t", session, check=False).returncode == 0

    def keys(self, session: str, *keys: str) -> None:
        self.run("send-keys", "-t", session, *keys)

    def kill_server(self) -> None:
        self.run("kill-server", check=False)


def test_ssh_drop_leaves_the_engine_running_and_a_key_accepts(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NOISE", BORDERLINE_NOISE)
    script = ["gain5", "loss5", "gain5", "loss5", "gain05"]
    repo, root = fake_env(script, toml_replace={"review_timeout_s = 2": "review_timeout_s = 300"})
    ws = init_run(repo, root, "e2e")
    # the session's shared library bytecode and GPU claims (tests/conftest.py) pass through: without
    # them the detached engine compiled the standard library into the user's ~/.cache, cold on a
    # fresh machine, and claimed fake GPUs in the host-wide folder
    keep = ("FAKE_SCRIPT", "FAKE_NOISE", "PATH", "HOME", "KOPT_BYTECODE_CACHE", "KOPT_GPU_CLAIMS_DIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({"PYTHONPATH": str(REPO_ROOT), "TERM": "xterm-256color"})
    kopt = [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(root)]
    tmux = Tmux(f"kopt-e2e-{os.getpid()}")
    try:
        # `kopt run` starts the engine detached and attaches the TUI; `q` detaches.
        tmux.start("run", [*kopt, "run", "e2e", "--max-iters", str(len(script))], env)
        wait_for(lambda: "history" in tmux.screen("run"), 30, "the TUI in tmux")
        assert engine_alive(ws)[0]
        tmux.keys("run", "q")
        wait_for(lambda: not tmux.alive("run"), 15, "the TUI to exit on q")
        assert engine_alive(ws)[0], "q must leave the engine running"

        # Attach again, then drop the "SSH connection": kill the tmux session under the TUI.
        tmux.start("ssh", [*kopt, "attach", "e2e"], env)
        wait_for(lambda: "history" in tmux.screen("ssh"), 30, "kopt attach in tmux")
        before = iterations(ws)[-1].version
        tui = psutil.Process(int(tmux.run("display", "-p", "-t", "ssh", "#{pane_pid}").stdout))
        assert "kopt_supervisor.kopt_tui.cli" in " ".join(tui.cmdline())
        tmux.run("kill-session", "-t", "ssh")
        assert not tmux.alive("ssh")
        wait_for(lambda: not _running(tui), 10, "the TUI to end with its terminal")
        wait_for(lambda: iterations(ws)[-1].version > before, 30, "the engine to advance after the SSH drop", ws)
        assert engine_alive(ws)[0]

        # The borderline candidate waits for the engineer; attach and accept it with one key.
        v = wait_for(lambda: pending_review(ws), 240, "the borderline candidate", ws)  # slow on a loaded 2-core CI
        tmux.start("review", [*kopt, "attach", "e2e"], env)
        wait_for(lambda: f"Review v{v}" in tmux.screen("review"), 30, "the review dialog in tmux")
        tmux.keys("review", "a")
        wait_for(lambda: iterations(ws)[v].status == "accepted", 30, "the engine to accept")
        wait_for(
            lambda: f"v{v} accepted" in tmux.screen("review") or "accepted" in tmux.screen("review"),
            10,
            "the TUI to show the accept",
        )
        tmux.keys("review", "q")

        wait_for(lambda: not engine_alive(ws)[0], 30, "the engine to stop at --max-iters")
        res = cli("--root", str(root), "status", "e2e", "--json")
        assert res.returncode == 0, res.stderr
        st = json.loads(res.stdout)
        assert st["iteration"] == v and st["iteration_status"] == "accepted"
        assert st["pending_reviews"] == [] and st["state"] == "stopped"
        assert st["best_commit"] == iterations(ws)[v].commit
    finally:
        tmux.kill_server()
        kill_engine(ws)

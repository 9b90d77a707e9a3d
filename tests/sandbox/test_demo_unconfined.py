"""Where no sandbox works, `kopt demo` still runs, unconfined and saying so everywhere the
sandbox is shown, because it runs only kopt's own bundled kernel with the `tune` proposer;
`kopt run` on a target (a demo's workspace included) keeps refusing without --no-sandbox,
and the demo's permission reaches no other workspace or proposer.

"No sandbox works" is made real: a system bwrap that fails as bubblewrap does where user
namespaces are off, and the bundled one hidden (tests/sandbox/test_userns_off.py does it
with the kernel's own limit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import api, sandbox
from kopt_supervisor.engine.daemon import engine_alive
from kopt_supervisor.engine.loop.context import open_run
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as cli_main

from .test_bwrap_choice import NO_USERNS, fake_bwrap

KOPT = str(Path(sys.executable).parent / "kopt")
DEMO_SAYS = "the demo runs only kopt's own bundled kernel and tune proposer"


@pytest.fixture
def no_sandbox_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process's and its children's environment: no bwrap that works."""
    fake = fake_bwrap(tmp_path / "sysbin", fails_with=NO_USERNS)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setenv(sandbox.HIDE_BUNDLED_ENV, "1")
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    assert not sandbox.probe().works
    return dict(os.environ)


def kopt(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KOPT, *args], env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


@pytest.mark.slow
def test_the_demo_runs_unconfined_and_says_so_while_kopt_run_refuses(tmp_path: Path, no_sandbox_here, capsys):
    pytest.importorskip("triton")
    env, root = no_sandbox_here, tmp_path / "ws"
    r = kopt(env, "--root", str(root), "demo", "--headless", "--max-iters", "0", "--tag", "d")
    assert r.returncode == 0, r.stderr[-2000:]
    # on screen, before the run and in its summary
    said = [ln for ln in r.stdout.splitlines() if "UNCONFINED: no sandbox works here (" in ln]
    assert len(said) == 2 and all(DEMO_SAYS in ln and "No permissions to creating new namespace" in ln for ln in said)
    assert "kopt doctor" in r.stdout
    # in run.db, status --json, performance.md and results.md
    ws = Workspace(root, "d")
    with Store(ws.db_path) as store:
        box = store.get("sandbox")
        assert store.get("demo")["kernel"] == "rmsnorm"
    assert box["confined"] is False and box["summary"].startswith("UNCONFINED") and DEMO_SAYS in box["summary"]
    assert box["support"]["works"] is False and box["support"]["source"] == "system"
    # status and report in this process (the same environment): a `kopt` process of their own
    # costs ~0.5 CPU-s of imports each; the demo and `kopt run` stay real processes
    assert cli_main(["--root", str(root), "status", "d", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["unsandboxed"] is True and st["sandbox"]["summary"] == box["summary"]
    assert cli_main(["--root", str(root), "status", "d"]) == 0
    assert "UNCONFINED" in capsys.readouterr().out
    assert f"Sandbox: **{box['summary']}**" in ws.performance.read_text()
    assert cli_main(["--root", str(root), "report", "d"]) == 0
    results = (ws.dir / "results.md").read_text()
    assert f"- Sandbox: **{box['summary']}**" in results and "> **Warning:**" in results
    # the same workspace run later as a target: refused, one line with the cause and the way out
    r = kopt(env, "--root", str(root), "run", "d", "--foreground", "--max-iters", "1")
    assert r.returncode == 2
    err = r.stderr.strip()
    assert "\n" not in err and "No permissions to creating new namespace" in err and "--no-sandbox" in err
    assert err.startswith("kopt: kopt runs every bench (candidate code) under bubblewrap")
    with Store(ws.db_path) as store:
        assert store.get("sandbox") == box  # nothing started
    # the TUI's own restart (no demo permission) is refused too; `kopt demo`'s detached start is not
    with pytest.raises(sandbox.SandboxUnavailable):
        api.start_detached(ws, proposer="tune", max_iters=0)
    pid = api.start_detached(ws, proposer="tune", max_iters=0, demo=True)
    deadline = time.monotonic() + 120
    while engine_alive(ws)[0] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not engine_alive(ws)[0], pid
    log = ws.engine_log.read_text()  # the detached engine's own output: it started, and stopped as asked
    assert f"engine started (pid {pid}, proposer tune" in log and "stopped: --max-iters 0" in log, log[-2000:]
    with Store(ws.db_path) as store:
        again = store.get("sandbox")
        assert store.get("state") == "stopped", store.get("last_error")
    assert again["summary"] == box["summary"] and again["confined"] is False


def make_tune_target(tmp_path: Path) -> Workspace:
    """A user's target with the `tune` proposer: the demo's proposer, not the demo."""
    from tests.conftest import FAKE, git

    repo = tmp_path / "target"
    repo.mkdir()
    shutil.copy(FAKE / "tune_bench.py", repo / "tune_bench.py")
    shutil.copy(FAKE / "tune_params.json", repo / "params.json")
    (repo / "kopt.toml").write_text(
        (FAKE / "tune_kopt.toml").read_text().replace('"python tune_bench.py"', f'"{sys.executable} tune_bench.py"')
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tune target")
    created = api.init_run(tmp_path / "ws", "t", repo)
    return created.workspace


def test_the_demo_permission_covers_only_a_demo_workspace_with_the_tune_proposer(tmp_path: Path, no_sandbox_here):
    """Asked for by a caller that is not `kopt demo` (a hidden flag, a script), the
    permission still needs run.db's demo record (only `kopt demo` writes it) and the tune
    proposer: a user's tune target and a `command` proposer are refused."""
    ws = make_tune_target(tmp_path)
    with pytest.raises(sandbox.SandboxUnavailable, match="No permissions to creating new namespace"):
        api.check_sandbox(ws, proposer="tune", demo=True)
    with pytest.raises(sandbox.SandboxUnavailable):
        open_run(ws, proposer_kind="tune", no_sandbox=False, log=lambda m: None, poll_interval_s=0.2, demo=True)
    r = kopt(no_sandbox_here, "--root", str(ws.root), "run", "t", "--foreground", "--max-iters", "1")
    assert r.returncode == 2 and "--no-sandbox" in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kopt_supervisor.engine.daemon",
            "--root",
            str(ws.root),
            "--demo",
            "--max-iters",
            "0",
            "t",
        ],
        env=no_sandbox_here,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "under bubblewrap, which does not work here" in r.stderr
    with Store(ws.db_path) as store:
        assert store.get("sandbox") is None  # no engine ever started on it
        store.set("demo", {"kernel": "rmsnorm", "repo": "x", "gpu": False})  # as prepare_demo records it
    assert api.check_sandbox(ws, proposer="tune", demo=True).startswith("UNCONFINED: no sandbox works here")
    with pytest.raises(sandbox.SandboxUnavailable, match="the `command` proposer and every bench"):
        api.check_sandbox(ws, proposer="command", demo=True)
    with pytest.raises(sandbox.SandboxUnavailable):
        api.check_sandbox(ws, proposer="tune")  # `kopt run` on the demo's workspace
    ctx = open_run(ws, proposer_kind="tune", no_sandbox=False, log=lambda m: None, poll_interval_s=0.2, demo=True)
    try:
        box = ctx.store.get("sandbox")
        assert box["confined"] is False and box["summary"].startswith("UNCONFINED") and not ctx.jails.confined
    finally:
        ctx.store.close()


def test_where_a_sandbox_works_the_demo_is_confined_like_any_run():
    works = sandbox.SandboxSupport(True, "/usr/bin/bwrap", "bubblewrap 0.9.0", True, False, source="system")
    mode = sandbox.start_rule(works, proposer_kind="tune", no_sandbox=False, demo=True)
    assert mode.confined and mode.summary == "sandboxed: bubblewrap 0.9.0, system (user namespaces)"
    broken = sandbox.SandboxSupport(False, None, "", None, False, "no bwrap found: x", "fix it", cause="missing")
    mode = sandbox.start_rule(broken, proposer_kind="tune", no_sandbox=False, demo=True)
    assert not mode.confined and mode.summary == sandbox.DEMO_UNCONFINED.format(reason="no bwrap found: x")
    for kind in ("command", "manual"):
        with pytest.raises(sandbox.SandboxUnavailable):
            sandbox.start_rule(broken, proposer_kind=kind, no_sandbox=False, demo=True)
    assert sandbox.start_rule(broken, proposer_kind="tune", no_sandbox=True, demo=True).summary.startswith(
        "UNSANDBOXED (--no-sandbox)"
    )

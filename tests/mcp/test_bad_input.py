"""Bad input and hostile calls to kopt's MCP judge: each gets a clear tool error, and nothing
of the run changes (BEST, the frozen config, the records, anything outside cand/). The
server runs in-process here (the SDK's in-memory client); the end-to-end tests drive the
real process."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp.client.stdio  # noqa: F401  (imported here, not under capsys: its stdio_client binds sys.stderr as a default)
import pytest

from kopt_supervisor.engine.mcp.judge import Judge
from tests.conftest import REPO_ROOT, git
from tests.mcp.cycle import edit, ready, wait_until

if TYPE_CHECKING:  # the SDK imported by the tests that run it, not while every worker collects the suite
    from mcp import Client


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> tuple[str, bool]:
    r = await client.call_tool(tool, args or {})
    return "".join(getattr(c, "text", "") for c in r.content), bool(r.is_error)


def snapshot(ws) -> dict[str, Any]:
    """Everything of the run an agent must not change: every file of the workspace outside
    cand/ (run.db's WAL files aside) and of the target repo, run.db's records and commands."""
    files = {}
    for base in (ws.dir, ws.dir.parent.parent / "target"):
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(base)
            if p.is_file() and not p.is_symlink() and rel.parts[0] != "cand" and "run.db" not in p.name:
                files[f"{base.name}/{rel}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    db = sqlite3.connect(f"file:{ws.db_path}?mode=ro", uri=True)
    try:
        tables = {t: db.execute(f"SELECT * FROM {t}").fetchall() for t in ("iterations", "commands", "samples")}
        tables["meta"] = [r for r in db.execute("SELECT * FROM meta") if r[0] not in ("heartbeat",)]
    finally:
        db.close()
    return {"files": files, "db": tables, "branch": git(ws.best, "rev-parse", "kopt/t")}


def test_a_hostile_agent_changes_nothing_through_the_tools(mcp_run):
    from mcp import Client

    from kopt_supervisor.engine.mcp.server import build_server

    root, ws = mcp_run()
    before = snapshot(ws)
    (ws.cand / "kernel.json").write_text('{"speed": {"small": 0.5, "large": 0.5}}')  # its own edit: allowed
    hostile: list[tuple[str, dict[str, Any], str]] = [
        ("diff", {"version": "../../kopt.toml"}, "must be an iteration"),
        ("diff", {"version": "v1/../../../etc/passwd"}, "must be an iteration"),
        ("diff", {"version": "v99"}, "v99 does not exist"),
        ("profile", {"version": -1}, "out of range"),
        ("profile", {"version": 10**15}, "out of range"),
        ("profile", {"version": [1, 2]}, "validation error"),
        ("history", {"n": 10**9}, "from 1 to 50"),
        ("restart_from", {"version": 0}, "restart_from is off"),
        ("mask", {"version": 0}, "mask is off"),
        ("submit", {"hypothesis": "faster\ntarget_class: cls=small", "scope": "global"}, "one line"),
        ("submit", {"hypothesis": "x\u2028scope: global"}, "one line"),
        ("submit", {"hypothesis": "h" * 100_000}, "at most 500"),
        ("submit", {"hypothesis": "ok", "target_class": "../../best"}, "not a class of this run"),
        ("submit", {"hypothesis": "ok", "scope": "everything"}, "validation error"),
        ("submit", {"hypothesis": "ok", "scope": "global", "target_class": "cls=small"}, "takes no target_class"),
        ("submit", {"hypothesis": "ok", "scope": "global", "path": "/etc/passwd"}, "takes no argument 'path'"),
        ("submit", {"hypothesis": "ok", "scope": "global"}, "no engine runs run t"),
        ("submit", {}, "validation error"),
        ("write_file", {"path": "../best/kernel.json"}, "Unknown tool"),
    ]

    async def drive() -> None:
        async with Client(build_server(Judge(ws))) as client:
            for tool, args, expected in hostile:
                text, err = await call(client, tool, args)
                assert err and expected in text, (tool, args, text)
            for tool, args in (
                ("status", {}),
                ("context", {}),
                ("history", {"n": 5}),
                ("diff", {"version": 0}),
                ("profile", {"version": "v0"}),
            ):
                text, err = await call(client, tool, args)
                assert not err, (tool, text)

    anyio.run(drive)
    assert snapshot(ws) == before
    assert json.loads((ws.cand / "kernel.json").read_text())["speed"]["small"] == 0.5


def test_restart_and_mask_need_the_engineers_flag(mcp_run):
    """With --allow-restart the calls reach the run, and its own rules answer them."""
    from mcp import Client

    from kopt_supervisor.engine.mcp.server import build_server

    root, ws = mcp_run()

    async def drive() -> list[tuple[str, bool]]:
        async with Client(build_server(Judge(ws, allow_restart=True))) as client:
            return [
                await call(client, "mask", {"version": "v5"}),
                await call(client, "mask", {"version": "v0"}),
                await call(client, "restart_from", {"version": "v0", "why": "start over"}),
            ]

    (missing, e1), (baseline, e2), (restarted, e3) = anyio.run(drive)
    assert e1 and "v5 does not exist" in missing
    assert e2 and "v0 cannot be masked" in baseline
    assert not e3 and "restarted from v0" in restarted


def test_submits_refused_while_one_is_measuring_and_with_no_change(mcp_run, monkeypatch):
    from mcp import Client

    from kopt_supervisor.engine.daemon import run_engine
    from kopt_supervisor.engine.mcp.server import build_server

    root, ws = mcp_run()
    monkeypatch.setenv("FAKE_SLEEP", "0.3")  # each bench run takes a moment: the first submit is still measuring
    engine = threading.Thread(target=run_engine, args=(ws,), kwargs={"proposer": "manual", "max_iters": 1}, daemon=True)
    engine.start()
    wait_until(lambda: ready(ws), what="the submit wait")

    async def drive() -> tuple[str, str, str, str]:
        judge = Judge(ws)
        async with Client(build_server(judge)) as first, Client(build_server(Judge(ws))) as other:
            nothing, err = await call(first, "submit", {"hypothesis": "no edit yet", "scope": "global"})
            assert err
            edit(ws, 1.05)
            results: dict[str, str] = {}

            async def submit() -> None:
                results["first"] = (await call(first, "submit", {"hypothesis": "slower", "scope": "global"}))[0]

            async with anyio.create_task_group() as tg:
                tg.start_soon(submit)
                with anyio.fail_after(30):
                    while True:  # until the engine measures v1
                        st, _ = await call(other, "status")
                        if json.loads(st)["phase"] == "measure":
                            break
                        await anyio.sleep(0.05)
                same_server, _ = await call(first, "submit", {"hypothesis": "again", "scope": "global"})
                other_server, _ = await call(other, "submit", {"hypothesis": "again", "scope": "global"})
            return nothing, same_server, other_server, results["first"]

    nothing, same_server, other_server, first = anyio.run(drive)
    engine.join(60)
    assert "holds no change against BEST" in nothing
    assert "another submit of this server is being evaluated" in same_server
    assert "v1 is being evaluated (measure): one submit at a time" in other_server
    assert json.loads(first)["status"] == "regression"
    with ws.open_store(readonly=True) as s:
        assert [it.version for it in s.iterations()] == [0, 1]
        assert [c.kind for c in s.pending_commands()] == []


def test_a_tag_that_does_not_exist_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "kopt_supervisor.kopt_tui.cli", "--root", str(tmp_path), "mcp", "nope"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "nope" in r.stderr, r.stderr


def test_print_config_for_each_client(mcp_run, capsys):
    import tomllib

    from kopt_supervisor.kopt_tui.cli import main as kopt

    root, ws = mcp_run()
    for client in ("claude-code", "codex", "cursor", "gemini"):
        assert kopt(["--root", str(root), "mcp", "t", "--print-config", client]) == 0
        out, err = capsys.readouterr()
        conf = tomllib.loads(out)["mcp_servers"] if client == "codex" else json.loads(out)["mcpServers"]
        server = conf["kopt-t"]
        assert server["args"] == ["mcp", "t", "--root", str(Path(root).resolve())]
        assert err.startswith(f"# {client}: ")
    assert server["timeout"] >= 600_000  # gemini: a submit waits minutes
    with pytest.raises(SystemExit):
        kopt(["--root", str(root), "mcp", "t", "--print-config", "vim"])


def test_print_config_without_the_sdk_still_prints_it_and_warns(mcp_run, capsys, monkeypatch):
    """A config printed where the MCP SDK is missing says that the server it starts would fail
    here (a new user's config started a server that then failed)."""
    import sys

    from kopt_supervisor.kopt_tui.cli import main as kopt

    root, ws = mcp_run()
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    assert kopt(["--root", str(root), "mcp", "t", "--print-config", "claude-code"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["mcpServers"]["kopt-t"]["args"][:2] == ["mcp", "t"]
    assert "pip install 'kopt-supervisor[mcp]'" in err.splitlines()[-1] and "warning" in err
    monkeypatch.undo()
    assert kopt(["--root", str(root), "mcp", "t", "--print-config", "claude-code"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_print_config_names_the_running_kopt_by_its_absolute_path(mcp_run, capsys, monkeypatch, tmp_path):
    """A venv's kopt, not on PATH (the venv not activated), printed a bare `kopt` that the client
    could not start; the running kopt is named by its absolute path."""
    import sys

    from kopt_supervisor.kopt_tui.cli import main as kopt

    root, ws = mcp_run()
    capsys.readouterr()
    venv_kopt = tmp_path / "venv" / "bin" / "kopt"
    venv_kopt.parent.mkdir(parents=True)
    venv_kopt.write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "argv", [str(venv_kopt), "mcp"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert kopt(["--root", str(root), "mcp", "t", "--print-config", "claude-code"]) == 0
    assert json.loads(capsys.readouterr().out)["mcpServers"]["kopt-t"]["command"] == str(venv_kopt)
    monkeypatch.setattr(sys, "argv", ["python -m kopt_supervisor.kopt_tui.cli"])
    assert kopt(["--root", str(root), "mcp", "t", "--print-config", "claude-code"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["mcpServers"]["kopt-t"]["command"] == "kopt" and "no kopt on PATH" in err


def test_a_waiting_submit_never_tells_the_agent_to_run_kopt_submit():
    """The propose phase's engine step is the manual proposer's "waiting for `kopt submit T`":
    an MCP agent's progress line said to run a CLI command it must not run."""
    from kopt_supervisor.engine import mcp as rules

    step = {"version": 2, "step": "waiting for `kopt submit d` (manual proposer)"}
    assert rules.progress_text(2, "propose", step) == "v2: handing the submit to the engine"
    measuring = {"version": 2, "step": "eval, round 1 of up to 12", "done": 1, "total": 12}
    assert rules.progress_text(2, "measure", measuring).endswith("eval, round 1 of up to 12 (1/12)")

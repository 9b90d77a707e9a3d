"""A stdio client that goes away while its submit is measured (killed by an outer `timeout`, its
pipe closed): `kopt mcp` ends with one line on stderr naming the submit in flight, exit 0, no
traceback, and the engine still decides and records that iteration (docs/agents.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import IO, Any

import pytest

from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import REPO_ROOT
from tests.mcp.cycle import edit, ended, ready, server_argv, start_engine
from tests.tui.live import wait_for


def _send(pipe: IO[bytes], msg: dict[str, Any]) -> None:
    pipe.write((json.dumps(msg) + "\n").encode())
    pipe.flush()


def _answer(pipe: IO[bytes], request_id: int) -> dict[str, Any]:
    while True:
        msg = json.loads(pipe.readline())
        if msg.get("id") == request_id:
            return msg


def test_only_closed_pipes_count_as_the_client_gone() -> None:
    from kopt_supervisor.engine.mcp.server import client_gone

    assert client_gone(BrokenPipeError())
    assert client_gone(BaseExceptionGroup("x", [BrokenPipeError(), ConnectionResetError()]))
    assert not client_gone(BaseExceptionGroup("x", [BrokenPipeError(), ValueError("a real bug")]))
    assert not client_gone(RuntimeError("boom"))


@pytest.mark.slow
def test_a_client_gone_mid_submit_ends_the_server_cleanly_and_the_engine_records_the_verdict(
    mcp_run, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, ws = mcp_run()
    monkeypatch.setenv("FAKE_SLEEP", "0.5")  # each bench run: the verdict comes seconds after the submit
    engine = start_engine(ws)
    wait_for(lambda: ready(ws), what="the engine's wait for a submit")
    edit(ws, 1.05)
    server = subprocess.Popen(
        [sys.executable, *server_argv(root)],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        _send(
            server.stdin,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "gone-agent", "version": "1"},
                },
            },
        )
        assert "result" in _answer(server.stdout, 1)
        _send(server.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "submit", "arguments": {"hypothesis": "wider tiles", "scope": "global"}}
        _send(
            server.stdin,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**call, "_meta": {"progressToken": 7}}},
        )
        first = json.loads(server.stdout.readline())  # the first progress: the submit was sent
        assert first.get("method") == "notifications/progress" and "v1: submitted" in first["params"]["message"]
        server.stdout.close()  # the client dies: both its ends of the server's stdio close
        server.stdin.close()
        rc = server.wait(60)  # the next progress line meets the closed pipe
        err = server.stderr.read().decode()
        assert rc == 0, err
        assert "Traceback" not in err and "BrokenPipe" not in err, err
        assert "the client closed stdio" in err and "v1 goes on in the engine" in err, err
        wait_for(lambda: ended(ws, 1), what="v1's verdict in the records")
        record = json.loads(ws.memory_path(1).read_text())
        assert record["status"] == "regression" and record["proposal"]["submitted_by"] == "mcp:gone-agent 1"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
        for pipe in (server.stdin, server.stdout, server.stderr):
            pipe.close()
        kopt(["--root", str(root), "stop", ws.tag])
        engine.join(60)

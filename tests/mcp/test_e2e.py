"""kopt as an MCP judge, end to end: the SDK's own client drives a real `kopt mcp` process over
stdio and over HTTP through the full cycle (a regression, a keep, a review answered from the
CLI while the submit waits), and the records are those a `kopt submit` run leaves."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import pytest

from kopt_supervisor.engine import api
from tests.conftest import REPO_ROOT
from tests.mcp.cycle import (
    STEPS,
    caller,
    check_results,
    cli_cycle,
    http_server,
    mcp_cycle,
    normalized,
    server_argv,
    start_engine,
)

pytestmark = pytest.mark.slow


def records(ws) -> list[dict[str, Any]]:
    return [json.loads(ws.memory_path(v).read_text()) for v in range(1, len(STEPS) + 1)]


def test_stdio_full_cycle_leaves_the_records_of_a_kopt_submit_run(mcp_run):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.types import Implementation

    root, ws = mcp_run()
    engine = start_engine(ws)
    params = StdioServerParameters(
        command=sys.executable, args=server_argv(root), cwd=str(REPO_ROOT), env=dict(os.environ)
    )

    async def drive() -> list:
        async with Client(params, client_info=Implementation(name="test-agent", version="1.0")) as client:
            return await mcp_cycle(caller(client), ws, root)

    results = anyio.run(drive)
    engine.join(60)
    check_results(results, ws)
    by_mcp = records(ws)
    assert [r["proposal"]["submitted_by"] for r in by_mcp] == ["mcp:test-agent 1.0"] * 3
    assert api.proposal_origin(by_mcp[0]["proposal"]).text.startswith("MCP · test-agent 1.0")

    root, ws = mcp_run()  # the same edits through `kopt submit`
    engine = start_engine(ws)
    cli_cycle(ws, root)
    engine.join(60)
    by_cli = records(ws)
    assert [r["status"] for r in by_cli] == [s.expect for s in STEPS]
    assert all(r["proposal"]["submitted_by"].startswith("cli:") for r in by_cli)
    for mine, theirs in zip(by_mcp, by_cli, strict=True):
        assert normalized(mine) == normalized(theirs)


def test_http_full_cycle_behind_its_token(mcp_run):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    root, ws = mcp_run()
    engine = start_engine(ws)
    with http_server(root, ws) as (url, token):
        assert oct((ws.dir / "mcp.token").stat().st_mode & 0o777) == "0o600"

        async def drive() -> list:
            for bad in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                async with httpx2.AsyncClient() as h:
                    r = await h.post(url, headers=bad, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                    assert r.status_code == 401, (bad, r.status_code)
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as h,
                Client(
                    streamable_http_client(url, http_client=h),
                    client_info=Implementation(name="http-agent", version="2"),
                ) as client,
            ):
                return await mcp_cycle(caller(client), ws, root)

        results = anyio.run(drive)
    engine.join(60)
    check_results(results, ws)
    assert {r["proposal"]["submitted_by"] for r in records(ws)} == {"mcp:http-agent 2"}

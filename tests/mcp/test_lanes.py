"""kopt's MCP judge on a run of two lanes: each MCP session holds a lane of its own (over HTTP
one per Mcp-Session-Id, over stdio one per `kopt mcp` process), edits and submits only in that
lane's worktree and gets its own verdict; a third session is told every lane is taken until
one ends; a session cannot reach another's lane whatever it passes."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.mcp.judge import Judge
from kopt_supervisor.engine.store import Store
from tests.conftest import REPO_ROOT
from tests.mcp.cycle import as_json, caller, edit, ended, http_server, server_argv

if TYPE_CHECKING:  # the SDK imported by the tests that run it, not while every worker collects the suite
    from mcp import Client

TAKEN = "has 2 lanes and every one is held by another live MCP session"


def start_engine(ws, iterations: int = 2) -> threading.Thread:
    t = threading.Thread(
        target=run_engine, args=(ws,), kwargs={"proposer": "manual", "max_iters": iterations}, daemon=True
    )
    t.start()
    return t


async def status(client: Client) -> tuple[dict[str, Any], bool]:
    return as_json(await client.call_tool("status", {}))


async def until_ready(client: Client) -> dict[str, Any]:
    with anyio.fail_after(60):
        while True:
            st, err = await status(client)
            assert not err, st
            if st["ready_for_edits"]:
                return st
            await anyio.sleep(0.1)


def records(ws) -> dict[int, dict[str, Any]]:
    """Each lane's candidate: its version, status, hypothesis and proposal, by lane."""
    with Store(ws.db_path, readonly=True) as s:
        return {
            it.record["lane"]: {
                "version": it.version,
                "status": str(it.status),
                "hypothesis": it.hypothesis,
                "proposal": it.record.get("proposal"),
            }
            for it in s.iterations()
            if it.version > 0
        }


@pytest.mark.slow
def test_http_two_sessions_each_submit_in_their_own_lane(mcp_lanes_run):
    """The SDK's own client (auto mode: the server refuses the session-less 2026 protocol on a
    run of lanes, the client falls back to a session). Two sessions submit at once, each its
    own lane's edit; a third is refused until one ends; a session-less request is refused."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    root, ws = mcp_lanes_run()
    engine = start_engine(ws)
    with http_server(root, ws) as (url, token):

        async def drive() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as h:

                def connect(name: str, **kw: Any) -> Client:
                    return Client(
                        streamable_http_client(url, http_client=h),
                        client_info=Implementation(name=name, version="1"),
                        **kw,
                    )

                # c connects first (its lane call comes last), a last: a's session ends first
                async with connect("agent-c") as c, connect("agent-b") as b, contextlib.AsyncExitStack() as a_session:
                    a = await a_session.enter_async_context(connect("agent-a"))
                    sa, sb = await until_ready(a), await until_ready(b)
                    out["lanes"] = (sa["lane"], sb["lane"])
                    out["trees"] = (sa["worktree"], sb["worktree"])
                    out["third"] = await status(c)
                    text, err = as_json(await a.call_tool("context", {}))
                    assert not err
                    out["context"] = text["text"]
                    edit(Path(sa["worktree"]), 0.95)  # a: faster
                    edit(Path(sb["worktree"]), 1.05)  # b: slower
                    results: dict[str, Any] = {}

                    async def submit(name: str, client: Client, hypothesis: str) -> None:
                        said: list[str] = []
                        results[name] = (
                            *await caller(client)("submit", {"hypothesis": hypothesis, "scope": "global"}, said),
                            said,
                        )

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(submit, "a", a, "a: unrolled inner loop")
                        tg.start_soon(submit, "b", b, "b: wider tiles")
                    out["results"] = results
                    await a_session.aclose()  # a's session ends: its lane is free
                    out["third_after"] = await status(c)
                async with connect("modern", mode="2026-07-28") as m:
                    out["sessionless"] = await status(m)
            return out

        out = anyio.run(drive)
    engine.join(60)
    assert sorted(out["lanes"]) == [0, 1]
    lane_a, lane_b = out["lanes"]
    trees = {0: str(ws.cand), 1: str(ws.dir / "lanes" / "1" / "cand")}
    assert out["trees"] == (trees[lane_a], trees[lane_b])
    third, err = out["third"]
    assert err and TAKEN in third["text"], third
    assert f"your lane: {lane_a} of the run's 2" in out["context"] and trees[lane_a] in out["context"]
    (ra, ea, said_a), (rb, eb, said_b) = out["results"]["a"], out["results"]["b"]
    assert not ea and not eb, (ra, rb)
    assert ra["status"] == "keep" and rb["status"] == "regression", (ra, rb)
    assert ra["iteration"] != rb["iteration"]
    assert said_a[0].startswith(f"v{ra['iteration']}: submitted (kernel.json)"), said_a
    assert said_b[0].startswith(f"v{rb['iteration']}: submitted (kernel.json)"), said_b
    recs = records(ws)
    assert recs[lane_a]["version"] == ra["iteration"] and recs[lane_a]["hypothesis"] == "a: unrolled inner loop"
    assert recs[lane_b]["version"] == rb["iteration"] and recs[lane_b]["hypothesis"] == "b: wider tiles"
    assert recs[lane_a]["proposal"]["submitted_by"] == "mcp:agent-a 1"
    assert recs[lane_b]["proposal"]["submitted_by"] == "mcp:agent-b 1"
    after, err = out["third_after"]
    assert not err and after["lane"] == lane_a, after
    sessionless, err = out["sessionless"]
    assert err and "belongs to no session" in sessionless["text"], sessionless


@pytest.mark.slow
def test_sessions_of_two_processes_each_hold_a_lane(mcp_lanes_run):
    """A `kopt mcp` process over stdio (an agent's client) holds a lane; sessions served by this
    process (another server's) get the other lane, then are refused; the stdio process's end
    frees its lane."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from kopt_supervisor.engine.mcp.server import build_server

    root, ws = mcp_lanes_run()
    params = StdioServerParameters(
        command=sys.executable, args=server_argv(root), cwd=str(REPO_ROOT), env=dict(os.environ)
    )
    judge = Judge(ws)

    async def drive() -> list[tuple[dict[str, Any], bool]]:
        async with (
            Client(build_server(judge)) as third,
            Client(build_server(judge)) as second,
            contextlib.AsyncExitStack() as first_process,
        ):
            first = await first_process.enter_async_context(Client(params))
            seen = [await status(first), await status(second), await status(third)]
            await first_process.aclose()  # its process ends: its lane is free
            seen.append(await status(third))
            return seen

    (s1, e1), (s2, e2), (s3, e3), (s3_after, e3_after) = anyio.run(drive)
    assert not e1 and not e2 and {s1["lane"], s2["lane"]} == {0, 1}, (s1, s2)
    assert e3 and TAKEN in s3["text"], s3
    assert not e3_after and s3_after["lane"] == s1["lane"], s3_after


@pytest.mark.slow
def test_a_session_cannot_submit_into_another_sessions_lane(mcp_lanes_run):
    """Two sessions (in-process servers of one judge); only the first's lane holds an edit. The
    second's submit evaluates its own lane (no change there: refused, nothing sent) whatever
    arguments it adds, and does not stop the first's from being judged in its lane."""
    from mcp import Client

    from kopt_supervisor.engine.mcp.server import build_server

    root, ws = mcp_lanes_run()
    engine = start_engine(ws)
    judge = Judge(ws, ready_wait_s=1)  # lane 0 starts no third iteration (max 2): no next wait to wait for

    async def drive() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(build_server(judge)) as mine, Client(build_server(judge)) as other:
            st_mine, st_other = await until_ready(mine), await until_ready(other)
            out["lanes"] = (st_mine["lane"], st_other["lane"])
            edit(Path(st_mine["worktree"]), 0.95)
            out["hostile"] = [
                as_json(await other.call_tool("submit", args))
                for args in (
                    {"hypothesis": "steal", "scope": "global", "lane": st_mine["lane"]},
                    {"hypothesis": "steal", "scope": "global", "worktree": st_mine["worktree"]},
                    {"hypothesis": "steal", "scope": "global", "session": "whatever"},
                    {"hypothesis": "steal", "scope": "global"},
                )
            ]
            with Store(ws.db_path, readonly=True) as s:
                out["sent"] = s.db.execute("SELECT count(*) FROM commands WHERE kind = 'submit'").fetchone()[0]
            out["mine"] = as_json(await mine.call_tool("submit", {"hypothesis": "mine: unrolled", "scope": "global"}))
            out["other_after"] = await status(other)
        return out

    try:
        out = anyio.run(drive)
    finally:
        api.send(ws, "stop", {"why": "test over"})
        engine.join(60)
    lane_mine, lane_other = out["lanes"]
    assert {lane_mine, lane_other} == {0, 1}
    for (text, err), expected in zip(
        out["hostile"],
        (
            "takes no argument 'lane'",
            "takes no argument 'worktree'",
            "takes no argument 'session'",
            "holds no change against BEST",
        ),
        strict=True,
    ):
        assert err and expected in text["text"], text
    assert f"lane {lane_other}: the worktree" in out["hostile"][-1][0]["text"]
    assert out["sent"] == 0
    mine, err = out["mine"]
    assert not err and mine["status"] == "keep", mine
    recs = records(ws)
    assert recs[lane_mine]["hypothesis"] == "mine: unrolled" and recs[lane_mine]["status"] == "keep"
    assert lane_other not in recs or recs[lane_other]["status"] == "interrupted", recs.get(lane_other)
    other_after, err = out["other_after"]
    assert not err and other_after["lane"] == lane_other and other_after["ready_for_edits"], other_after
    assert ended(ws, mine["iteration"]) and not api.engine_alive(ws)[0]

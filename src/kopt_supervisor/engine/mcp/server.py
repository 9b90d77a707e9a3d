"""The MCP server of `kopt mcp TAG` over the official `mcp` SDK (2.x: `MCPServer`): the
tools, stdio, and streamable HTTP on 127.0.0.1 behind a bearer token.

Every tool is a thin call into `Judge` (engine/mcp/judge.py) on a worker thread; a refusal
becomes an MCP tool error naming what was wrong, and nothing is sent to the run. A tool
called with an argument it does not declare is refused before it runs (the SDK alone would
drop the argument silently). Over HTTP, a request without the token the server printed and
wrote (0600) into the workspace gets 401 before the SDK sees it.

On a run of several lanes each MCP session holds a lane of its own (`Sessions`; `Seats` in
engine/mcp/judge.py): over stdio, and through an in-process client, the server is one
session; over HTTP each Mcp-Session-Id is one, freed when the session ends. `context`,
`status` and `submit` are the session's lane's; the read-only views and restarts are the run's.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import METHOD_NOT_FOUND, CallToolResult, TextContent, ToolAnnotations

from kopt_supervisor.engine import KoptError
from kopt_supervisor.engine import mcp as rules
from kopt_supervisor.engine.api.iteration_record import mcp_source
from kopt_supervisor.engine.mcp import EngineGone, Refused
from kopt_supervisor.engine.mcp.judge import Judge, Observation

INSTRUCTIONS = """kopt judges your kernel edits with paired statistics and commits only verified wins.
Work loop: call `context` (BEST, per-class results, roofline, recent regressions), edit the files in
the worktree it names (cand/), then call `submit` with a one-line hypothesis and the target class
(or scope "global"). `submit` returns when the verdict is in: keep (committed as the new BEST),
regression, tie, split, a failed check, or a review by the engineer (it waits for the answer).
Edit only while `status` says ready_for_edits. kopt measures, polices and decides; you cannot
change BEST, the run's config or its records through these tools."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def client_of(ctx: Context[Any, Any]) -> tuple[str | None, str | None]:
    """The MCP client's self-given name and version (None when it gave none)."""
    try:
        params = ctx.session.client_params
    except (AttributeError, ValueError):
        return None, None
    info = getattr(params, "client_info", None) if params is not None else None
    name, version = getattr(info, "name", None), getattr(info, "version", None)
    return (name if isinstance(name, str) else None), (version if isinstance(version, str) else None)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """A judge call on a worker thread; a refusal becomes the tool error the caller reads."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except (Refused, EngineGone, KoptError) as e:
        raise ToolError(str(e)) from None


class Sessions:
    """The lane of the session a tool call belongs to (runs of several lanes; one lane: 0).

    Not over HTTP (stdio, an in-process client) the server is one session, holding its lane
    until the server ends (`lifespan`). Over HTTP a session is an Mcp-Session-Id (the SDK's
    stateful streamable HTTP: one connection per session), holding its lane until the session
    ends (the client's DELETE, the SDK's idle timeout, the server's end). A request with no
    session (protocol 2026-07-28 over HTTP) gets no lane: a clear tool error."""

    def __init__(self, judge: Judge, *, http: bool) -> None:
        self.judge = judge
        self.http = http

    def lane(self, ctx: Context[Any, Any]) -> int:
        judge = self.judge
        if judge.lanes == 1:
            return 0
        if not self.http:
            return judge.seats.take(self)
        conn = connection_of(ctx)
        session_id = getattr(conn, "session_id", None)
        if not isinstance(session_id, str) or not session_id:
            raise Refused(rules.no_session(judge.ws.tag, judge.lanes))
        key = ("http", session_id)
        known = judge.seats.lane(key) is not None
        lane = judge.seats.take(key)
        if not known:  # the session's end (its connection closing) frees the lane
            conn.exit_stack.callback(judge.seats.release, key)
        return lane

    @asynccontextmanager
    async def lifespan(self, _app: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self.http:
                self.judge.seats.release_all()
            else:
                self.judge.seats.release(self)


def connection_of(ctx: Context[Any, Any]) -> Any:
    """The MCP connection a tool call came on (its Mcp-Session-Id, its teardown). The SDK (2.3)
    keeps it on the request's session without a public accessor from a tool's Context;
    tests/mcp/test_lanes.py fails if that changes."""
    conn = getattr(ctx.session, "_connection", None)
    if conn is None or not hasattr(conn, "exit_stack"):
        raise ToolError(
            "kopt mcp cannot tell which MCP session this call belongs to (an MCP SDK it does not "
            "know): a run of several lanes cannot be served by it"
        )
    return conn


async def _lane(sessions: Sessions, ctx: Context[Any, Any]) -> int:
    try:
        return sessions.lane(ctx)
    except Refused as e:
        raise ToolError(str(e)) from None


def build_server(judge: Judge, *, http: bool = False) -> MCPServer:
    """The MCP server of `judge`'s run; `http`: served over streamable HTTP (a session per
    Mcp-Session-Id), else the server is one session (stdio, an in-process client)."""
    sessions = Sessions(judge, http=http)
    app: MCPServer = MCPServer(
        "kopt",
        title=f"kopt judge of run {judge.ws.tag}",
        instructions=INSTRUCTIONS,
        version=_kopt_version(),
        log_level="WARNING",
        lifespan=sessions.lifespan,
    )

    @app.tool(
        description="The context pack for the next candidate: where to edit (cand/), BEST per class, "
        "the roofline, the latest profile, recent regressions, other lanes' hypotheses.",
        annotations=READ_ONLY,
    )
    async def context(ctx: Context[Any, Any]) -> str:
        return str(await _call(judge.context, await _lane(sessions, ctx)))

    @app.tool(
        description="The run now: its state, the iteration, whether cand/ is ready for edits (and why "
        "not), BEST, counters, pending reviews.",
        annotations=READ_ONLY,
    )
    async def status(ctx: Context[Any, Any]) -> dict[str, Any]:
        return dict(await _call(judge.status, await _lane(sessions, ctx)))

    @app.tool(
        description="The last n iterations (1-50): status, verdict, per-class deltas, where each proposal came from.",
        annotations=READ_ONLY,
    )
    async def history(n: int = 10) -> list[dict[str, Any]]:
        return list(await _call(judge.history, n))

    @app.tool(
        description="The profiler's word on iteration vN: GPU time per class, best against candidate, "
        "and whether it agrees with the bench.",
        annotations=READ_ONLY,
    )
    async def profile(version: int | str) -> dict[str, Any]:
        return dict(await _call(judge.profile, version))

    @app.tool(description="The candidate patch of iteration vN as kopt recorded it.", annotations=READ_ONLY)
    async def diff(version: int | str) -> str:
        return str(await _call(judge.diff, version))

    @app.tool(
        description="Evaluate the edits in cand/ (like `kopt submit`): policed, measured against BEST "
        "with paired statistics, confirmed, committed only on a verified keep. Returns when the "
        "verdict is in (progress notifications meanwhile): verdict, per-class deltas, the "
        "profiler's word, the iteration's number. A candidate sent to review waits for the "
        "engineer. hypothesis: one line; target_class: one of the run's classes, or scope "
        '"global" (every class must improve).',
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    async def submit(
        hypothesis: str,
        ctx: Context[Any, Any],
        target_class: str | None = None,
        scope: Literal["class", "global"] | None = None,
    ) -> dict[str, Any]:
        return await _submit(judge, ctx, hypothesis, target_class, scope, await _lane(sessions, ctx))

    @app.tool(
        description="Masked partial restart from iteration vN (every later iteration masked, BEST back "
        "at vN). Only when the engineer started the server with --allow-restart."
    )
    async def restart_from(version: int | str, ctx: Context[Any, Any], why: str = "") -> str:
        return str(await _call(judge.restart_from, version, why, mcp_source(*client_of(ctx))))

    @app.tool(
        description="Mask iteration vN (kept, but skipped by proposers, statistics and reports). Only "
        "when the engineer started the server with --allow-restart."
    )
    async def mask(version: int | str, ctx: Context[Any, Any]) -> str:
        return str(await _call(judge.mask, version, mcp_source(*client_of(ctx))))

    app.middleware.append(UnknownArguments(app))
    if http and judge.lanes > 1:
        app.middleware.append(sessions_only)
    return app


async def sessions_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Over HTTP on a run of several lanes: `server/discover` (how a client opens protocol
    2026-07-28, which has no sessions) is refused, so a client falls back to the initialize
    handshake, whose session gets a lane of its own."""
    if ctx.method == "server/discover":
        raise MCPError(
            METHOD_NOT_FOUND,
            "kopt mcp serves a run of several lanes by session (a lane per session): use the initialize handshake",
        )
    return await call_next(ctx)


async def _submit(
    judge: Judge, ctx: Context[Any, Any], hypothesis: str, target_class: str | None, scope: str | None, lane: int
) -> dict[str, Any]:
    sub = await _call(judge.begin_submit, hypothesis, target_class, scope, mcp_source(*client_of(ctx)), lane)
    try:
        count = 0
        last = ""
        reviewed = False

        async def say(message: str) -> None:
            nonlocal count, last
            if message != last:
                count, last = count + 1, message
                await ctx.report_progress(count, None, message)

        files = ", ".join(sub.changed_files[:5]) + (" ..." if len(sub.changed_files) > 5 else "")
        await say(f"v{sub.version}: submitted" + (f" ({files})" if files else ""))
        obs: Observation = await _call(judge.observe, sub)
        while obs.kind not in ("done", "repair"):
            reviewed = reviewed or obs.kind == "review"
            await say(obs.message)
            await anyio.sleep(judge.poll_s)
            obs = await _call(judge.observe, sub)
        assert obs.record is not None
        result: dict[str, Any] = judge.verdict(sub, obs.record, obs.kind)
        if obs.kind == "done":
            missed = rules.review_missed(judge.ws.tag, sub.version, reviewed, result)
            if missed:
                await say(missed)
            await say(f"v{sub.version}: {result.get('status')}; waiting for the engine to take the next submit")
            ready, note = await _call(judge.wait_ready, sub)
            result.update({"ready_for_edits": ready, "next": note})
        judge.answered(sub)
        return result
    finally:
        judge.end_submit(sub)


class UnknownArguments:
    """Refuses a tool call naming an argument the tool does not declare (the SDK would drop it
    without a word: an agent's typo must not change what it thinks it asked for)."""

    def __init__(self, app: MCPServer) -> None:
        self.app = app
        self.known: dict[str, set[str]] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, dict) else None
        if ctx.method == "tools/call" and params is not None:
            if self.known is None:
                self.known = {
                    t.name: set((t.input_schema or {}).get("properties") or {}) for t in await self.app.list_tools()
                }
            name, args = params.get("name"), params.get("arguments")
            if isinstance(name, str) and name in self.known and isinstance(args, dict):
                extra = sorted(str(k) for k in args if k not in self.known[name])
                if extra:
                    shown = ", ".join(repr(k[:40]) for k in extra[:5])
                    allowed = ", ".join(sorted(self.known[name])) or "none"
                    return CallToolResult(
                        content=[
                            TextContent(
                                type="text",
                                text=(f"{name} takes no argument {shown} (its arguments: {allowed}); nothing was done"),
                            )
                        ],
                        is_error=True,
                    )
        return await call_next(ctx)


def _kopt_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kopt-supervisor")
    except PackageNotFoundError:
        return "0"


# ---------------------------------------------------------------------------------------
# Transports


CLOSED = (BrokenPipeError, ConnectionResetError, anyio.BrokenResourceError, anyio.ClosedResourceError)
"""What writing to (or reading from) a stdio client that went away raises."""


def client_gone(exc: BaseException) -> bool:
    """`exc` (an exception group's leaves included) says only that the client's end of stdio
    closed: nothing a traceback would explain."""
    if isinstance(exc, BaseExceptionGroup):
        return all(client_gone(e) for e in exc.exceptions)
    return isinstance(exc, CLOSED)


def serve_stdio(judge: Judge) -> None:
    """Serve over stdin/stdout until the client closes them. A client that goes away while a
    submit is measuring (its process killed, its pipes closed) ends the server with one line on
    stderr, not a traceback: the submit is the engine's by then, which decides and records it
    as any other (`kopt status TAG`; `history` in the next session)."""
    try:
        build_server(judge).run("stdio")
    except BaseException as exc:
        if not client_gone(exc):
            raise
        try:  # stdout's reader is gone: nothing more may be written there, not even at exit's flush
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        _say_gone(judge, always=True)
    else:
        _say_gone(judge, always=False)


def _say_gone(judge: Judge, *, always: bool) -> None:
    flying = judge.submits_in_flight()
    if not flying and not always:
        return
    tag = judge.ws.tag
    print(
        f"kopt mcp: the client closed stdio; the server ends (run {tag}"
        + (
            f": the submit of {', '.join(f'v{v}' for v in flying)} goes on in the engine, which records its "
            f"verdict; `kopt status {tag}` shows it"
            if flying
            else ""
        )
        + ")",
        file=sys.stderr,
        flush=True,
    )


TOKEN_FILE = "mcp.token"


def write_token(workspace: Path) -> tuple[str, Path]:
    """A fresh bearer token for this start, written 0600 into the workspace (created with
    that mode: never readable by others, not even for a moment)."""
    token = secrets.token_urlsafe(32)
    path = workspace / TOKEN_FILE
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return token, path


class BearerGate:
    """ASGI: every HTTP request must carry `Authorization: Bearer <token>` (compared in
    constant time); anything else gets 401 before the MCP transport reads it."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") == "http":
            got = b""
            for key, value in scope.get("headers") or ():
                if key.lower() == b"authorization":
                    got = value
            if not hmac.compare_digest(got, self.expected):
                body = json.dumps(
                    {"error": f"kopt mcp: missing or wrong bearer token (see the workspace's {TOKEN_FILE})"}
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def bind_localhost(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 only (port 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        raise KoptError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}") from None
    sock.listen(64)
    return sock


def serve_http(judge: Judge, port: int = 0, *, announce: Callable[[str], None] | None = None) -> None:
    """Streamable HTTP on http://127.0.0.1:PORT/mcp behind a fresh bearer token (printed on
    stderr, written 0600 into the workspace); Host and Origin checked against localhost."""
    import uvicorn

    sock = bind_localhost(port)
    bound = sock.getsockname()[1]
    token, path = write_token(judge.ws.dir)
    hosts = [f"127.0.0.1:{bound}", f"localhost:{bound}"]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts]
    )
    app = BearerGate(
        build_server(judge, http=True).streamable_http_app(host="127.0.0.1", transport_security=security), token
    )
    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"kopt mcp: serving run {judge.ws.tag} at http://127.0.0.1:{bound}/mcp")
    say(f"kopt mcp: bearer token {token} (also in {path}, mode 0600)")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    try:
        anyio.run(lambda: server.serve(sockets=[sock]))
    finally:
        sock.close()

"""`kopt mcp TAG`: the entry points of the MCP judge (engine/mcp) for the command line. The
MCP SDK loads only when a server starts, so `kopt status` and the TUI never import it."""

from __future__ import annotations

from typing import Literal

from kopt_supervisor.engine.errors import BadInput, KoptError
from kopt_supervisor.engine.mcp.client_config import CLIENTS as MCP_CLIENTS
from kopt_supervisor.engine.mcp.client_config import Snippet, snippet
from kopt_supervisor.engine.workspace import Workspace

__all__ = ["MCP_CLIENTS", "Snippet", "mcp_snippet", "serve_mcp"]


def mcp_snippet(client: str, tag: str, command: str, args: list[str]) -> Snippet:
    """The config snippet `client`'s documentation asks for, starting `command args`."""
    if client not in MCP_CLIENTS:
        raise BadInput(f"--print-config {client!r}: one of {', '.join(MCP_CLIENTS)}")
    return snippet(client, tag, command, args)


def serve_mcp(
    ws: Workspace, *, transport: Literal["stdio", "http"] = "stdio", port: int = 0, allow_restart: bool = False
) -> None:
    """Serve the run's MCP judge until the client goes away (stdio) or the process is stopped
    (HTTP). BadInput when the run cannot be served (no such run, an engine
    running another proposer); KoptError when the `mcp` package is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise KoptError("kopt mcp needs the MCP SDK: pip install 'kopt-supervisor[mcp]'") from None
    from kopt_supervisor.engine.mcp.judge import Judge
    from kopt_supervisor.engine.mcp.server import serve_http, serve_stdio

    judge = Judge(ws, allow_restart=allow_restart)
    problem = judge.serve_problem()
    if problem:
        raise BadInput(problem)
    if transport == "http":
        serve_http(judge, port)
    else:
        serve_stdio(judge)

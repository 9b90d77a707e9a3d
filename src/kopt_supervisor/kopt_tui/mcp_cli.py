"""`kopt mcp TAG`: serve a run's MCP judge (docs/agents.md, "kopt as an MCP judge"), or print
the config snippet an MCP client needs to start it (`--print-config CLIENT`)."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import resolve_root


def cmd_mcp(args: argparse.Namespace) -> int:
    ws = api.open_workspace(args.root, args.tag)
    if args.print_config:
        command = kopt_command()
        served = ["mcp", ws.tag, "--root", str(resolve_root(args.root).resolve())]
        if args.allow_restart:
            served.append("--allow-restart")
        snip = api.mcp_snippet(args.print_config, ws.tag, command, served)
        sys.stdout.write(snip.text)
        print(f"# {args.print_config}: {snip.where}", file=sys.stderr)
        missing = api.mcp_sdk_missing()
        if missing:  # the snippet is still printed (it may be for another machine's install)
            print(
                f"kopt: warning: not installed here, so the server this starts would fail: {missing}", file=sys.stderr
            )
        return 0
    api.serve_mcp(ws, transport="http" if args.http else "stdio", port=args.port or 0, allow_restart=args.allow_restart)
    return 0


def kopt_command() -> str:
    """The kopt an MCP client should start: this one, by its absolute path (a client's PATH is
    not this shell's: a bare `kopt` from a venv not activated there could not start), else the
    one on PATH, else `kopt` (warned)."""
    here = Path(sys.argv[0])
    if here.name == "kopt" and here.is_file():
        return str(here.absolute())
    found = shutil.which("kopt")
    if found is None:
        print(
            "kopt: warning: no kopt on PATH: the config names a bare `kopt`; put its full path there", file=sys.stderr
        )
    return found or "kopt"


def register(add: Callable[[str, Any, str], argparse.ArgumentParser]) -> None:
    """Adds `kopt mcp` to the command line (kopt_tui/cli.py's build_parser)."""
    sp = add(
        "mcp",
        cmd_mcp,
        "serve a run to an interactive agent as an MCP judge (stdio, or --http; "
        "with lanes, each session gets a lane of its own)",
    )
    sp.add_argument("tag")
    sp.add_argument(
        "--print-config",
        choices=list(api.MCP_CLIENTS),
        metavar="CLIENT",
        help=f"print the config snippet for an MCP client ({', '.join(api.MCP_CLIENTS)}) and exit",
    )
    sp.add_argument(
        "--http",
        action="store_true",
        help="streamable HTTP on 127.0.0.1 behind a bearer token (printed, and written 0600 into the "
        "workspace) instead of stdio",
    )
    sp.add_argument("--port", type=int, default=0, help="with --http: the port (default: a free one)")
    sp.add_argument(
        "--allow-restart", action="store_true", help="let the agent call restart_from and mask (off by default)"
    )

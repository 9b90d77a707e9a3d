"""`kopt mcp TAG --print-config CLIENT`: the snippet each MCP client's documentation asks for
(pure text). The snippet goes to stdout as it is pasted (or redirected into the file); where
it goes and what else to know goes beside it, as `where`.

A submit returns only when its verdict is in, which takes minutes on a real kernel: each
snippet raises the client's tool timeout where the client has one in its config.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

CLIENTS = ("claude-code", "codex", "cursor", "gemini")
TOOL_TIMEOUT_S = 3600
"""The tool timeout the snippets ask for: a submit waits for measurement and any review."""


@dataclass(frozen=True)
class Snippet:
    text: str
    """What to paste (valid JSON or TOML on its own)."""
    where: str
    """Where it goes, and how else to add it."""


def server_name(tag: str) -> str:
    return f"kopt-{tag}"


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def snippet(client: str, tag: str, command: str, args: list[str]) -> Snippet:
    """The config for `client` that starts `command args` (kopt mcp TAG ...) over stdio."""
    name = server_name(tag)
    if client == "codex":
        text = (
            "\n".join(
                [
                    f"[mcp_servers.{name}]",
                    f"command = {_toml_str(command)}",
                    f"args = [{', '.join(_toml_str(a) for a in args)}]",
                    "startup_timeout_sec = 30",
                    f"tool_timeout_sec = {TOOL_TIMEOUT_S}",
                ]
            )
            + "\n"
        )
        return Snippet(
            text,
            "append to ~/.codex/config.toml (or .codex/config.toml of a trusted project); "
            f"or: codex mcp add {name} -- {command} {' '.join(args)}",
        )
    server: dict[str, object] = {"command": command, "args": args}
    if client == "claude-code":
        where = (
            ".mcp.json at the project's root (or: claude mcp add --scope project "
            f"{name} -- {command} {' '.join(args)}); a submit waits minutes: start claude with "
            f"MCP_TOOL_TIMEOUT={TOOL_TIMEOUT_S * 1000}"
        )
    elif client == "cursor":
        where = ".cursor/mcp.json in the project (or ~/.cursor/mcp.json for every project)"
    elif client == "gemini":
        server.update({"timeout": TOOL_TIMEOUT_S * 1000, "trust": False})
        where = (
            f".gemini/settings.json in the project (or ~/.gemini/settings.json); or: gemini mcp add {name} "
            f"{command} {' '.join(args)}"
        )
    else:
        raise ValueError(f"unknown MCP client {client!r}: one of {', '.join(CLIENTS)}")
    return Snippet(json.dumps({"mcpServers": {name: server}}, indent=2) + "\n", where)

"""Where an iteration's proposal came from: an agent through `kopt mcp`, the engineer through
`kopt submit` or the TUI, an agent CLI that kopt ran (the `command` proposer), or the `tune`
search. One rule both ways: `mcp_source` names an MCP client in a submit command's source
(the manual proposer records it as `submitted_by`), and `proposal_origin` reads a record's
`proposal` back.

A record is data and a client's name is the client's claim: both are read as text, cut and
stripped of anything but printable characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Via = Literal["mcp", "cli", "tui", "command", "tune", "unknown"]

MCP_PREFIX = "mcp:"
NAME_MAX = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._@+/()\-]")


def clean_name(text: str, limit: int = NAME_MAX) -> str:
    """A client's self-given name as kopt shows it: printable ASCII letters, digits and
    `._@+/()-`, spaces collapsed, at most `limit` characters ("" when nothing is left)."""
    return " ".join(_UNSAFE.sub("", text).split())[:limit].strip()


def mcp_source(client: str | None, version: str | None = None) -> str:
    """The source of a submit sent by `kopt mcp` for this MCP client ("mcp:claude-code 2.1.3";
    "mcp:unnamed client" when the client gave no usable name)."""
    name = clean_name(f"{client or ''} {version or ''}") or "unnamed client"
    return f"{MCP_PREFIX}{name}"


@dataclass(frozen=True)
class ProposalOrigin:
    via: Via
    """"mcp" (an agent through `kopt mcp`), "cli" (`kopt submit`), "tui", "command" (an agent
    CLI kopt ran), "tune" (kopt's own search) or "unknown"."""
    agent: str = ""
    """The agent's name where one is known (the MCP client's, the command proposer's preset)."""

    @property
    def text(self) -> str:
        """One line for a screen: "MCP · claude-code 2.1.3", "kopt submit (CLI)", ..."""
        if self.via == "mcp":
            return f"MCP · {self.agent or 'unnamed client'} (the agent drove; kopt judged)"
        if self.via == "command":
            return (
                f"command · {self.agent} (kopt ran the agent)" if self.agent else "the command proposer (kopt ran it)"
            )
        return {
            "cli": "kopt submit (CLI)",
            "tui": "submitted from the TUI",
            "tune": "tune (kopt's own search)",
            "unknown": "unknown",
        }.get(self.via, "unknown")


def proposal_origin(proposal: Any) -> ProposalOrigin:
    """Where a record's `proposal` (memory/vN.json) came from."""
    if not isinstance(proposal, Mapping):
        return ProposalOrigin("unknown")
    by = proposal.get("submitted_by")
    if isinstance(by, str):
        if by.startswith(MCP_PREFIX):
            return ProposalOrigin("mcp", clean_name(by[len(MCP_PREFIX) :]))
        if by.startswith("cli:"):
            return ProposalOrigin("cli")
        if by.startswith("tui:"):
            return ProposalOrigin("tui")
        return ProposalOrigin("unknown", clean_name(by))
    agent = proposal.get("agent")
    if isinstance(agent, Mapping) or "command" in proposal:
        name = agent.get("agent") if isinstance(agent, Mapping) else None
        name = clean_name(name) if isinstance(name, str) else ""
        return ProposalOrigin("command", "" if name in ("command", "generic") else name)
    if proposal.get("proposer") == "tune":
        return ProposalOrigin("tune")
    return ProposalOrigin("unknown")

"""The agent presets as [propose] is validated against them (pure): each preset's name, title,
whether its CLI continues a session and whether it reports its cost. engine/propose/agents
builds the presets themselves (argv, usage parsers, executables) on this table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentKind:
    title: str
    resumes: bool
    """Its CLI continues a session by its id ([propose].session = "resume")."""
    reports_cost: bool
    """Its usage report holds a cost in USD ([propose].budget_usd can be kept)."""


KINDS = {
    "claude-code": AgentKind("Claude Code", resumes=True, reports_cost=True),
    "codex": AgentKind("OpenAI Codex CLI", resumes=True, reports_cost=False),
    "gemini": AgentKind("Gemini CLI", resumes=True, reports_cost=False),
    "aider": AgentKind("aider", resumes=False, reports_cost=True),
    "opencode": AgentKind("opencode", resumes=True, reports_cost=True),
    "generic": AgentKind("any CLI ([propose].command)", resumes=False, reports_cost=True),
}
AGENT_NAMES = tuple(KINDS)
"""Every [propose].agent preset, in the order the docs list them."""


def supports_resume(name: str, command: str = "") -> bool:
    """A preset that continues sessions, or a command that takes the `{session}` placeholder."""
    if command and "{session}" in command:
        return True
    return name in KINDS and KINDS[name].resumes and not command

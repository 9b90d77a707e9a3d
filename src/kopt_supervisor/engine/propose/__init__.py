"""Proposers: `manual`, `command` (an agent CLI, with presets in `agents`) and `tune` (built-in parameter
search); the context pack an agent reads (`context`) and what its runs cost (`costs`)."""

from __future__ import annotations

from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.propose.base import (
    Plan,
    Proposal,
    ProposalContext,
    Proposer,
    format_plan,
    parse_plan,
)

__all__ = ["Plan", "Proposal", "ProposalContext", "Proposer", "format_plan", "make_proposer", "parse_plan"]


def make_proposer(cfg: Config, kind: str | None = None) -> Proposer:
    kind = kind or cfg.propose.kind
    if kind == "manual":
        from kopt_supervisor.engine.propose.manual import ManualProposer

        return ManualProposer()
    if kind == "command":
        if not cfg.propose.command.strip() and not cfg.propose.agent:
            raise BadInput('kopt.toml: [propose].command (or [propose].agent) is required for the "command" proposer')
        from kopt_supervisor.engine.propose.command import CommandProposer

        return CommandProposer.from_config(cfg)
    if kind == "tune":
        from kopt_supervisor.engine.propose.tune import TuneProposer

        return TuneProposer(cfg.propose.tune)
    raise BadInput(f'unknown proposer {kind!r} (use "manual", "command" or "tune")')

"""Proposers and `make_proposer`, which builds the configured one. The interface, the plan file,
the `manual` proposer and `command` (which runs an agent CLI; its presets: `agents`) are
`proposer`; `tune` is the built-in parameter search (its space and history: `tune_space`);
the context pack an agent reads is `context` (its data and markdown; its inputs, evidence and
rules: `context_inputs`), what its runs cost `costs` (`agent_parsers`)."""

from __future__ import annotations

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.propose.proposer import CommandProposer, ManualProposer, Proposer


def make_proposer(cfg: Config, kind: str | None = None) -> Proposer:
    kind = kind or cfg.propose.kind
    if kind == "manual":
        return ManualProposer()
    if kind == "command":
        if not cfg.propose.command.strip() and not cfg.propose.agent:
            raise BadInput('kopt.toml: [propose].command (or [propose].agent) is required for the "command" proposer')
        return CommandProposer.from_config(cfg)
    if kind == "tune":
        from kopt_supervisor.engine.propose.tune import TuneProposer

        return TuneProposer(cfg.propose.tune)
    raise BadInput(f'unknown proposer {kind!r} (use "manual", "command" or "tune")')

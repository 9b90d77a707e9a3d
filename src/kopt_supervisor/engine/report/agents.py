"""results.md's "Agent costs": what the agent runs of the run cost, per iteration and in total,
against [propose].budget_usd / budget_tokens (pure: the run's records in, markdown lines out).

Every iteration counts, masked ones too (their money was spent; they are marked). The
numbers are what each CLI reported (engine/propose/costs/ reads them); a CLI that reports
no cost (Codex CLI, Gemini CLI, a plain command that writes no $KOPT_USAGE) is named, and
its runs are counted apart, never as $0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.propose.costs import AgentRun, agent_runs, spent
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.markdown import table

TITLE = "Agent costs"


def agent_summary_line(iterations: Sequence[Iteration], cfg: Config) -> str | None:
    """The Summary's line: "$1.23 over 8 agent runs (budget $5.00), 120k tokens, 12 min"; None
    when no agent ran."""
    total = spent((it.version, it.record) for it in iterations)
    if not total.runs:
        return None
    return (
        f"- Agent: {_cost_total(total.cost_usd, total.runs, total.runs_without_cost)}"
        f"{_budget(cfg.propose.budget_usd, fmt.usd)} over {total.runs} agent run(s), "
        f"{fmt.count(total.tokens)} tokens{_budget(cfg.propose.budget_tokens, fmt.count)}, "
        f"{fmt.clock(total.wall_s)} of agent wall time (masked iterations included; *{TITLE}*)"
    )


def section(iterations: Sequence[Iteration], cfg: Config) -> list[str]:
    lines = [f"## {TITLE}", ""]
    runs = [(it, label, run) for it in iterations for label, run in _labelled_runs(it)]
    if not runs:
        kind = cfg.propose.kind + (f", agent `{cfg.propose.agent}`" if cfg.propose.agent else "")
        return [*lines, f"No agent ran in this run (proposer `{kind}`): nothing to count.", ""]
    total = spent((it.version, it.record) for it in iterations)
    silent = sorted({r.agent or "command" for _, _, r in runs if r.cost_usd is None})
    p = cfg.propose
    lines += [
        f"- Cost: {_cost_total(total.cost_usd, total.runs, total.runs_without_cost)} over {total.runs} agent run(s)"
        + (
            f"; [propose].budget_usd = {fmt.usd(p.budget_usd)} ({fmt.share(100 * total.cost_usd / p.budget_usd)} spent)"
            if p.budget_usd
            else "; no dollar budget ([propose].budget_usd = 0)"
        ),
        f"- Tokens: {total.tokens:,} (input {total.input_tokens:,}, of them read from a prompt cache "
        f"{total.cache_read_tokens:,} and written to one {total.cache_write_tokens:,}; output "
        f"{total.output_tokens:,})"
        + (
            f"; [propose].budget_tokens = {p.budget_tokens:,} ({fmt.share(100 * total.tokens / p.budget_tokens)} spent)"
            if p.budget_tokens
            else "; no token budget ([propose].budget_tokens = 0)"
        )
        + (f"; {total.runs_without_tokens} run(s) reported no tokens" if total.runs_without_tokens else ""),
        f"- Agent wall time: {fmt.clock(total.wall_s)} ({fmt.hours(total.wall_s)})",
    ]
    if silent:
        lines.append(
            f"- Reported no cost: {', '.join(f'`{a}`' for a in silent)} "
            f"({total.runs_without_cost} run(s)); their dollars are unknown, not zero"
            + (" (Codex CLI and Gemini CLI print tokens, not prices)" if {"codex", "gemini"} & set(silent) else "")
        )
    lines += [
        "",
        "Every agent run, its proposal and each correctness repair, masked iterations included "
        "(their money was spent). Tokens are in / cached / out; the transcript is kept in the workspace "
        "(size-capped by [propose].transcript_max_kib).",
        "",
    ]
    rows = []
    for it, label, r in runs:
        rows.append(
            [
                f"v{it.version}" + (" (masked)" if it.masked else ""),
                it.status,
                label,
                r.agent or "command",
                r.model or fmt.DASH,
                fmt.usd(r.cost_usd) if r.cost_usd is not None else "not reported",
                _tokens(r),
                fmt.seconds(r.wall_s),
                _session(r),
                _transcript(r),
            ]
        )
    lines += table(
        [
            "iteration",
            "status",
            "run",
            "agent",
            "model",
            "cost",
            "tokens in / cached / out",
            "wall",
            "session",
            "transcript",
        ],
        rows,
    )
    return [*lines, ""]


def _labelled_runs(it: Iteration) -> list[tuple[str, AgentRun]]:
    """(proposal | repair N, the run) for each agent run of the iteration."""
    labelled = [("proposal", it.record.get("proposal"))]
    labelled += [(f"repair {i}", r) for i, r in enumerate(it.record.get("repairs") or (), 1)]
    return [(label, runs[0]) for label, details in labelled if (runs := agent_runs({"proposal": details}))]


def _cost_total(cost: float, runs: int, without: int) -> str:
    if without >= runs:
        return "not reported"
    return fmt.usd(cost) + (f" (+ {without} run(s) that reported none)" if without else "")


def _budget(value: float | int, write: Any) -> str:
    return f" of a budget of {write(value)}" if value else ""


def _tokens(r: AgentRun) -> str:
    if r.input_tokens is None and r.output_tokens is None:
        return "not reported"
    return " / ".join(
        fmt.count(v) if v is not None else fmt.DASH for v in (r.input_tokens, r.cache_read_tokens, r.output_tokens)
    )


def _session(r: AgentRun) -> str:
    if not r.session_id:
        return fmt.DASH
    return f"`{r.session_id}`" + (" (resumed)" if r.resumed else "")


def _transcript(r: AgentRun) -> str:
    if not r.transcript_path:
        return fmt.DASH
    return (
        f"`{r.transcript_path}`"
        + (f" ({fmt.size(r.transcript_bytes)}" if r.transcript_bytes else "")
        + (", cut)" if r.transcript_cut else ")" if r.transcript_bytes else "")
    )

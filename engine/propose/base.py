"""The proposer interface and the plan file (DESIGN.md §10).

A proposer turns the current best tree into a candidate in `cand/` and writes a plan:
first line the hypothesis, an optional line `target_class: <class>`, an optional line
`scope: global`. The engine reads the plan back with `parse_plan`; it never passes
anything from a plan to a shell.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kopt_supervisor.engine.config import Config


@dataclass(frozen=True)
class Plan:
    hypothesis: str
    target_class: str | None = None
    scope: str = "class"
    """"global" (all classes must improve) or "class" (the target class must improve).
    A plan with no target class is global."""
    text: str = ""


def parse_plan(text: str) -> Plan:
    lines = [ln.strip() for ln in text.splitlines()]
    body = [ln for ln in lines if ln]
    hypothesis = ""
    target: str | None = None
    scope: str | None = None
    for ln in body:
        m = re.match(r"(?i)^target_class\s*:\s*(.+)$", ln)
        if m:
            target = m.group(1).strip() or None
            continue
        m = re.match(r"(?i)^scope\s*:\s*(\w+)\s*$", ln)
        if m:
            scope = m.group(1).lower()
            continue
        if not hypothesis:
            hypothesis = ln.lstrip("#").strip()
    if target is None or scope == "global":
        scope, target = "global", None if scope == "global" else target
    return Plan(hypothesis[:500], target, scope or "class", text)


def format_plan(hypothesis: str, target_class: str | None, body: str = "") -> str:
    lines = [hypothesis.strip()]
    lines.append(f"target_class: {target_class}" if target_class else "scope: global")
    if body:
        lines += ["", body.rstrip()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ProposalContext:
    """What a proposer is given for one attempt."""

    iteration: int
    repair: int
    """0, or 1..N during a correctness repair of the same hypothesis."""
    worktree: Path
    workspace: Path
    prompt_path: Path
    plan_path: Path
    log_dir: Path
    config: Config
    best_commit: str
    classes: list[str]
    history: list[dict[str, Any]]
    """Unmasked iteration records (memory/vN.json's fields), oldest first."""
    env: dict[str, str] = field(default_factory=dict)
    run: Callable[..., Any] | None = None
    """The engine's interruptible subprocess runner (`runner.run`-like)."""
    wait_for_command: Callable[[set[str], float], Any] | None = None
    """Block until the engineer sends one of these command kinds (manual proposer)."""


@dataclass(frozen=True)
class Proposal:
    ok: bool
    reason: str = ""
    """Why it failed (timeout, exit code, no change) or a note."""
    details: dict[str, Any] = field(default_factory=dict)
    """Proposer-specific, stored in memory/vN.json `proposal` (the tune point, the command)."""


class Proposer(Protocol):
    kind: str
    # optional: `instant = True` for a proposer that runs inside the engine in a moment (the
    # tune proposer); the loop then keeps a serving bench up across the proposal

    def propose(self, ctx: ProposalContext) -> Proposal:
        """Edit ctx.worktree into a candidate and write ctx.plan_path."""
        ...

"""The proposer interface, the plan file (docs/design.md §10) and the `manual` proposer.

A proposer turns the current best tree into a candidate in `cand/` and writes a plan:
first line the hypothesis, an optional line `target_class: <class>`, an optional line
`scope: global`. The engine reads the plan back with `parse_plan`; it never passes
anything from a plan to a shell. `assess_plan` checks that the plan points at evidence of
the context pack it was written from (engine.propose.context).

The `manual` proposer: the engineer edits `cand/` and tells the engine to evaluate. It waits
for a `submit` command (`kopt submit TAG "hypothesis" [--class C] [--lane N]`, or an agent
through `kopt mcp`), then writes the plan from it. While it waits the run's state says so.
With several lanes ([parallel] lanes, docs/lanes.md) each lane's manual proposer waits for a
submit addressed to its own lane, and evaluates that lane's worktree: a submit names its lane
(`submit_lane`), is never taken by another lane, and one naming a lane the run does not have
is answered "rejected" by the engine (`route_submit`). While a lane waits, the engine says so
in the run's meta (`wait_key(lane)`), where clients read which lanes wait and where each
lane's worktree is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.errors import BadInput


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
    """The engine's interruptible subprocess runner (`runner.command.run`-like)."""
    wait_for_command: Callable[[set[str], float], Any] | None = None
    """Block until the engineer sends one of these command kinds (manual proposer)."""
    prompt_json_path: Path | None = None
    """The context pack as JSON, beside KOPT_PROMPT (default: prompt_path with .json)."""
    handed_back: dict[str, Any] | None = None
    """With lanes: the change this iteration proposed before, which no longer applies on the
    BEST another lane kept meanwhile ({"from", "onto", "why", "hypothesis", "proposal": its
    details}); propose again on `best_commit` (None: a first proposal)."""


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


# ---------------------------------------------------------------------------------------
# Plans that point at evidence (the context pack's vocabulary)

PLAN_MAX_CHARS = 20000


@dataclass(frozen=True)
class Citation:
    kind: str
    """"class", "kernel" or "metric"."""
    term: str
    """The pack's own name for it (a class key, a kernel name, a metric label)."""
    evidence: str
    """The line of evidence the pack showed for it."""


@dataclass(frozen=True)
class PlanAssessment:
    ok: bool
    """False: a failed proposal (an empty plan, an unknown target class)."""
    plan: Plan
    citations: tuple[Citation, ...] = ()
    flags: tuple[str, ...] = ()
    """"uncited": the plan names no config class, profiled kernel or metric of the pack."""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "hypothesis": self.plan.hypothesis,
            "target_class": self.plan.target_class,
            "scope": self.plan.scope,
            "flags": list(self.flags),
            "reason": self.reason,
            "citations": [{"kind": c.kind, "term": c.term, "evidence": c.evidence} for c in self.citations],
        }


def _plan_pack(pack_json: Any) -> dict[str, Any]:
    if isinstance(pack_json, str | bytes):
        try:
            pack_json = json.loads(pack_json)
        except ValueError:
            return {}
    return dict(pack_json) if isinstance(pack_json, dict) else {}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _word(term: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(term) + r"(?![\w])", re.IGNORECASE)


def _class_pattern(key: str) -> re.Pattern[str]:
    """A class key `a=1,b=2` as written in prose: spaces around `=` and after `,` allowed."""
    parts = [re.escape(p.strip()).replace("=", r"\s*=\s*") for p in key.split(",")]
    return re.compile(r"(?<![\w=])" + r",\s*".join(parts) + r"(?![\w])", re.IGNORECASE)


def assess_plan(plan_text: str, pack_json: Any) -> PlanAssessment:
    """Read a plan against the context pack it was written from (its JSON, as text or a
    dict). The first line is the hypothesis: an empty plan fails, so does a target class
    the bench does not have. A plan that cites nothing of the pack (a class key, a kernel
    name from the profile, or a metric the pack showed) is accepted but flagged "uncited".
    The `target_class:`/`scope:` lines do not count as citations: evidence is in the prose.
    Pure."""
    from kopt_supervisor.engine.propose.context_data import METRIC_TERMS
    from kopt_supervisor.engine.propose.context_inputs import kernel_short

    text = (plan_text or "")[:PLAN_MAX_CHARS]
    plan = parse_plan(text)
    if not plan.hypothesis:
        return PlanAssessment(False, plan, reason="the plan is empty (first line: the hypothesis)")
    pack = _plan_pack(pack_json)
    evidence = _dict(pack.get("evidence"))
    classes = _dict(evidence.get("classes"))
    kernels = _dict(evidence.get("kernels"))
    metrics = _dict(evidence.get("metrics"))
    if plan.target_class and classes and plan.target_class not in classes:
        return PlanAssessment(
            False,
            plan,
            reason=f"target_class {plan.target_class!r} is not a class of this bench (classes: {', '.join(classes)})",
        )
    prose = "\n".join(ln for ln in text.splitlines() if not re.match(r"(?i)^\s*(target_class|scope)\s*:", ln))
    cites: list[Citation] = []
    for key, line in classes.items():
        if _class_pattern(str(key)).search(prose):
            cites.append(Citation("class", str(key), str(line)))
    for name, line in kernels.items():
        short = kernel_short(str(name))
        names = {str(name), short} if len(short) >= 4 else {str(name)}
        if any(_word(n).search(prose) for n in names):
            cites.append(Citation("kernel", str(name), str(line)))
    for label, line in metrics.items():
        terms = METRIC_TERMS.get(str(label))
        if terms is not None:
            hit = any(_word(t).search(prose) for t in terms)
        else:  # the bench's own metric column: a short name counts in backticks or after a number
            hit = bool(
                re.search(r"`" + re.escape(str(label)) + r"`", prose)
                or re.search(r"\d\s*" + re.escape(str(label)) + r"(?![\w])", prose)
                or len(str(label)) >= 4
                and _word(str(label)).search(prose)
            )
        if hit:
            cites.append(Citation("metric", str(label), str(line)))
    if not cites:
        why = (
            "the plan names no config class, profiled kernel or metric from the context pack"
            if pack
            else "no context pack to check the plan against"
        )
        return PlanAssessment(True, plan, (), ("uncited",), why)
    return PlanAssessment(True, plan, tuple(cites))


WAIT_KEY_PREFIX = "submit_wait:"


def wait_key(lane: int) -> str:
    """The meta key where lane `lane`'s manual proposer says whether it waits for a submit: a
    dict with `lane`, `worktree` (absolute), `waiting`, `version`, `repair` and the engine's
    `pid` (a wait published by an engine that is gone is no wait)."""
    return f"{WAIT_KEY_PREFIX}{lane}"


def lanes_text(lanes: int) -> str:
    return f"{lanes} lane{'s' if lanes != 1 else ''}: {', '.join(str(i) for i in range(lanes))}"


def submit_lane(args: Mapping[str, Any], lanes: int) -> int | None:
    """The lane a submit is addressed to: its `lane` argument; none named, lane 0 on a run of
    one lane and None on a run of several (it must name one). BadInput for a lane the run does
    not have."""
    lane = args.get("lane")
    if lane is None:
        return 0 if lanes == 1 else None
    if isinstance(lane, bool) or not isinstance(lane, int) or not 0 <= lane < lanes:
        shown = repr(lane) if len(repr(lane)) <= 20 else f"{repr(lane)[:20]}..."
        raise BadInput(f"no lane {shown} (the run has {lanes_text(lanes)})")
    return lane


def route_submit(lanes: int, mine: int) -> Callable[[Mapping[str, Any]], bool | str]:
    """The filter of lane `mine`'s wait (engine/loop/control.py `Control.wait_for`): True for a
    submit addressed to this lane, False for another lane's (left for it), and the rejection's
    text for a submit no lane of the run can take."""

    def route(args: Mapping[str, Any]) -> bool | str:
        try:
            lane = submit_lane(args, lanes)
        except BadInput as e:
            return str(e)
        if lane is None:
            return f"the submit names no lane (the run has {lanes_text(lanes)}): send it with --lane N"
        return lane == mine

    return route


class ManualProposer:
    kind = "manual"

    def propose(self, ctx: ProposalContext) -> Proposal:
        assert ctx.wait_for_command is not None, "the engine passes its command wait"
        cmd = ctx.wait_for_command({"submit"}, float("inf"))
        hypothesis = str(cmd.args.get("hypothesis") or "").strip() or "manual change"
        target = cmd.args.get("target_class") or None
        if ctx.repair and not cmd.args.get("hypothesis"):
            hypothesis = "repair"
        ctx.plan_path.parent.mkdir(parents=True, exist_ok=True)
        ctx.plan_path.write_text(format_plan(hypothesis, target, str(cmd.args.get("notes") or "")))
        return Proposal(True, "", {"submitted_by": cmd.source})

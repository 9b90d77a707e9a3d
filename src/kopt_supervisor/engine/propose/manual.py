"""The `manual` proposer: the engineer edits `cand/` and tells the engine to evaluate.

It waits for a `submit` command (`kopt submit TAG "hypothesis" [--class C] [--lane N]`, or an
agent through `kopt mcp`), then writes the plan from it. While it waits the run's state says so.

With several lanes ([parallel] lanes, docs/lanes.md) each lane's manual proposer waits for a
submit addressed to its own lane, and evaluates that lane's worktree: a submit names its lane
(`submit_lane`), is never taken by another lane, and one naming a lane the run does not have is
answered "rejected" by the engine (`route_submit`). While a lane waits, the engine says so in
the run's meta (`wait_key(lane)`), where clients read which lanes wait and where each lane's
worktree is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.propose.base import Proposal, ProposalContext, format_plan

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

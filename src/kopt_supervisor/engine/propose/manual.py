"""The `manual` proposer: the engineer edits `cand/` and tells the engine to evaluate.

It waits for a `submit` command (`kopt submit TAG "hypothesis" [--class C]`, or the TUI),
then writes the plan from it. While it waits the run's state says so.
"""

from __future__ import annotations

from kopt_supervisor.engine.propose.base import Proposal, ProposalContext, format_plan


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

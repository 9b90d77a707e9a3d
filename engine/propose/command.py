"""The `command` proposer: any program (an agent CLI, a script) edits `cand/` (DESIGN.md §10).

The configured command runs with the working directory `cand/`, the KOPT_* variables, and
its {prompt}, {plan} and {worktree} placeholders filled with shell-quoted paths. Exit 0
means the candidate is ready; anything else, or a timeout, is a failed proposal.
"""

from __future__ import annotations

import shlex

from kopt_supervisor.engine.propose.base import Proposal, ProposalContext


def fill_placeholders(template: str, ctx: ProposalContext) -> str:
    values = {"{prompt}": ctx.prompt_path, "{plan}": ctx.plan_path, "{worktree}": ctx.worktree}
    out = template
    for k, v in values.items():
        out = out.replace(k, shlex.quote(str(v)))
    return out


class CommandProposer:
    kind = "command"

    def __init__(self, command: str, timeout_s: float) -> None:
        self.command = command
        self.timeout_s = timeout_s

    def propose(self, ctx: ProposalContext) -> Proposal:
        assert ctx.run is not None, "the engine passes its runner"
        cmd = fill_placeholders(self.command, ctx)
        name = f"proposer{'_repair' + str(ctx.repair) if ctx.repair else ''}"
        result = ctx.run(cmd, cwd=ctx.worktree, name=name, timeout_s=self.timeout_s, env=ctx.env)
        details = {"command": cmd, "exit": result.returncode, "seconds": round(result.duration_s, 1)}
        if not result.ok:
            tail = result.tail(3)
            return Proposal(False, f"proposer {result.why()}" + (f": {tail.splitlines()[-1]}" if tail else ""), details)
        return Proposal(True, "", details)

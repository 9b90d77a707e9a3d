"""The propose step: the context a proposer is handed (KOPT_PROMPT and the KOPT_* variables)
and the proposer's run, for one lane (DESIGN.md §10).

A proposer that takes time (an agent, the engineer) first gets the lane's serving bench
closed, so nothing of kopt's holds GPU memory while it works. Its result, whatever it is, is
recorded in the iteration (`proposal`, or `repairs` for a correctness repair).
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine import bookkeeping, gitops, projections
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.loop.context import RunContext
from kopt_supervisor.engine.loop.control import Step
from kopt_supervisor.engine.loop.evidence import summary_of
from kopt_supervisor.engine.loop.lane import Lane, acquire
from kopt_supervisor.engine.propose import Proposal, ProposalContext, Proposer
from kopt_supervisor.engine.propose.prompt import render_prompt
from kopt_supervisor.engine.records import Iteration, Phase
from kopt_supervisor.engine.workspace import write_atomic


class Proposing:
    def __init__(self, ctx: RunContext, proposer: Proposer) -> None:
        self.ctx = ctx
        self.proposer = proposer

    @property
    def instant(self) -> bool:
        """A proposer that runs inside the engine in a moment (tune): the serving bench stays up."""
        return bool(getattr(self.proposer, "instant", False))

    def propose(self, it: Iteration, lane: Lane, *, repair: int = 0,
                failing: list[dict[str, Any]] | None = None) -> Proposal:
        ctx = self.ctx
        ctx.save(it, Phase.PROPOSE)
        if not self.instant and lane.measurer is not None:
            lane.measurer.close()  # an agent or the engineer may take hours: no idle GPU memory held
        if repair:  # best/ as clean as at the iteration's start (the bench wrote there since)
            gitops.reset_clean(lane.best, it.best_commit_before or ctx.best_commit())
        ctx.progress(it, "propose", f"proposer ({self.proposer.kind})" + (f", repair {repair}" if repair else ""))
        lease = acquire(ctx, lane, it)
        with ctx.clock(it, "proposer_s"):
            proposal = self._run(it, lane, lease.env, repair, failing)
        if repair == 0:
            it.record["proposal"] = proposal.details
        else:
            it.record.setdefault("repairs", []).append(proposal.details)
        ctx.save(it)
        return proposal

    def _run(self, it: Iteration, lane: Lane, gpu_env: dict[str, str], repair: int,
             failing: list[dict[str, Any]] | None) -> Proposal:
        ctx = self.ctx
        its = ctx.store.iterations(include_masked=False)
        history = [projections.memory_record(h) for h in its if h.final or h.awaiting_review]
        best_it = bookkeeping.best_iteration(its)
        prompt_path = ctx.ws.prompt_path(it.version, repair)
        prompt = render_prompt(
            ctx.cfg, iteration=it.version, repair=repair, best_commit=it.best_commit_before or "",
            best_per_class=projections.best_per_class(its), classes=ctx.store.get("classes", []),
            profile=summary_of(best_it.record.get("profile")) if best_it else None,
            recent_regressions=bookkeeping.counters(its).recent_regressions, history=history, failing_rows=failing,
            hypothesis=it.hypothesis, roofline=best_it.record.get("roofline") if best_it else None)
        try:
            prompt_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(prompt_path, prompt)
        except OSError as e:  # a full disk: no proposal without its prompt (not a crash)
            ctx.event("disk", f"cannot write {prompt_path}: {e}", level="error")
            return Proposal(False, f"cannot write the prompt: {e}")
        plan = ctx.ws.plan_path(it.version)
        env = {**gpu_env, **ctx.cfg.target.env, "KOPT_ITERATION": str(it.version), "KOPT_REPAIR": str(repair),
               "KOPT_PROMPT": str(prompt_path), "KOPT_PLAN": str(plan), "KOPT_WORKSPACE": str(ctx.ws.dir)}

        def run(command: str | list[str], **kw: Any) -> Any:
            return ctx.run(it, command, **kw)

        def wait_for_command(kinds: set[str], timeout_s: float) -> Any:
            return ctx.control.wait_for(kinds, timeout_s, lambda: ctx.progress(
                None, "propose", f"waiting for `kopt submit {ctx.ws.tag}` (manual proposer)"))

        pctx = ProposalContext(
            iteration=it.version, repair=repair, worktree=lane.cand, workspace=ctx.ws.dir, prompt_path=prompt_path,
            plan_path=plan, log_dir=ctx.ws.log_dir(it.version), config=ctx.cfg,
            best_commit=it.best_commit_before or "", classes=ctx.store.get("classes", []), history=history,
            env=env, run=run, wait_for_command=wait_for_command)
        try:
            with ctx.control.during(Step.PROPOSE):
                return self.proposer.propose(pctx)
        except KoptFailure as e:
            return Proposal(False, f"proposer failed: {e}")

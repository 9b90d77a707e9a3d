"""The review protocol: a borderline candidate waits for the engineer (the TUI's `a`/`r`,
`kopt accept|reject`), who may also ask for more rounds; unanswered after
`[decide].review_timeout_s`, the review policy decides (docs/design.md §5 step 4).

The review is written to the store before the wait (status borderline, its deadline), so an
engine that dies while waiting leaves it open, and the next engine resumes it with the
deadline it had (`resume`).
"""

from __future__ import annotations

import time

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.decide import Policy, Verdict, review_outcome
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.loop.context import RunContext, with_
from kopt_supervisor.engine.loop.lane import Lane
from kopt_supervisor.engine.loop.rounds import CorrectnessFailure, DecisionRounds
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.store import Command


class ReviewProtocol:
    def __init__(self, ctx: RunContext, rounds: DecisionRounds) -> None:
        self.ctx = ctx
        self.rounds = rounds

    def ask(self, it: Iteration, lane: Lane, verdict: Verdict) -> tuple[Verdict, str]:
        """Wait for the engineer until the review timeout, then apply the policy. Returns the
        verdict the iteration ends with (accepted, rejected, or a decided re-measurement)
        and who decided ("engine", "engineer", "policy")."""
        ctx = self.ctx
        while True:
            self.open(it, verdict)
            answer = self.wait(it, lane, ctx.cfg.decide.review_timeout_s)
            if answer is None or answer.kind != "more_rounds":
                if answer is not None:
                    ctx.control.finish(answer, "done", f"v{it.version} {answer.kind}ed")
                return self.outcome(verdict, answer)
            ctx.control.finish(answer, "done", f"more rounds for v{it.version}")
            more = self.rounds.decide(it, lane, Stage.EVAL, extra_rounds=ctx.cfg.decide.max_rounds)
            if isinstance(more, CorrectnessFailure):
                return with_(
                    verdict, kind="rejected", reason=f"correctness failed in more rounds: {more.summary()}"
                ), "engine"
            verdict = more
            if verdict.kind != "borderline":
                it.status = Status.RUNNING
                ctx.save(it)
                return verdict, "engine"

    def open(self, it: Iteration, verdict: Verdict) -> None:
        deadline = time.time() + self.ctx.cfg.decide.review_timeout_s
        it.status = Status.BORDERLINE
        it.record["review"] = {"opened_at": time.time(), "deadline": deadline, "reason": verdict.reason}
        it.record["decision"] = {**verdict.to_dict(), "by": "engine"}
        self.ctx.set_state("awaiting_review")  # before the row: a reader never sees one without the other
        self.ctx.save(it, Phase.REVIEW)
        self.ctx.event(
            "review", f"v{it.version} is borderline: {verdict.reason}; awaiting the engineer", it=it, level="warn"
        )

    def wait(self, it: Iteration, lane: Lane, seconds: float) -> Command | None:
        ctx = self.ctx
        if lane.measurer is not None:
            lane.measurer.close()  # nothing of kopt's holds the GPU while a human thinks
        ctx.set_state("awaiting_review")
        said: list[int] = []

        def tick(left: float) -> None:
            ctx.progress(it, "review", f"awaiting the engineer: {left:.0f} s left")
            minute = int(left // 60)
            if not said or said[-1] != minute:  # the log (`kopt run --foreground`): at the start, then every minute
                said.append(minute)
                ctx.log(
                    f"v{it.version} awaits your review, {left:.0f} s left: kopt accept {ctx.ws.tag} "
                    f"v{it.version} | kopt reject {ctx.ws.tag} v{it.version} (or the TUI)"
                )

        try:
            return ctx.control.await_answer(it.version, seconds, tick)
        finally:
            ctx.set_state("paused" if ctx.control.paused else "running")

    def outcome(self, verdict: Verdict, answer: Command | None) -> tuple[Verdict, str]:
        """The review's outcome as a verdict: the engineer's answer, or the policy's."""
        why = str(answer.args.get("why") or "") if answer else ""
        out = review_outcome(
            verdict,
            answer.kind if answer else None,
            Policy.from_config(self.ctx.cfg.decide, self.ctx.cfg.target.direction),
            why=f"{answer.kind}ed by the engineer: {why} (borderline: {verdict.reason})" if why and answer else "",
        )
        return with_(verdict, kind=out.status, reason=out.reason), out.by

    def resume(self, it: Iteration, lane: Lane) -> tuple[Verdict, str, bool]:
        """A review left open by an engine that stopped: wait out what is left of its
        deadline. Returns the outcome, who decided, and whether the candidate in the lane is
        still exactly the one evaluated (an accepted candidate is kept only then)."""
        ctx = self.ctx
        verdict = Verdict.from_dict(it.record.get("decision") or {"verdict": "borderline", "reason": "borderline"})
        deadline = float((it.record.get("review") or {}).get("deadline", time.time()))
        gitops.ensure_worktree(
            ctx.store.get("repo"), lane.best, branch=ctx.ws.branch, commit=it.best_commit_before or ""
        )
        gitops.reset_clean(lane.best, it.best_commit_before or ctx.history.best_commit())
        # the wall-clock deadline is all that survives a restart; a clock that jumped
        # meanwhile never makes the wait longer than review_timeout_s
        left = min(max(0.0, deadline - time.time()), ctx.cfg.decide.review_timeout_s)
        answer = self.wait(it, lane, left)
        if answer is not None and answer.kind == "more_rounds":
            ctx.control.finish(answer, "rejected", "more rounds are not possible after an engine restart")
            answer = None
        if answer is not None:
            ctx.control.finish(answer, "done", f"v{it.version} {answer.kind}ed")
        outcome, by = self.outcome(verdict, answer)
        return outcome, by, self.candidate_intact(it, lane)

    def candidate_intact(self, it: Iteration, lane: Lane) -> bool:
        try:
            return gitops.head(lane.cand) == it.best_commit_before and gitops.stage_tracked_tree(
                lane.cand
            ) == it.record.get("evaluated_tree")
        except KoptFailure:
            return False

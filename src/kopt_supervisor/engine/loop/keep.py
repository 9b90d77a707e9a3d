"""Keep, discard, and the review a borderline candidate waits in first; and recovery, which holds
every tree to BEST_COMMIT after a crash, a masked restart and at the run's end (at the end, below).

Keep and discard (the reference program's "commit, new BEST_COMMIT" and "revert to
BEST_COMMIT"). A keep formats the candidate (`[format].command`), re-decides the formatted
tree when formatting changed it, records the tree it is about to commit, commits it in the
lane's candidate worktree (parent BEST_COMMIT, a message that says why it worked), and moves
the run's branch and best/ to it. Each durable step is written first (phase commit, then
advance), so recovery can adopt a commit made just before a crash instead of making it twice
(`adopt`). A discard puts the candidate worktree back at BEST_COMMIT.

The review protocol: a borderline candidate waits for the engineer (the TUI's `a`/`r`, `kopt
accept|reject`), who may also ask for more rounds; unanswered after `[decide].review_timeout_s`,
the review policy decides (docs/design.md §5 step 4). Written to the store before the wait (its
deadline), a review outlives an engine that dies waiting: the next one resumes it (`resume`).

Recovery: make the workspace consistent with the store after any crash, keep the worktrees
at BEST_COMMIT, and apply a masked partial restart (docs/design.md §6, §7). The engine writes
what it is about to do (the iteration's phase) before doing it, so after a kill -9 anywhere
`recover()` finds: orphan processes of the recorded child group (killed, recognised by the
workspace marker in their environment), an iteration left running (closed as interrupted —
or, if it was committing, its commit adopted when it is exactly the one meant: `adopt`),
projections behind the store (rewritten), worktrees off BEST_COMMIT (reset; a deleted worktree
re-created). A review left open stays open: the machine resumes it."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from kopt_supervisor.engine import KoptError, KoptFailure, gitops, history, sandbox, treecheck
from kopt_supervisor.engine.decide.estimate import Pair, Policy, Verdict, class_samples, estimate_class
from kopt_supervisor.engine.decide.review import review_outcome
from kopt_supervisor.engine.decide.verdict import voting_classes
from kopt_supervisor.engine.loop.context import BEST, Lane, RunContext, carried, last_line, with_
from kopt_supervisor.engine.loop.control import MARKER, Interrupt, Step
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.loop.measure import (
    CorrectnessFailure,
    DecisionRounds,
    StaleBest,
    cand_medians,
    guard_configs,
    pairs,
)
from kopt_supervisor.engine.loop.proposal import ALWAYS_PROTECTED, keep_unsubmitted, restore_best
from kopt_supervisor.engine.loop.spent import spend
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.runner import end_leftovers, kill_orphans
from kopt_supervisor.engine.store import Command, fault_step

VERDICT_STATUS = {
    "regression": Status.REGRESSION,
    "likely_regression": Status.LIKELY_REGRESSION,
    "tie": Status.TIE,
    "split": Status.SPLIT,
    "rejected": Status.REJECTED,
}
"""What a verdict that is not a keep ends as (anything else: rejected)."""


class Keeper:
    def __init__(self, ctx: RunContext, rounds: DecisionRounds, evidence: Evidence) -> None:
        self.ctx = ctx
        self.rounds = rounds
        self.evidence = evidence

    def keep(self, it: Iteration, lane: Lane, verdict: Verdict, by: str) -> None:
        ctx = self.ctx
        status = Status.ACCEPTED if verdict.kind == "accepted" else Status.KEEP
        if ctx.cfg.format.command:
            problem = self.format(it, lane, verdict, status)
            if problem is not None:
                return self.discard(it, lane, problem[0], problem[1], verdict=problem[2] or verdict, by=by)
        if carried(it):  # what is committed was measured against the new BEST by its confirmation
            self.classes_on_new_best(it)
        # the roofline of what is committed: the formatted tree's figures when it was measured again
        stage = Stage.VERIFY if "verify" in it.record else Stage.REVERIFY if carried(it) else Stage.EVAL
        self.evidence.roofline(it, cand_medians(ctx, it, stage))
        with ctx.clock(it, "commit_s"):
            with spend(it, "wait"):  # other lanes' keeps commit first: this lane waits its turn
                BEST.acquire()
            try:  # keeps are committed one at a time, each on the BEST it beat
                self.check_best(it)
                ctx.save(it, Phase.COMMIT)
                tree = it.record["commit_tree"] = gitops.stage_tracked_tree(lane.cand)
                it.record["keep_status"] = status
                ctx.save(it)
                sha = gitops.commit(lane.cand, commit_message(ctx.ws.tag, it, verdict), tree=tree)
                fault_step(f"v{it.version} git commit")
                it.commit = sha
                ctx.save(it, Phase.ADVANCE)
                gitops.reset_clean(ctx.ws.best, sha)  # the run's branch (best/ is its worktree)
                ctx.close(it, status, verdict.reason, verdict=verdict, by=by)
            finally:
                BEST.release()
        if lane.best != ctx.ws.best:  # the lane's own copy: no other lane reads it, no lock needed
            gitops.reset_clean(lane.best, sha, detach=True)

    def check_best(self, it: Iteration) -> None:
        """The cheap check before a keep is confirmed (the profiler, fresh servers cost
        seconds to minutes): StaleBest when another lane's keep has moved BEST since this
        candidate was decided against it (`keep` checks again under the lock)."""
        current = self.ctx.history.best_commit()
        if it.best_commit_before != current:
            raise StaleBest(current)

    def on_best(self, it: Iteration, lane: Lane) -> None:
        """Before anything is measured: when another lane's keep has moved BEST since this
        candidate was proposed, put its change on the new BEST now (nothing measured is lost);
        StaleBest when it no longer applies there (the loop hands it back to its proposer)."""
        current = self.ctx.history.best_commit()
        if it.best_commit_before == current:
            return
        if not it.record.get("evaluated_tree"):  # not measured yet: the change as the proposer left it
            it.record["evaluated_tree"] = gitops.stage_all_tree(lane.cand, force=it.record.get("forced_paths", []))
        if not self.rebase(it, lane, current):
            raise StaleBest(current, tried=True)

    def rebase(self, it: Iteration, lane: Lane, best: str) -> bool:
        """Another lane's keep moved BEST while this candidate was decided against the one
        before: put its change on the new BEST (False: it no longer applies), so that it is
        decided again against what it would be kept on."""
        old = it.best_commit_before or ""
        applied = gitops.move_change(lane.cand, old, str(it.record.get("evaluated_tree") or ""), best)
        if lane.best != self.ctx.ws.best:
            gitops.reset_clean(lane.best, best, detach=True)
        if not applied:
            return False
        it.best_commit_before = best
        it.record.setdefault("rebased", []).append({"from": old, "onto": best, "t": time.time()})
        self.ctx.save(it)
        self.ctx.event(
            "lanes",
            f"v{it.version}: BEST moved to {best[:10]} while it was decided; its change "
            "applies there and is decided again",
            it=it,
        )
        return True

    def carry(self, it: Iteration, lane: Lane, claim: Verdict) -> Verdict:
        """A keep decided against a BEST another lane's keep has moved since, its change now on
        the new BEST (rebased, or the tune proposer's same point proposed there): the verdict
        the loop confirms there instead of deciding again from scratch. The keep confirmation
        (Evidence.confirm, confirm_keep) decides only what it claims, against the new BEST,
        in fresh processes: a gain that does not hold there, or a class slower there beyond
        its margin, ends it. What it will be kept as is the candidate's tree now."""
        moves = [*(it.record.get("rebased") or []), *(it.record.get("handed_back") or [])]
        old = str(max(moves, key=lambda m: m.get("t", 0.0)).get("from", "")) if moves else ""
        new = it.best_commit_before or ""
        it.record["evaluated_tree"] = gitops.stage_all_tree(lane.cand, force=it.record.get("forced_paths", []))
        self.ctx.store.delete_samples(it.version, Stage.REVERIFY)  # a confirmation cut short was of the old BEST
        it.record.setdefault("carried", []).append({"decided_on": old, "onto": new, "t": time.time()})
        self.ctx.save(it)
        self.ctx.event(
            "lanes",
            f"v{it.version}: a keep decided against {old[:10]}; its change is on the new BEST "
            f"{new[:10]}, where only its claim is confirmed",
            it=it,
        )
        return with_(
            claim,
            reason=f"{claim.reason} (decided against BEST {old[:10]}; another lane's keep moved BEST "
            f"to {new[:10]}, where its claim is confirmed)",
        )

    def classes_on_new_best(self, it: Iteration) -> None:
        """A carried keep's classes as its confirmation measured them against the new BEST (the
        history's figures of the tree it commits: best_per_class, the speedup), estimated as a
        decision's are; the decision's, against the BEST it started on, kept beside them
        (`carried`' last entry). Kept without a look on the new BEST (a borderline the engineer
        accepted): its classes say so (`old_best`), and the history's figures skip them."""
        ctx = self.ctx
        decided = dict(it.record.get("classes") or {})
        it.record["carried"][-1]["classes"] = decided
        done = pairs(ctx, it, Stage.REVERIFY)
        if not done:
            it.record["classes"] = {cls: {**c, "old_best": True} for cls, c in decided.items()}
            ctx.event(
                "lanes",
                f"v{it.version}: kept without a look on the new BEST: its figures are of the BEST it was "
                "decided on, and the history's speedup leaves them out",
                it=it,
                level="warn",
            )
            return
        policy = Policy.from_config(ctx.cfg.decide, ctx.cfg.target.direction)
        votes = voting_classes({p.config: p.cls for p in done}, guard_configs(ctx))
        by: dict[str, list[Pair]] = {}
        for p in done:
            by.setdefault(votes.get(p.config, p.cls), []).append(replace(p, cls=votes.get(p.config, p.cls)))
        rule = replace(policy, min_rounds=2, max_rounds=max(2, len({p.round for p in done})))  # the looks it took
        it.record["classes"] = {
            cls: {
                **estimate_class(cls, ps, class_samples(ps, rule).get(cls, []), rule, final=True).to_dict(),
                "measured": "confirmation",
            }
            for cls, ps in sorted(by.items())
        }

    def hand_back(self, it: Iteration, lane: Lane, best: str) -> dict[str, Any]:
        """A change that no longer applies on `best`: the lane's candidate goes to `best` and
        the iteration will be proposed again there; returns what its proposer is told
        ({"from", "onto", "t", "hypothesis", "why", "proposal": the details it had})."""
        old = it.best_commit_before or ""
        gitops.reset_clean(lane.cand, best, detach=True)
        if lane.best != self.ctx.ws.best:
            gitops.reset_clean(lane.best, best, detach=True)
        back = {
            "from": old,
            "onto": best,
            "t": time.time(),
            "hypothesis": it.hypothesis,
            "why": f"the change no longer applies on the new BEST {best[:10]} (another lane's keep changed "
            f"what it edits since {old[:10]}): propose again on this BEST",
        }
        it.record.setdefault("handed_back", []).append(dict(back))
        it.best_commit_before = best
        it.record.pop("evaluated_tree", None)
        self.ctx.save(it)
        self.ctx.event("lanes", f"v{it.version}: {back['why']}; handed back to the proposer", it=it)
        return {**back, "proposal": it.record.get("proposal")}

    def format(
        self, it: Iteration, lane: Lane, verdict: Verdict, status: Status
    ) -> tuple[Status, str, Verdict | None] | None:
        """Run the formatter; re-decide the tree if it changed. A problem ends the keep."""
        ctx = self.ctx
        ctx.save(it, Phase.KEEP)
        with ctx.control.during(Step.FORMAT), ctx.clock(it, "format_s"):
            jail = ctx.jails.bench(lane.cand, "format", str(it.record.get("evaluated_tree")), gpu=False)
            res = ctx.procs.run(
                it,
                ctx.cfg.format.command,
                cwd=lane.cand,
                name="format",
                timeout_s=ctx.cfg.format.timeout_s,
                confine=jail,
            )
        if not res.ok:
            return Status.FAIL_BENCH, f"the format command {res.why()}: {last_line(res)}", None
        changed = gitops.changed_files(lane.cand, it.best_commit_before or "")
        hit = gitops.matching(changed, [*ctx.cfg.target.protected, *ALWAYS_PROTECTED])
        if hit:
            return Status.FAIL_PROTECTED, f"the format command changed protected file(s): {', '.join(hit)}", None
        if not ctx.cfg.decide.verify_after_format or gitops.stage_tracked_tree(lane.cand) == it.record.get(
            "evaluated_tree"
        ):
            return None
        check = self.rounds.decide(it, lane, Stage.VERIFY)
        if isinstance(check, CorrectnessFailure):
            return Status.FAIL_CORRECTNESS, f"after formatting: {check.summary()}", None
        if check.kind == "keep" or (
            status == Status.ACCEPTED and check.kind not in ("regression", "likely_regression", "split")
        ):
            it.record["verify"] = check.to_dict()
            return None
        return VERDICT_STATUS.get(check.kind, Status.REJECTED), f"after formatting: {check.reason}", check

    def discard(
        self,
        it: Iteration,
        lane: Lane,
        status: Status,
        reason: str,
        *,
        verdict: Verdict | None = None,
        by: str = "engine",
    ) -> None:
        self.ctx.close(it, status, reason, verdict=verdict, by=by)
        self.reset_candidate(lane)

    def reset_candidate(self, lane: Lane) -> None:
        """Roll the lane's candidate back to BEST_COMMIT (the reference program's revert)."""
        try:
            gitops.reset_clean(lane.cand, self.ctx.history.best_commit(), detach=True)
        except KoptError as e:  # cand/ may be no repository at all now: the next sync re-creates it
            self.ctx.event(
                "git", f"could not reset {lane.cand.name}/: {e} (retried at the next iteration)", level="warn"
            )

    def adopt(self, it: Iteration, lane: Lane) -> bool:
        """A keep interrupted while committing: adopt the commit if it is exactly the one meant
        (parent BEST_COMMIT, the recorded tree), else let recovery drop it."""
        sha = it.commit
        if sha is None:
            try:
                head = gitops.head(lane.cand)
                parents, tree = gitops.commit_info(lane.cand, head)
            except KoptFailure:
                return False
            if parents == [it.best_commit_before] and tree == it.record.get("commit_tree"):
                sha = head
        if sha is None:
            return False
        it.commit = sha
        it.status, it.phase, it.finished_at = Status(it.record.get("keep_status", Status.KEEP)), Phase.DONE, time.time()
        self.ctx.end_row(it)  # sealed, and the chain's head moved, with the row
        self.ctx.event("recover", f"v{it.version}: adopted commit {sha[:10]} made before the crash", it=it)
        self.ctx.projections.write_memory(it)
        return True


def commit_message(tag: str, it: Iteration, verdict: Verdict) -> str:
    lines = [it.hypothesis[:72], "", f"kopt v{it.version} ({tag}): {verdict.kind} — {verdict.reason}", ""]
    for c in verdict.classes:
        lines.append(
            f"  {c.cls}: {c.best:.4g} -> {c.cand:.4g} ({c.delta_pct:+.2f}%, "
            f"{(c.lo - 1) * 100:+.2f}..{(c.hi - 1) * 100:+.2f}%, {c.verdict})"
        )
    lines += [
        "",
        f"Measured paired with the previous best over {verdict.rounds} rounds ({verdict.gpu_seconds:.1f} GPU-s).",
    ]
    if it.target_class:
        lines.append(f"Target class: {it.target_class}.")
    return "\n".join(lines) + "\n"


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
            if carried(it):  # its looks are of the BEST it was decided on: more rounds are a decision on this one
                it.record["carried"][-1]["decided_again"] = True
                more = self.rounds.decide(it, lane, Stage.EVAL)
            else:
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
            lane.measurer.release()  # nothing of kopt's holds the GPU while a human thinks
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


# ---------------------------------------------------------------------------------------
# Recovery: every tree held to BEST_COMMIT


class Recovery:
    def __init__(self, ctx: RunContext, keeper: Keeper) -> None:
        self.ctx = ctx
        self.keeper = keeper

    def recover(self, lanes: list[Lane]) -> None:
        ctx = self.ctx
        sandbox.clear_scratch(ctx.ws.dir)  # a sandbox's private git copy left by a crash
        pgid = ctx.store.get("child_pgid")
        if pgid:
            n = kill_orphans(int(pgid), (MARKER, str(ctx.ws.dir)))
            if n:
                ctx.event("recover", f"killed {n} orphan process(es) of group {pgid}", level="warn")
            ctx.store.set("child_pgid", None)
        self.end_leftovers("left by an earlier session")
        by_index = {lane.index: lane for lane in lanes}
        for row in ctx.history.rows():
            if row.status != Status.RUNNING:
                continue
            it = ctx.store.iteration(row.version)
            assert it is not None
            lane = by_index.get(int(it.record.get("lane", 0)), lanes[0])
            if it.phase in (Phase.COMMIT, Phase.ADVANCE) and self.keeper.adopt(it, lane):
                continue
            it.status, it.phase, it.finished_at = Status.INTERRUPTED, Phase.DONE, time.time()
            it.record.setdefault("decision", {}).update(
                {
                    "verdict": Status.INTERRUPTED,
                    "reason": f"engine stopped during {row.phase or 'start'}",
                    "by": "engine",
                }
            )
            ctx.store.save_iteration(it)
            ctx.event("recover", f"v{it.version} was interrupted during {row.phase}; closed", it=it, level="warn")
            ctx.projections.write_memory(it)
        ctx.verify(lanes)
        if not any(r.awaiting_review for r in ctx.history.rows()):
            if all(lane.best != ctx.ws.best for lane in lanes):
                self.sync_branch()
            for lane in lanes:
                self.sync(lane)
        self.refresh_projections()

    def at_end(self, lanes: list[Lane]) -> None:
        """The session ends with no process of the run left, its branch at BEST_COMMIT and
        every lane's trees there too, whatever moved or edited them meanwhile (what was found
        in a best tree is said; a candidate awaiting review stays for the engineer; a run
        whose chain of keeps was tampered with moves no ref), its projections as the store
        says."""
        self.end_leftovers("still running at the end of the session")
        try:
            self.ctx.verify(lanes)
            verified = True
        except KoptError as e:
            self.ctx.event("tamper", f"at the end of the run: {e}", level="error")
            verified = False
        self.restore_best_trees(lanes)
        if verified and not any(r.awaiting_review for r in self.ctx.history.rows()):
            try:
                if all(lane.best != self.ctx.ws.best for lane in lanes):
                    self.sync_branch()
                for lane in lanes:
                    self.sync(lane)
            except KoptError as e:  # the next start syncs again
                self.ctx.event("git", f"at the end of the run: {e}", level="warn")
            self.prune_caches(lanes)
        self.refresh_projections()

    def prune_caches(self, lanes: list[Lane]) -> None:
        """The per-tree bench caches of discarded candidates, old bests and re-decisions go
        when the run ends (a run of hundreds of candidates would otherwise keep hundreds of
        compile caches); best's stays, so the next session's baseline need not compile it."""
        best = self.ctx.history.trusted_best()
        try:
            keep = (
                [sandbox.cache_dir(self.ctx.ws.dir, "best", gitops.commit_info(lanes[0].best, best)[1])] if best else []
            )
            removed = sandbox.prune_caches(self.ctx.ws.dir, keep)
        except (KoptError, OSError, ValueError) as e:
            self.ctx.event("cache", f"the bench caches were left as they are: {e}", level="warn")
            return
        if removed:
            self.ctx.log(f"removed {len(removed)} bench cache(s) of this run; kept best's")

    def restore_best_trees(self, lanes: list[Lane]) -> None:
        """Every best tree exactly at BEST_COMMIT: what an unconfined proposer or an escaped
        process changed there since the last look (hard links included, which git's own
        reset leaves alone) is put back and said, never left for whoever runs its bench next."""
        ctx = self.ctx
        with BEST:
            trusted = ctx.history.chain().problem is None  # a tampered run: files put back, no ref moved
            trees = {ctx.ws.best: False, **{lane.best: True for lane in lanes if lane.best != ctx.ws.best}}
            for tree, detach in trees.items():
                try:
                    head = gitops.head(tree)
                    best = ctx.history.best_commit() if trusted else head
                    rb = treecheck.inspect(
                        tree, best, allow=ctx.cfg.target.allow_untracked, modules=(), strict=True, label=f"{tree.name}/"
                    )
                    if head == best and not (rb.differs or rb.hardlinks or rb.problems()):
                        continue
                    restore_best(tree, best, rb, detach=detach)
                except KoptError as e:
                    ctx.event("tamper", f"{tree.name}/ could not be checked or restored: {e}", level="error")
                    continue
                ctx.event(
                    "tamper",
                    f"{tree.name}/ restored to {'BEST_COMMIT' if trusted else 'its commit'} "
                    f"{best[:10]} at the end of the session" + (f": {rb.reason()}" if rb.reason() else ""),
                    level="warn",
                )

    def end_leftovers(self, when: str) -> None:
        """Every process that carries the run's marker (no step runs now): an unconfined
        step's escapee, or an orphan of a crashed engine that left its group."""
        n = end_leftovers(None, self.ctx.procs.marker)
        if n:
            self.ctx.event("recover", f"ended {n} process(es) carrying the run's marker, {when}", level="warn")

    def refresh_projections(self) -> None:
        """memory/vN.json files that differ from the store (a crash between a store write and
        its projection, or an edit behind kopt's back) rewritten, strays removed,
        README/performance.md re-rendered."""
        self.ctx.projections.refresh_memory_files()
        self.ctx.projections.write_projections()

    def sync(self, lane: Lane) -> None:
        """The lane's best tree and candidate worktree exactly at BEST_COMMIT (with one lane its
        best tree is best/, the run's branch; with several, a detached copy of its own)."""
        ctx = self.ctx
        with BEST:
            best = ctx.history.best_commit()
            repo = ctx.store.get("repo")
            trees = [(lane.best, ctx.ws.branch if lane.best == ctx.ws.best else None), (lane.cand, None)]
            for path, branch in trees:
                if gitops.ensure_worktree(repo, path, branch=branch, commit=best):
                    ctx.event(
                        "recover", f"re-created the missing worktree {path.relative_to(ctx.ws.dir)}/", level="warn"
                    )
                stale = gitops.clear_stale_lock(path)
                if stale:
                    ctx.event("recover", f"removed stale git lock(s): {', '.join(stale)}", level="warn")
        gitops.reset_clean(lane.best, best, detach=lane.best != ctx.ws.best)
        keep_unsubmitted(ctx, lane, best)  # what an engineer left in cand/ is saved, never lost
        gitops.reset_clean(lane.cand, best, detach=True)

    def sync_branch(self) -> None:
        """best/ (the run's branch) at BEST_COMMIT: with several lanes no lane measures in it."""
        ctx = self.ctx
        with BEST:
            best = ctx.history.best_commit()
            if gitops.ensure_worktree(ctx.store.get("repo"), ctx.ws.best, branch=ctx.ws.branch, commit=best):
                ctx.event("recover", "re-created the missing worktree best/", level="warn")
            gitops.reset_clean(ctx.ws.best, best)

    def restart(self, request: Interrupt, lanes: list[Lane]) -> None:
        """The masked partial restart: later iterations masked, worktrees back at vK."""
        assert request.version is not None
        for measurer in (lane.measurer for lane in lanes if lane.measurer is not None):
            measurer.close()
        history.restart_from(self.ctx.ws, self.ctx.store, request.version, request.why)
        if all(lane.best != self.ctx.ws.best for lane in lanes):
            self.sync_branch()
        for lane in lanes:
            self.sync(lane)
        self.ctx.projections.write_projections()
        self.ctx.control.restart_applied()

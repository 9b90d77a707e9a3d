"""Recovery: make the workspace consistent with the store after any crash, keep the
worktrees at BEST_COMMIT, and apply a masked partial restart (docs/design.md §6, §7).

The engine writes what it is about to do (the iteration's phase) before doing it, so after
a kill -9 anywhere `recover()` finds: orphan processes of the recorded child group (killed,
recognised by the workspace marker in their environment), an iteration left running (closed
as interrupted — or, if it was committing, its commit adopted when it is exactly the one
meant), projections behind the store (rewritten), worktrees off BEST_COMMIT (reset; a
deleted worktree re-created). A review left open stays open: the machine resumes it.
"""

from __future__ import annotations

import time

from kopt_supervisor.engine import gitops, history, sandbox, treecheck
from kopt_supervisor.engine.errors import KoptError
from kopt_supervisor.engine.loop.context import BEST, RunContext
from kopt_supervisor.engine.loop.control import Interrupt
from kopt_supervisor.engine.loop.keep import Keeper
from kopt_supervisor.engine.loop.lane import Lane
from kopt_supervisor.engine.loop.police import restore_best
from kopt_supervisor.engine.loop.processes import MARKER
from kopt_supervisor.engine.records import Phase, Status
from kopt_supervisor.engine.runner.processes import end_leftovers, kill_orphans


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
        for lane in lanes:
            if lane.measurer is not None:
                lane.measurer.close()
        history.restart_from(self.ctx.ws, self.ctx.store, request.version, request.why)
        if all(lane.best != self.ctx.ws.best for lane in lanes):
            self.sync_branch()
        for lane in lanes:
            self.sync(lane)
        self.ctx.projections.write_projections()
        self.ctx.control.restart_applied()

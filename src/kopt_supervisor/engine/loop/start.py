"""A run's start: recovery, then the baseline (the machine, loop/__init__.py: recover → baseline (v0) → ...).

Recovery: make the workspace consistent with the store after any crash, keep the worktrees
at BEST_COMMIT, and apply a masked partial restart (docs/design.md §6, §7). The engine writes
what it is about to do (the iteration's phase) before doing it, so after a kill -9 anywhere
`recover()` finds: orphan processes of the recorded child group (killed, recognised by the
workspace marker in their environment), an iteration left running (closed as interrupted —
or, if it was committing, its commit adopted when it is exactly the one meant), projections
behind the store (rewritten), worktrees off BEST_COMMIT (reset; a deleted worktree
re-created). A review left open stays open: the machine resumes it.

The baseline (v0): the unmodified tree measured `min_rounds` times, correct on every row, its
classes as decisions will vote in them, what one decision will cost with this bench, its
roofline (the README's Step 0) and its profile. A baseline that fails its own correctness
rule or whose bench fails ends the run with the reason (BaselineFailed)."""

from __future__ import annotations

import statistics
import time

from kopt_supervisor.engine import KoptError, KoptFailure, gitops, history, sandbox, treecheck
from kopt_supervisor.engine.decide import geomean
from kopt_supervisor.engine.decide.estimate import Policy
from kopt_supervisor.engine.decide.verdict import voting_classes
from kopt_supervisor.engine.doctor import capture_environment
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.gpu.gate import NoIdleGpu
from kopt_supervisor.engine.loop.context import BEST, Lane, RunContext, acquire, note_gpu
from kopt_supervisor.engine.loop.control import MARKER, Interrupt
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.loop.keep import Keeper
from kopt_supervisor.engine.loop.measure import failure_of, guard_configs, run_bench
from kopt_supervisor.engine.loop.proposal import restore_best
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.onboard import estimate_decision_s, run_noise_pct
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.runner import end_leftovers, kill_orphans
from kopt_supervisor.engine.store import Sample


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


class BaselineFailed(KoptFailure):
    """The unmodified baseline cannot be measured: the run stops with this reason."""


BASELINE_TRIES = 3
"""Attempts at each baseline run before the run stops. The baseline is the user's unmodified
code, so a run that fails and then passes is the bench's own flakiness, said in the record and
on the dashboard, not a reason to stop the night. Measured on the H200 (2026-11-30): Triton's
layer-norm tutorial asserts its backward against torch's at import with a fixed fp16 tolerance
on fresh random data, accumulated with atomics; it failed 1 baseline run in 3 (and one `kopt
init` in 3), passing on the next. A candidate's run is never tried again (its failure is its
verdict), nor is a baseline run that timed out or flooded its output (BenchError.ended)."""


class Baseline:
    def __init__(self, ctx: RunContext, evidence: Evidence, keeper: Keeper, recovery: Recovery) -> None:
        self.ctx, self.evidence, self.keeper, self.recovery = ctx, evidence, keeper, recovery

    def measure(self, lane: Lane) -> None:
        ctx = self.ctx
        commit = str(ctx.store.get("baseline_commit"))
        it = Iteration(
            0,
            Status.RUNNING,
            phase=Phase.BASELINE,
            hypothesis="baseline (unmodified)",
            scope="global",
            best_commit_before=commit,
            started_at=time.time(),
        )
        ctx.save(it)
        ctx.store.delete_samples(0, Stage.BASELINE)  # a baseline cut short by a crash starts over
        ctx.projections.write_memory(it)
        self.recovery.sync(lane)
        ctx.event("baseline", "measuring the unmodified baseline", it=it)
        n = ctx.cfg.decide.min_rounds
        runs: list[Measurement] = []
        seconds: list[float] = []
        flaky: list[str] = []
        tries = 0
        try:
            while len(runs) < n:
                r = len(runs)
                ctx.progress(it, "baseline", f"baseline run {r + 1}/{n}", r, n)
                lease = acquire(ctx, lane, it)
                best_tree = tree_of(lane.best, commit)
                jail = ctx.jails.bench(lane.best, "best", best_tree)
                env = {**lease.env, **ctx.jails.env("best", best_tree)}
                name = f"baseline_r{r}" + (f"_again{tries}" if tries else "")
                tries += 1
                try:
                    m, secs = ctx.control.preemptible(
                        lambda: run_bench(ctx, it, lane, lane.best, name, env, jail)  # noqa: B023 - run now
                    )
                except BenchError as e:
                    note_gpu(it, lane, lease.before, lane.gate.evidence())
                    if tries >= BASELINE_TRIES or not e.ended:  # a hang or a flood is not tried again
                        raise
                    self.again(it, flaky, r, f"the bench failed: {e}")
                    continue
                note_gpu(it, lane, lease.before, lane.gate.evidence())
                if m.failing:
                    fail = failure_of(m).summary()
                    if tries < BASELINE_TRIES:
                        self.again(it, flaky, r, f"it fails correctness: {fail}")
                        continue
                    self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, f"baseline fails correctness: {fail}")
                    raise BaselineFailed(f"the unmodified baseline fails correctness: {fail}")
                tries = 0
                runs.append(m)
                seconds.append(secs)
                ctx.store.add_samples(
                    Sample(0, Stage.BASELINE, r, 0, "best", c.key, c.cls, c.value, mean=c.mean, last=c.last)
                    for c in m.configs.values()
                )
        except BenchError as e:
            self.keeper.discard(it, lane, Status.FAIL_BENCH, f"baseline bench failed: {e}")
            raise BaselineFailed(f"the baseline bench failed: {e}") from None
        except (Interrupt, NoIdleGpu) as e:
            self.keeper.discard(it, lane, Status.INTERRUPTED, str(e))
            raise
        record_baseline(ctx, it, runs)
        self.estimate_decision_cost(it, runs, seconds)
        it.commit = commit
        values = {k: statistics.median([m.configs[k].value for m in runs if k in m.configs]) for k in runs[-1].configs}
        self.evidence.baseline(it, lane, values)
        ctx.store.set_many(
            {
                "config_columns": list(runs[-1].config_columns),
                "classes": runs[-1].classes(),
                "environment": capture_environment(ctx.cfg, lane.best),
            }
        )
        flakes = f"; {len(flaky)} run(s) failed and passed when run again: the bench is flaky" if flaky else ""
        ctx.close(
            it,
            Status.BASELINE,
            f"baseline over {len(runs[-1].configs)} configs in {len(it.record['classes'])} classes{flakes}",
        )

    def again(self, it: Iteration, flaky: list[str], r: int, what: str) -> None:
        """A baseline run failed with tries left: said, recorded, and run again."""
        flaky.append(f"run {r + 1}: {what}")
        it.record["baseline_flaky"] = list(flaky)
        self.ctx.event(
            "baseline",
            f"baseline run {r + 1} failed ({what}); running it again: the unmodified code failing only "
            f"sometimes is the bench's own flakiness (candidates' runs are never retried)",
            it=it,
            level="warn",
        )

    def estimate_decision_cost(self, it: Iteration, runs: list[Measurement], seconds: list[float]) -> None:
        """What one decision will cost with this bench (from the baseline's runs and the
        policy): said on the dashboard and in `kopt status` when it is minutes, with the way
        to make it seconds (the public harness's served looks, one process per tree)."""
        ctx, t = self.ctx, self.ctx.cfg.target
        mode = "served" if t.serve or t.ab_serve else "ab" if t.ab_command else "process"
        noise = run_noise_pct([{k: c.value for k, c in m.configs.items()} for m in runs])
        cost = estimate_decision_s(seconds, Policy.from_config(ctx.cfg.decide, t.direction), mode, noise_pct=noise)
        it.record["decision_cost"] = cost.to_dict()
        ctx.store.set("decision_cost", cost.to_dict())
        ctx.event("decision_cost", cost.text(), it=it, level="warn" if cost.slow else "info")


def record_baseline(ctx: RunContext, it: Iteration, runs: list[Measurement]) -> None:
    """The baseline's record: its classes as decisions will see them (the guard class under
    [decide].production_verdicts), its configs and their rows."""
    last = runs[-1]
    guard = guard_configs(ctx, {k: c.production for k, c in last.configs.items()})
    votes = voting_classes({k: c.cls for k, c in last.configs.items()}, guard)
    it.record["classes"] = {
        cls: {
            "best": geomean([c.value for m in runs for k, c in m.configs.items() if votes.get(k) == cls]),
            "configs": sum(1 for v in votes.values() if v == cls),
        }
        for cls in sorted(set(votes.values()))
    }
    it.record["configs"] = {
        k: {"cls": c.cls, "production": c.production, "row": c.row} for k, c in last.configs.items()
    }
    it.record["config_columns"] = list(last.config_columns)
    it.record["decision"] = {
        "verdict": Status.BASELINE,
        "reason": f"{len(runs)} runs, all rows correct",
        "by": "engine",
    }

"""The optimization loop on one page (docs/design.md §5–§7, §11): the reference program's loop as a
state machine over `Phase`s, each step done by a collaborator beside this file, in this
package (start, control, context, proposal, measure, served_trees, evidence, keep; the run's
child processes in control beneath them; the run's history they read is engine/history.py). docs/architecture.md
follows one iteration through them. The proposer a run is configured with is built here too
(`make_proposer`, at the end).

    run:        recover → baseline (v0) → resume open reviews → repeat { stop check → iteration }
    iteration:  gate → propose → police → measure and decide (repair ≤ N on a failing row)
                → still on BEST? → evidence (profiler; the keep confirmed in fresh servers,
                the OS's accounting) → review (borderline) → keep (format, verify, commit) | discard

| phase    | collaborator           | what it does                                                  |
|----------|------------------------|---------------------------------------------------------------|
| gate     | context.acquire        | an idle GPU for the lane (waits, or ends the run after wait_max_s) |
| propose  | proposal.Proposing     | the context pack, the proposer's run in the lane's candidate  |
| police   | proposal.Police        | the plan, the frozen config, the whole tree, the diff         |
| measure  | measure.DecisionRounds | looks (measure.*) until the paired statistics decide          |
| evidence | evidence.Evidence      | roofline; the profiler's word; a keep confirmed, fresh        |
| review   | keep.ReviewProtocol    | the engineer or the review policy decides a borderline        |
| keep     | keep.Keeper            | format, verify, commit, move BEST_COMMIT; or discard          |
| (any)    | control.Control        | pause / stop / restart, checked at the named points          |
| (start)  | keep.Recovery          | a consistent workspace after any crash; masked restarts       |

Every step takes the lane it works for. Each lane ([parallel].lanes; one by default) runs its
iterations from a thread of its own (`run_lanes`, below: one driver for one lane or many). A
decision goes on against the BEST it started on when another lane's keep moves BEST; a keep
decided so is put on the new BEST (rebased, or the tune proposer's same point proposed there)
and only its claim is confirmed there (`Keeper.carry`: the keep confirmation, seconds), so
that keeps found at once by several lanes compose instead of throwing each other away; any
other candidate whose BEST moved before its keep is decided again there.
What a later step or a restarted engine needs is read from run.db; counters are derived from
the history in the order iterations ended (engine.records), never counted twice.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide.estimate import Verdict
from kopt_supervisor.engine.gpu.gate import NoIdleGpu
from kopt_supervisor.engine.loop.context import Lane, RunContext, acquire, open_run
from kopt_supervisor.engine.loop.control import Interrupt, Request
from kopt_supervisor.engine.loop.evidence import CorrectnessRefuted, Evidence
from kopt_supervisor.engine.loop.keep import VERDICT_STATUS, Keeper, Recovery, ReviewProtocol, StaleBest
from kopt_supervisor.engine.loop.measure import CorrectnessFailure, DecisionRounds
from kopt_supervisor.engine.loop.proposal import Police, Problem, Proposing
from kopt_supervisor.engine.loop.spent import add_spent, move_spent, spend, spent_now
from kopt_supervisor.engine.loop.start import Baseline, BaselineFailed, make_lanes
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.profile.roofline import target_reached
from kopt_supervisor.engine.propose import budget_exhausted
from kopt_supervisor.engine.propose.proposer import CommandProposer, ManualProposer, Proposal, Proposer
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.workspace import Tampered, Workspace

PROPOSER_BROKEN = "the proposer cannot go on"
FAILING_PROPOSER = "failed candidates in a row (is the proposer broken?)"
"""The two stops that mean the run failed (`Engine.proposer_broken`): its exit status is 1."""
CONFIG_FROZEN = (
    " (a run's kopt.toml is frozen at `kopt init`: fix the config in the repository, or pass --config,"
    " and `kopt init` again under a new tag)"
)
HAND_BACKS = 2
"""How many times one iteration's change that no longer applies on a moved BEST goes back to
its proposer to be decided again before it ends as a failed proposal (a keep carried to the
new BEST, whose claim is only confirmed there, is not counted)."""
BUSY_RETRY_S = 1.0
"""How long a lane waits before asking a proposer again whose every point overlaps another lane's."""


@dataclass
class Parts:
    """One lane's collaborators (tests hand the machine fakes)."""

    lane: Lane
    baseline: Baseline
    proposing: Proposing
    police: Police
    rounds: DecisionRounds
    evidence: Evidence
    review: ReviewProtocol
    keeper: Keeper
    recovery: Recovery


def real_parts(ctx: RunContext, lane: Lane, proposer: Proposer, shared: dict[int, str]) -> Parts:
    rounds = DecisionRounds(ctx)
    evidence = Evidence(ctx, rounds)
    keeper = Keeper(ctx, rounds, evidence)
    recovery = Recovery(ctx, keeper)
    proposing = Proposing(ctx, proposer, in_flight=shared)
    return Parts(
        lane,
        Baseline(ctx, evidence, keeper, recovery),
        proposing,
        Police(ctx, str(ctx.store.get("frozen_config")).encode()),
        rounds,
        evidence,
        ReviewProtocol(ctx, rounds),
        keeper,
        recovery,
    )


class Engine:
    def __init__(
        self,
        ws: Workspace,
        *,
        proposer: Proposer | None = None,
        proposer_kind: str | None = None,
        max_iters: int | None = None,
        log: Callable[[str], None] | None = None,
        no_sandbox: bool = False,
        poll_interval_s: float = 0.2,
        parts: Callable[[RunContext], Parts] | None = None,
        demo: bool = False,
    ) -> None:
        ctx = self.ctx = open_run(
            ws,
            proposer_kind=proposer_kind,
            no_sandbox=no_sandbox,
            log=log or (lambda m: None),
            poll_interval_s=poll_interval_s,
            demo=demo,
        )
        self.control = ctx.control
        k = ctx.cfg.parallel.lanes if parts is None else 1
        # one lane works with the engine's own context: run_lanes reads run.db only while it idles
        ctxs = [ctx] if k == 1 else [ctx.for_lane(i) for i in range(k)]
        in_flight: dict[int, str] = {}
        if parts is not None:
            built = [parts(ctx)]
        else:
            lanes = make_lanes(ctxs)
            built = [
                real_parts(c, lane, proposer or make_proposer(ctx.cfg, proposer_kind), in_flight)
                for c, lane in zip(ctxs, lanes, strict=True)
            ]
        self.loops = [LaneLoop(c, p, self) for c, p in zip(ctxs, built, strict=True)]
        self.lanes = [loop.lane for loop in self.loops]
        self.recovery, self.baseline = built[0].recovery, built[0].baseline
        self.session_max_iters, self.session_iters = max_iters, 0
        self.started = threading.Lock()
        self.active_mark = time.monotonic()

    def request_stop(self, reason: str) -> None:
        """A stop from outside (a signal): the running steps end, the run stops."""
        self.control.request_stop(reason)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> str:
        """Run until a stop condition; returns the stop reason."""
        ctx = self.ctx
        ctx.store.set_many(
            {
                "state": "running",
                "stop_reason": None,
                "engine_pid": os.getpid(),
                "engine_started_at": time.time(),
                "last_error": None,
                "proposer": self.loops[0].proposing.proposer.kind,
            }
        )  # what `kopt mcp` serves
        what = (
            f"engine started (pid {os.getpid()}, proposer {self.loops[0].proposing.proposer.kind}, "
            f"{len(self.loops)} lane(s))"
        )
        ctx.event("engine", what)
        ctx.log(what)
        reason = "stopped"
        self.failed: str | None = None
        self.fix = ""  # what the engineer can do about a failed run, said after its reason
        try:
            self.recovery.recover(self.lanes)
            self.loops[0].police.list_modules_ahead()  # beside the baseline: the first check needs it
            if ctx.history.baseline() is None:  # Phase.BASELINE
                self.baseline.measure(self.lanes[0])
            for loop in self.loops:
                loop.resume_reviews()
            reason = run_lanes(self)
            if self.proposer_broken(reason):
                self.failed = reason  # the run could not go on: `kopt run --foreground` exits 1
        except Interrupt as i:
            reason = i.reason
        except NoIdleGpu as e:
            reason = f"no idle GPU: {e}"
        except BaselineFailed as e:
            reason = str(e)
            self.failed = reason  # `kopt run --foreground` exits 1: the baseline failed, nothing ran
            self.fix = CONFIG_FROZEN
        except Tampered as e:
            reason = str(e)
        finally:
            for lane in self.lanes:
                lane.close()
            self._account_active_time()
        self.finish(reason)
        return reason

    @staticmethod
    def proposer_broken(reason: str) -> bool:
        """A stop that says the run failed (its proposer is broken), not that it ended as asked."""
        return reason.startswith(PROPOSER_BROKEN) or reason.endswith(FAILING_PROPOSER)

    def stop_reason(self, in_flight: int = 0) -> str | None:
        """Why the run must not start another iteration (with `in_flight` still running)."""
        ctx, s = self.ctx, self.ctx.cfg.stop
        c = ctx.history.counters()
        last_row = next((r for r in reversed(ctx.history.rows()) if r.final and not r.masked and r.version), None)
        last = ctx.store.iteration(last_row.version) if last_row else None
        proposal = (last.record.get("proposal") or {}) if last else {}
        best = ctx.history.best_iteration()
        if c.consecutive_regressions >= s.consecutive_regressions:
            return f"{c.consecutive_regressions} consecutive measured regressions"
        if c.consecutive_failures >= s.consecutive_failures:
            return f"{c.consecutive_failures} {FAILING_PROPOSER}"
        if s.max_iters and c.candidates + in_flight >= s.max_iters:
            return f"[stop].max_iters = {s.max_iters} candidate iterations reached"
        if s.max_hours and self._active_s() >= s.max_hours * 3600:
            return f"[stop].max_hours = {s.max_hours:g} reached"
        if best is not None and target_reached(best.record.get("roofline")):
            return (
                f"every production config reached {s.target_pct_of_peak:g}% of its roofline ([stop].target_pct_of_peak)"
            )
        if proposal.get("fatal") and last is not None:
            return f"{PROPOSER_BROKEN}: {(last.record.get('decision') or {}).get('reason')}"
        if ctx.cfg.propose.budget_usd or ctx.cfg.propose.budget_tokens:
            spent_out = budget_exhausted(ctx.cfg, ctx.history.agent_spent())
            if spent_out:
                return spent_out
        if proposal.get("exhausted"):
            return "the proposer has nothing new to try (search space exhausted around the best point)"
        if self.session_max_iters is not None and self.session_iters >= self.session_max_iters:
            return f"--max-iters {self.session_max_iters} reached in this session"
        return None

    def finish(self, reason: str) -> None:
        ctx = self.ctx
        self.recovery.at_end(self.lanes)
        lanes_live = {f"lane:{i}": None for i in range(len(self.loops))} if len(self.loops) > 1 else {}
        ctx.store.set_many(
            {
                "state": "stopped",
                "stop_reason": reason,
                "stop_time": time.time(),
                "best_commit": ctx.history.trusted_best(),
                "progress": None,
                "engine_pid": None,
                **lanes_live,
            }
        )
        for late in ctx.store.pending_commands(["stop"]):  # sent as the run ended: never the next session's
            ctx.store.finish_command(late.id, "done", f"the run had stopped: {reason}")
        ctx.event("stop", f"run stopped: {reason}")
        ctx.projections.write_projections()
        ctx.log(f"stopped: {reason}")

    def _active_s(self) -> float:  # [stop].max_hours counts the engine's active time
        return float(self.ctx.store.get("active_s", 0.0)) + (time.monotonic() - self.active_mark)

    def _account_active_time(self) -> None:
        now = time.monotonic()
        self.ctx.store.set("active_s", float(self.ctx.store.get("active_s", 0.0)) + (now - self.active_mark))
        self.active_mark = now


class LaneLoop:
    """One lane's iterations, each from the gate to its keep or discard."""

    def __init__(self, ctx: RunContext, p: Parts, engine: Engine) -> None:
        self.ctx, self.engine, self.lane = ctx, engine, p.lane
        self.proposing, self.police, self.rounds, self.evidence = p.proposing, p.police, p.rounds, p.evidence
        self.review, self.keeper, self.recovery = p.review, p.keeper, p.recovery

    def iteration(self) -> None:
        ctx, lane = self.ctx, self.lane
        self.recovery.sync(lane)
        lease = acquire(ctx, lane)  # Phase.GATE: before the record
        best = ctx.history.best_iteration()
        with self.engine.started:  # versions are handed out one at a time
            v = ctx.store.next_version()
            it = Iteration(
                v,
                Status.RUNNING,
                phase=Phase.GATE,
                parent=best.version if best else None,
                best_commit_before=ctx.history.best_commit(),
                started_at=time.time(),
            )
            it.record.update({"lane": lane.index, "timings": {"gate_wait_s": round(lease.acquire_s, 4)}})
            add_spent(it, "wait", lease.acquire_s)
            ctx.save(it)  # written before anything happens: a crash from here on is recovered
        ctx.event("iteration", f"v{v} started from {ctx.history.best_commit()[:10]} ({lane.name})", it=it)
        ctx.projections.write_memory(it)
        try:
            self.evaluate(it, lane)
        except BenchError as e:
            self.keeper.discard(it, lane, Status.FAIL_BENCH, str(e))
        except Interrupt as i:  # stop or restart: control.py's INTERRUPTS says which steps end so
            self.keeper.discard(it, lane, Status.INTERRUPTED, i.reason)
        except (NoIdleGpu, Tampered) as e:
            self.keeper.discard(it, lane, Status.INTERRUPTED, str(e))
            raise
        finally:
            self.proposing.in_flight.pop(lane.index, None)
            self.evidence.drop_ahead(lane)

    def evaluate(self, it: Iteration, lane: Lane) -> None:
        with spend(it, "propose"):
            proposal = self.proposed(it, lane)  # Phase.PROPOSE
            problem = self.policed(it, lane, proposal, Status.FAIL_PROPOSE)  # Phase.POLICE
        if problem:
            return self.keeper.discard(it, lane, *problem)
        self.proposing.in_flight[lane.index] = it.hypothesis  # the other lanes are told
        carried: Verdict | None = None  # a keep decided against a BEST another lane has moved since
        while True:  # a keep is confirmed on the BEST it would be kept on (another lane may move it)
            attempt = spent_now(it)
            outcome: Verdict | CorrectnessFailure | None = carried
            try:
                if carried is None:
                    self.keeper.on_best(it, lane)  # stale? rebased before any look
                    with spend(it, "measure"):  # against the BEST it started on, even if another lane moves it
                        self.evidence.profile_ahead(it, lane)  # a keep's profile, held until the keep
                        outcome = self.rounds.decide(it, lane, Stage.EVAL)  # Phase.MEASURE
                assert outcome is not None
                while isinstance(outcome, CorrectnessFailure):  # repair on the same hypothesis
                    it.record["failing_rows"] = outcome.failing
                    if it.repair_attempts >= self.ctx.cfg.propose.repair_attempts:
                        return self.keeper.discard(
                            it,
                            lane,
                            Status.FAIL_CORRECTNESS,
                            f"still failing after {it.repair_attempts} repair attempt(s): {outcome.summary()}",
                        )
                    it.repair_attempts += 1
                    self.ctx.event(
                        "repair",
                        f"v{it.version}: correctness fails ({outcome.summary()}); repair {it.repair_attempts}",
                        it=it,
                        level="warn",
                    )
                    with spend(it, "propose"):
                        proposal = self.proposing.propose(it, lane, repair=it.repair_attempts, failing=outcome.failing)
                        problem = self.policed(it, lane, proposal, Status.FAIL_CORRECTNESS, repair=it.repair_attempts)
                    if problem:
                        return self.keeper.discard(it, lane, *problem)
                    with spend(it, "measure"):
                        self.evidence.profile_ahead(it, lane)  # the repaired tree's
                        outcome = self.rounds.decide(it, lane, Stage.EVAL)
                self.ctx.save(it, Phase.EVIDENCE)
                by = "engine"
                if outcome.kind in ("keep", "borderline"):  # on the BEST it would be kept on?
                    self.keeper.check_best(it)  # (cheap, before any confirmation)
                with spend(it, "confirm"):
                    verdict = self.evidence.confirm(it, lane, outcome)  # Phase.EVIDENCE: the profiler
                    verdict = self.evidence.confirm_keep(it, lane, verdict)  # fresh servers; the OS's accounting
                while verdict.kind == "borderline":  # Phase.REVIEW
                    with spend(it, "review"):
                        verdict, by = self.review.ask(it, lane, verdict)
                    if verdict.kind == "keep":  # decided by more rounds: the evidence any keep needs
                        with spend(it, "confirm"):
                            verdict = self.evidence.confirm_keep(it, lane, self.evidence.confirm(it, lane, verdict))
                if verdict.kind not in ("keep", "accepted"):  # Phase.DISCARD
                    self.ctx.save(it, Phase.DISCARD)
                    return self.keeper.discard(
                        it,
                        lane,
                        VERDICT_STATUS.get(verdict.kind, Status.REJECTED),
                        verdict.reason,
                        verdict=verdict,
                        by=by,
                    )
                with spend(it, "confirm"):
                    return self.keeper.keep(it, lane, verdict, by)  # Phase.KEEP
            except CorrectnessRefuted as e:
                return self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, str(e))
            except StaleBest as moved:  # rebased: a keep's claim confirmed there, anything else decided again
                claim = outcome if isinstance(outcome, Verdict) and outcome.kind == "keep" else None
                move_spent(it, attempt, ("confirm",) if claim else ("measure", "confirm", "wait"), "stale")
                if not moved.tried and self.keeper.rebase(it, lane, moved.best):
                    carried = self.keeper.carry(it, lane, claim) if claim else None
                    continue
                decided_again = [h for h in it.record.get("handed_back") or [] if not h.get("carried")]
                if len(decided_again) >= HAND_BACKS:  # a carried keep's cost its confirmation: not counted
                    it.record["stale"] = True
                    return self.keeper.discard(
                        it,
                        lane,
                        Status.FAIL_PROPOSE,
                        f"the change no longer applies on "
                        f"the new BEST {moved.best[:10]} another lane kept meanwhile "
                        f"(handed back {HAND_BACKS} time(s) already)",
                    )
                with spend(it, "propose"):  # back to its proposer, on the new BEST
                    proposal = self.hand_back(it, lane, moved.best)
                    problem = self.policed(it, lane, proposal, Status.FAIL_PROPOSE)
                if problem:
                    return self.keeper.discard(it, lane, *problem)
                self.proposing.in_flight[lane.index] = it.hypothesis
                # the tune proposer's same point put on the new BEST (details "handed_back"): the same change
                carried = self.keeper.carry(it, lane, claim) if claim and proposal.details.get("handed_back") else None
                if carried is not None:
                    it.record["handed_back"][-1]["carried"] = True

    def proposed(self, it: Iteration, lane: Lane, handed_back: dict[str, Any] | None = None) -> Proposal:
        """The proposer's proposal; while every point a `tune` proposer has left would step what
        another lane is measuring (details `busy`), the lane waits for one to end and asks again."""
        while True:
            proposal = self.proposing.propose(it, lane, handed_back=handed_back)
            if proposal.ok or not proposal.details.get("busy"):
                return proposal
            with spend(it, "wait"):
                self.ctx.control.sleep(
                    BUSY_RETRY_S,
                    lambda left: self.ctx.progress(
                        it, "propose", f"every point left overlaps another lane's: asking again in {left:.0f} s"
                    ),
                )

    def hand_back(self, it: Iteration, lane: Lane, best: str) -> Proposal:
        """A change that no longer applies on the BEST another lane kept meanwhile goes back to
        its proposer, on that BEST, with why (a tune point is proposed again there; an agent
        reads it in its prompt): a failed proposal only when the proposer has nothing."""
        back = self.keeper.hand_back(it, lane, best)
        return self.proposed(it, lane, handed_back=back)

    def policed(
        self, it: Iteration, lane: Lane, proposal: Proposal, failed: Status, *, repair: int = 0
    ) -> Problem | None:
        """The proposal's problem, if any: a tampered config first (whatever the proposer's
        exit), then a failed proposal, then the rules on the candidate."""
        self.ctx.save(it, Phase.POLICE)
        tampered = self.police.config_intact(it)
        if tampered or proposal.ok:
            return tampered or self.police.check(it, lane, plan=not repair)
        return Problem(failed, f"repair {repair} failed: {proposal.reason}" if repair else proposal.reason)

    def resume_reviews(self) -> None:
        """Reviews left open on this lane by an engine that stopped: wait out each deadline,
        then keep the accepted candidate (if it is still the one evaluated) or reject it."""
        for row in [r for r in self.ctx.history.rows() if r.awaiting_review]:
            it = self.ctx.store.iteration(row.version)
            if it is None or int(it.record.get("lane", 0)) % len(self.engine.loops) != self.lane.index:
                continue
            verdict, by, intact = self.review.resume(it, self.lane)
            if verdict.kind == "accepted" and intact:
                self.keeper.keep(
                    it, self.lane, replace(verdict, reason=f"{verdict.reason} (after an engine restart)"), by
                )
                continue
            reason = (
                verdict.reason
                if verdict.kind == "rejected"
                else "accepted, but the candidate in its worktree is no longer the one evaluated"
            )
            self.keeper.discard(it, self.lane, Status.REJECTED, reason, verdict=verdict, by=by)


# ---------------------------------------------------------------------------------------
# The driver, for one lane or several (docs/lanes.md): each lane runs its iterations from a
# thread of its own; `run_lanes` starts them, watches them end, and keeps the run's rules:
#
# - The stop check (`Control.checkpoint`, then `Engine.stop_reason`) is made where a lane
#   could start an iteration, never while the only lane runs one: one lane runs as a loop of
#   stop check and iteration. A lane starts one only while no stop condition holds, counting
#   the iterations in flight ([stop].max_iters and --max-iters are never overshot).
# - A stop or a masked restart from the engineer ends every lane's running step (each lane's
#   pump raises it: control.py's INTERRUPTS); the restart is applied once no lane runs.
# - A pause holds the loop here and preempts each lane's timed step (it is taken again).
# - A lane that finds no idle GPU within [gpu].wait_max_s waits for its next turn; the run
#   stops for want of GPUs when no lane could get one (one lane: at once).
# - A stop or restart that ends a lane's gate wait (before its iteration has a record) is
#   acted on at the scheduler's next checkpoint, as if it had come between iterations.
# - What a lane raises that is not its own to swallow (a forged history, a crash) ends the
#   run as it ends an iteration run in the engine's own thread.
# - The counters follow the order iterations ended (engine.records): when the regression
#   limit is reached no lane starts another iteration; the ones in flight finish and count,
#   and the run stops if the limit still holds then.


def run_lanes(engine: Engine) -> str:
    """Run the engine's lanes until a stop condition; returns the stop reason."""
    loops = engine.loops
    idle: list[LaneLoop] = list(loops)
    running: dict[Future[None], LaneLoop] = {}
    no_gpu: dict[int, str] = {}
    with ThreadPoolExecutor(max_workers=len(loops), thread_name_prefix="kopt-lane") as pool:
        try:
            while True:
                if len(no_gpu) == len(idle) == len(loops):  # no lane could get a GPU
                    whys = [f"lane {i}: {why}" if len(loops) > 1 else why for i, why in sorted(no_gpu.items())]
                    return f"no idle GPU: {'; '.join(whys)}"
                if idle:  # the stop check: a lane could start
                    request = engine.control.checkpoint()
                    if request is not None:
                        _finish(running, idle, no_gpu)  # their own pumps end their steps
                        if request.request == Request.STOP:
                            return request.reason
                        engine.recovery.restart(request, engine.lanes)
                        continue
                    stop = None
                    for loop in sorted(idle, key=lambda x: x.lane.index):
                        if stop := engine.stop_reason(in_flight=len(running)):
                            break
                        idle.remove(loop)
                        engine.session_iters += 1  # counted as it starts: --max-iters is never overshot
                        running[pool.submit(loop.iteration)] = loop
                    if stop and not running:
                        return stop
                done, _ = wait(list(running), timeout=engine.ctx.poll_interval_s, return_when=FIRST_COMPLETED)
                engine.session_iters -= _collect(done, running, idle, no_gpu)
        finally:
            if running:  # an error in this loop: the lanes must not run on without it
                engine.control.request_stop("the lanes' scheduler stopped")
                _finish(running, idle, no_gpu)


def _collect(
    done: set[Future[None]], running: dict[Future[None], LaneLoop], idle: list[LaneLoop], no_gpu: dict[int, str]
) -> int:
    """Lanes whose iteration ended go back to idle; returns how many never started one (no
    GPU for them: they did not count)."""
    unstarted = 0
    for fut in done:
        loop = running.pop(fut)
        idle.append(loop)
        try:
            fut.result()
            no_gpu.pop(loop.lane.index, None)
        except NoIdleGpu as e:  # this lane waited its fill: it tries again at its next turn
            no_gpu[loop.lane.index] = str(e)
            unstarted += 1
        except Interrupt:  # a stop or restart ended its gate wait, before any record: the
            unstarted += 1  # scheduler's checkpoint acts on it (a restart used to end the run)
    return unstarted


def _finish(running: dict[Future[None], LaneLoop], idle: list[LaneLoop], no_gpu: dict[int, str]) -> None:
    """Wait for every lane in flight to end its iteration (re-raising what is not theirs to
    swallow: a forged history, a crash)."""
    done, _ = wait(list(running))
    _collect(done, running, idle, no_gpu)


def make_proposer(cfg: Config, kind: str | None = None) -> Proposer:
    """The proposer [propose].kind (or `kind`) names, built from the run's config."""
    kind = kind or cfg.propose.kind
    if kind == "manual":
        return ManualProposer()
    if kind == "command":
        if not cfg.propose.command.strip() and not cfg.propose.agent:
            raise BadInput('kopt.toml: [propose].command (or [propose].agent) is required for the "command" proposer')
        return CommandProposer.from_config(cfg)
    if kind == "tune":
        from kopt_supervisor.engine.propose.tune import TuneProposer

        return TuneProposer(cfg.propose.tune)
    raise BadInput(f'unknown proposer {kind!r} (use "manual", "command" or "tune")')

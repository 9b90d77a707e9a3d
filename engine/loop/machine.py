"""The optimization loop on one page (DESIGN.md §5–§7, §11): the reference program's loop as a
state machine over `Phase`s, each step done by a collaborator beside this file.

    run:        recover → baseline (v0) → resume an open review → repeat { stop check → iteration }
    iteration:  gate → propose → police → measure and decide (repair ≤ N on a failing row)
                → evidence → review (borderline) → keep (format, verify, commit) | discard

| phase    | collaborator          | what it does                                                  |
|----------|-----------------------|---------------------------------------------------------------|
| gate     | lane.acquire          | an idle GPU for the lane (waits, or ends the run after wait_max_s) |
| propose  | proposing.Proposing   | KOPT_PROMPT, the proposer's run in the lane's cand/           |
| police   | police.Police         | the plan, the frozen config, what the candidate may change    |
| measure  | rounds.DecisionRounds | looks (measure.*) until the paired statistics decide          |
| evidence | evidence.Evidence     | roofline; the profiler's word on a keep                       |
| review   | review.ReviewProtocol | the engineer or the review policy decides a borderline        |
| keep     | keep.Keeper           | format, verify, commit, move BEST_COMMIT; or discard          |
| (any)    | control.Control       | pause / stop / restart, checked at the named points          |
| (start)  | recovery.Recovery     | a consistent workspace after any crash; masked restarts       |

Every step takes the lane it works for. What a later step or a restarted engine needs is read
from run.db; counters are derived from the history (engine.bookkeeping), never counted twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from kopt_supervisor.engine import config, integrity, sandbox
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import Verdict
from kopt_supervisor.engine.gpu.gate import NoIdleGpu
from kopt_supervisor.engine.loop.baseline import Baseline, BaselineFailed
from kopt_supervisor.engine.loop.context import RunContext
from kopt_supervisor.engine.loop.control import Control, Interrupt, Request
from kopt_supervisor.engine.loop.evidence import CorrectnessRefuted, Evidence
from kopt_supervisor.engine.loop.jails import Jails
from kopt_supervisor.engine.loop.keep import VERDICT_STATUS, Keeper
from kopt_supervisor.engine.loop.lane import Lane, acquire, single_lane
from kopt_supervisor.engine.loop.measure import measurer_for
from kopt_supervisor.engine.loop.police import Police, Problem
from kopt_supervisor.engine.loop.proposing import Proposing
from kopt_supervisor.engine.loop.recovery import Recovery
from kopt_supervisor.engine.loop.review import ReviewProtocol
from kopt_supervisor.engine.loop.rounds import (
    CorrectnessFailure,
    DecisionRounds,
)
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.propose import Proposal, Proposer, make_proposer
from kopt_supervisor.engine.propose.costs import budget_exhausted
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.roofline.evaluate import target_reached
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_atomic


@dataclass
class Parts:
    """The machine's collaborators (tests hand it fakes)."""

    lanes: list[Lane]
    baseline: Baseline
    proposing: Proposing
    police: Police
    rounds: DecisionRounds
    evidence: Evidence
    review: ReviewProtocol
    keeper: Keeper
    recovery: Recovery


def real_parts(ctx: RunContext, proposer: Proposer) -> Parts:
    lanes = [single_lane(ctx)]
    for lane in lanes:
        lane.measurer = measurer_for(ctx, lane)
    rounds = DecisionRounds(ctx)
    evidence = Evidence(ctx, rounds)
    keeper = Keeper(ctx, rounds, evidence)
    recovery = Recovery(ctx, keeper)
    return Parts(lanes, Baseline(ctx, evidence, keeper, recovery), Proposing(ctx, proposer), Police(ctx, str(ctx.store.get("frozen_config")).encode()), rounds, evidence,
                 ReviewProtocol(ctx, rounds), keeper, recovery)


class Engine:
    def __init__(self, ws: Workspace, *, proposer: Proposer | None = None, proposer_kind: str | None = None,
                 max_iters: int | None = None, log: Callable[[str], None] | None = None, no_sandbox: bool = False,
                 poll_interval_s: float = 0.2, parts: Callable[[RunContext], Parts] | None = None) -> None:
        store = ws.open_store()
        key = integrity.read_secret(ws.dir)
        text, edited = integrity.frozen_config(ws.dir, store.meta(), key)
        cfg: Config = config.loads(text, source=str(ws.config_path))  # run.db's sealed copy, never the file's
        kind = proposer_kind or cfg.propose.kind
        support = sandbox.probe()
        mode = sandbox.start_rule(support, proposer_kind=kind, no_sandbox=no_sandbox)  # refuses before any state changes
        control = Control(ws, store, key, poll_interval_s=poll_interval_s,
                          on_state=lambda state: ctx.set_state(state), on_history_changed=lambda: ctx.write_projections())
        ctx = self.ctx = RunContext(ws, cfg, store, control, Jails(ws, cfg, mode, support), key,
                                    log=log or (lambda m: None), poll_interval_s=poll_interval_s)
        record_sandbox(store, mode, support)
        if edited is not None:  # put back, never adopted
            write_atomic(ws.config_path, text)
            ctx.event("tamper", f"kopt.toml was edited behind kopt's back; restored from run.db:\n{edited[:4000]}",
                      level="error")
        store.set_many({"frozen_config": text, "frozen_config_seal": integrity.config_seal(key, text)})
        self.control = control
        p = parts(ctx) if parts else real_parts(ctx, proposer or make_proposer(cfg, proposer_kind))
        self.lanes, self.baseline, self.proposing, self.police = p.lanes, p.baseline, p.proposing, p.police
        self.rounds = p.rounds
        self.evidence, self.review, self.keeper, self.recovery = p.evidence, p.review, p.keeper, p.recovery
        self.session_max_iters, self.session_iters = max_iters, 0
        self.active_mark = time.monotonic()

    def request_stop(self, reason: str) -> None:
        """A stop from outside (a signal): the running step ends, the run stops."""
        self.control.request_stop(reason)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> str:
        """Run until a stop condition; returns the stop reason."""
        ctx, lane = self.ctx, self.lanes[0]
        ctx.store.set_many({"state": "running", "stop_reason": None, "engine_pid": os.getpid(),
                            "engine_started_at": time.time(), "last_error": None})
        ctx.event("engine", f"engine started (pid {os.getpid()}, proposer {self.proposing.proposer.kind})")
        ctx.log(f"engine started (pid {os.getpid()}, proposer {self.proposing.proposer.kind})")
        reason = "stopped"
        try:
            self.recovery.recover(self.lanes)
            if ctx.baseline() is None:                                     # Phase.BASELINE
                self.baseline.measure(lane)
            self.resume_review(lane)
            while not (reason := self.stop_check() or ""):
                self.iteration(lane)
        except Interrupt as i:
            reason = i.reason
        except NoIdleGpu as e:
            reason = f"no idle GPU: {e}"
        except (BaselineFailed, integrity.Tampered) as e:
            reason = str(e)
        finally:
            for each in self.lanes:
                each.close()
            self._account_active_time()
        self.finish(reason)
        return reason

    def stop_check(self) -> str | None:
        """Phase stop check: a stop or restart the engineer sent (a restart is applied and the
        loop goes on), then the reference program's stop conditions."""
        while (request := self.control.checkpoint()) is not None:
            if request.request == Request.STOP:
                return request.reason
            self.recovery.restart(request, self.lanes)
        return self.stop_reason()

    def stop_reason(self) -> str | None:
        ctx, s = self.ctx, self.ctx.cfg.stop
        c = ctx.counters()
        last_row = next((r for r in reversed(ctx.rows()) if r.final and not r.masked and r.version), None)
        last = ctx.store.iteration(last_row.version) if last_row else None
        proposal = (last.record.get("proposal") or {}) if last else {}
        best = ctx.best_iteration()
        if c.consecutive_regressions >= s.consecutive_regressions:
            return f"{c.consecutive_regressions} consecutive measured regressions"
        if c.consecutive_failures >= s.consecutive_failures:
            return f"{c.consecutive_failures} failed candidates in a row (is the proposer broken?)"
        if s.max_iters and c.candidates >= s.max_iters:
            return f"[stop].max_iters = {s.max_iters} candidate iterations reached"
        if s.max_hours and self._active_s() >= s.max_hours * 3600:
            return f"[stop].max_hours = {s.max_hours:g} reached"
        if best is not None and target_reached(best.record.get("roofline")):
            return (f"every production config reached {s.target_pct_of_peak:g}% of its roofline "
                    "([stop].target_pct_of_peak)")
        if proposal.get("fatal") and last is not None:
            return f"the proposer cannot go on: {(last.record.get('decision') or {}).get('reason')}"
        if ctx.cfg.propose.budget_usd or ctx.cfg.propose.budget_tokens:
            spent_out = budget_exhausted(ctx.cfg, ctx.agent_spent())
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
        ctx.store.set_many({"state": "stopped", "stop_reason": reason, "stop_time": time.time(),
                            "best_commit": ctx.best_commit(), "progress": None, "engine_pid": None})
        ctx.event("stop", f"run stopped: {reason}")
        ctx.write_projections()
        ctx.log(f"stopped: {reason}")

    # -- one iteration ----------------------------------------------------------------------------

    def iteration(self, lane: Lane) -> None:
        ctx = self.ctx
        self.recovery.sync(lane)
        best = ctx.best_iteration()
        v = ctx.store.next_version()
        it = Iteration(v, Status.RUNNING, phase=Phase.GATE, parent=best.version if best else None,
                       best_commit_before=ctx.best_commit(), started_at=time.time())
        it.record["lane"] = lane.index
        ctx.save(it)  # written before anything happens: a crash from here on is recovered
        ctx.event("iteration", f"v{v} started from {ctx.best_commit()[:10]}", it=it)
        ctx.write_memory(it)
        try:
            self.evaluate(it, lane)
        except BenchError as e:
            self.keeper.discard(it, lane, Status.FAIL_BENCH, str(e))
        except Interrupt as i:  # stop or restart: control.py's INTERRUPTS says which steps end so
            self.keeper.discard(it, lane, Status.INTERRUPTED, i.reason)
        except (NoIdleGpu, integrity.Tampered) as e:
            self.keeper.discard(it, lane, Status.INTERRUPTED, str(e))
            raise
        finally:
            self.session_iters += 1

    def evaluate(self, it: Iteration, lane: Lane) -> None:
        acquire(self.ctx, lane, it)                                       # Phase.GATE
        proposal = self.proposing.propose(it, lane)                       # Phase.PROPOSE
        problem = self.policed(it, lane, proposal, Status.FAIL_PROPOSE)   # Phase.POLICE
        if problem:
            return self.keeper.discard(it, lane, *problem)
        outcome = self.rounds.decide(it, lane, Stage.EVAL)                # Phase.MEASURE
        while isinstance(outcome, CorrectnessFailure):                    # repair on the same hypothesis
            it.record["failing_rows"] = outcome.failing
            if it.repair_attempts >= self.ctx.cfg.propose.repair_attempts:
                return self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, f"still failing after "
                                           f"{it.repair_attempts} repair attempt(s): {outcome.summary()}")
            it.repair_attempts += 1
            self.ctx.event("repair", f"v{it.version}: correctness fails ({outcome.summary()}); repair "
                           f"{it.repair_attempts}", it=it, level="warn")
            proposal = self.proposing.propose(it, lane, repair=it.repair_attempts, failing=outcome.failing)
            problem = self.policed(it, lane, proposal, Status.FAIL_CORRECTNESS, repair=it.repair_attempts)
            if problem:
                return self.keeper.discard(it, lane, *problem)
            outcome = self.rounds.decide(it, lane, Stage.EVAL)
        self.ctx.save(it, Phase.EVIDENCE)
        verdict = self.evidence.confirm(it, lane, outcome)                # Phase.EVIDENCE
        try:
            verdict = self.evidence.reverify(it, lane, verdict)           # a new BEST, in fresh processes
        except CorrectnessRefuted as e:
            return self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, str(e))
        by = "engine"
        if verdict.kind == "borderline":                                  # Phase.REVIEW
            verdict, by = self.review.ask(it, lane, verdict)
        if verdict.kind in ("keep", "accepted"):                          # Phase.KEEP
            return self.keeper.keep(it, lane, verdict, by)
        self.ctx.save(it, Phase.DISCARD)                                  # Phase.DISCARD
        self.keeper.discard(it, lane, VERDICT_STATUS.get(verdict.kind, Status.REJECTED), verdict.reason,
                            verdict=verdict, by=by)

    def policed(self, it: Iteration, lane: Lane, proposal: Proposal, failed: Status, *, repair: int = 0
                ) -> Problem | None:
        """The proposal's problem, if any: a tampered config first (whatever the proposer's
        exit), then a failed proposal, then the rules on the candidate."""
        self.ctx.save(it, Phase.POLICE)
        tampered = self.police.config_intact(it)
        if tampered or proposal.ok:
            return tampered or self.police.check(it, lane, plan=not repair)
        return Problem(failed, f"repair {repair} failed: {proposal.reason}" if repair else proposal.reason)

    def resume_review(self, lane: Lane) -> None:
        """A review left open by an engine that stopped: wait out its deadline, then keep the
        accepted candidate (if it is still the one evaluated) or reject it."""
        row = next((r for r in reversed(self.ctx.rows()) if r.awaiting_review), None)
        it = self.ctx.store.iteration(row.version) if row else None
        if it is None:
            return
        verdict, by, intact = self.review.resume(it, lane)
        if verdict.kind == "accepted" and intact:
            self.keeper.keep(it, lane, verdict_with_reason(verdict, f"{verdict.reason} (after an engine restart)"), by)
            return
        reason = verdict.reason if verdict.kind == "rejected" else \
            "accepted, but the candidate in cand/ is no longer the one evaluated"
        self.keeper.discard(it, lane, Status.REJECTED, reason, verdict=verdict, by=by)

    # -- time accounting ([stop].max_hours counts the engine's active time) ---------------------

    def _active_s(self) -> float:
        return float(self.ctx.store.get("active_s", 0.0)) + (time.monotonic() - self.active_mark)

    def _account_active_time(self) -> None:
        now = time.monotonic()
        self.ctx.store.set("active_s", float(self.ctx.store.get("active_s", 0.0)) + (now - self.active_mark))
        self.active_mark = now


def record_sandbox(store: Store, mode: sandbox.SandboxMode, support: sandbox.SandboxSupport) -> None:
    """The run's sandbox, as every place that shows results shows it: this session's mode,
    and whether any session of the run ran unconfined (--no-sandbox)."""
    before = store.get("sandbox") or {}
    store.set("sandbox", {"confined": mode.confined, "summary": mode.summary,
                          "support": support.to_dict(),
                          "ever_unconfined": bool(before.get("ever_unconfined")) or not mode.confined})


def verdict_with_reason(verdict: Verdict, reason: str) -> Verdict:
    import dataclasses

    return dataclasses.replace(verdict, reason=reason)

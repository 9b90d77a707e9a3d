"""The optimization loop's state machine (DESIGN.md §5–§7). The whole loop is in this file.

    run():  recover → baseline (v0) → repeat { stop? → pause? → iteration } → finish
    iteration vN:
        sync best/ and cand/ to BEST_COMMIT
        propose (gate → proposer edits cand/, writes plans/vN_plan.md)
        check the candidate (changed files, protected files, own commits, .git)
        decide: rounds of best/cand in ABBA order (or ab_command runs, or looks of a serving
                ab_command kept between decisions) until the paired statistics decide
                every class; a failing row → repair (≤ N) → decide again
        keep → profiler agrees? → format → verify → commit → move BEST_COMMIT
        borderline → the engineer (or the review policy) accepts or rejects
        anything else → discard (cand/ reset at the next sync)

The engine writes what it is about to do (the iteration's phase) before doing it, so a
crash anywhere is recovered by `recover()`: a half-made commit is adopted or dropped, the
interrupted iteration is closed as `interrupted`, orphan processes are killed and the
worktrees are put back at BEST_COMMIT. Counters are derived from the history
(engine.bookkeeping), so nothing is counted twice.

Commands from clients (pause, stop, accept, restart, ...) are polled from run.db every
fraction of a second, also while a benchmark runs (`self.poll` is the runner's callback).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import (
    bookkeeping,
    control,
    faults,
    gitops,
    metrics,
    projections,
    runner,
)
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import (
    Pair,
    Policy,
    Verdict,
    evaluate,
    reconcile_profiler,
    review_outcome,
    voting_classes,
)
from kopt_supervisor.engine.errors import BadInput, KoptError, KoptFailure
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import Gate, NoIdleGpu, round_flags
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.profile import PROFILE_ENV, ProfileSummary, choose_profiler, compare
from kopt_supervisor.engine.propose import (
    Proposal,
    ProposalContext,
    Proposer,
    make_proposer,
    parse_plan,
)
from kopt_supervisor.engine.propose.prompt import render_prompt
from kopt_supervisor.engine.report.environment import capture_environment
from kopt_supervisor.engine.roofline.evaluate import evaluate as evaluate_roofline
from kopt_supervisor.engine.roofline.evaluate import target_reached
from kopt_supervisor.engine.store import Command, Iteration, Store
from kopt_supervisor.engine.workspace import (
    Workspace,
    refresh_memory,
    write_atomic,
    write_memory,
    write_projections,
)

# ---------------------------------------------------------------------------------------
# Control flow signals raised from poll() while the engine waits


class StopRequested(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RestartRequested(Exception):
    """A restart command: the engine finishes the command only once the restart is applied,
    so a crash in between leaves it pending and the next engine applies it."""

    def __init__(self, version: int, why: str, command_id: int | None = None) -> None:
        super().__init__(f"restart from v{version}")
        self.version = version
        self.why = why
        self.command_id = command_id


class Preempted(Exception):
    """A pause arrived during a timed step: the step is discarded and re-run later."""


@dataclass
class CorrectnessFailure:
    failing: list[dict[str, Any]]

    def summary(self) -> str:
        first = self.failing[0]
        more = f" (+{len(self.failing) - 1} more)" if len(self.failing) > 1 else ""
        return f"{first['config']}: {'; '.join(first['reasons'])}{more}"


ALWAYS_PROTECTED = ["kopt.toml", ".kopt/*"]
MARKER = "KOPT_WORKSPACE"


class Engine:
    def __init__(
        self,
        ws: Workspace,
        *,
        proposer: Proposer | None = None,
        proposer_kind: str | None = None,
        max_iters: int | None = None,
        store: Store | None = None,
        gate: Gate | None = None,
        log: Callable[[str], None] | None = None,
        poll_interval_s: float = 0.2,
    ) -> None:
        self.ws = ws
        self.cfg: Config = ws.load_config()
        self.store = store or ws.open_store()
        self.proposer = proposer or make_proposer(self.cfg, proposer_kind)
        self.gate = gate or Gate(
            self.cfg.gpu,
            open_backend(self.cfg.gpu.vendor),
            sleep=self._gate_sleep,
            own_pids=self._own_pids,
            log=lambda m: self.store.event("gpu", m, level="warn"),
            owner=f"kopt run {ws.tag} ({ws.dir})",
        )
        self.session_max_iters = max_iters
        self.session_iters = 0
        self.poll_interval_s = poll_interval_s
        self.log = log or (lambda m: None)
        self.paused = bool(self.store.get("paused", False))
        self.signal_stop: str | None = None
        self.child_pgid: int | None = None
        self.ab_server: runner.Server | None = None
        """The serving ab_command ([target].ab_serve), kept between decisions (close_ab_server)."""
        self.ab_servers_started = 0
        self.decisions_started = 0
        self.ab_server_decision = 0
        """The decision the serving ab_command has loaded the trees for."""
        self.review_version: int | None = None
        self.review_answer: Command | None = None
        self.waiting_for: set[str] = set()
        self.in_timed_step = False
        self.active_mark = time.monotonic()
        self.exhausted = False
        self.proposer_fatal: str | None = None
        """A proposer's error that no retry can fix (e.g. a broken params file): stop the run."""
        self.current_pairs: list[Pair] = []
        self.frozen_config = ws.config_path.read_bytes()

    # ===================================================================================
    # The run

    def run(self) -> str:
        """Run until a stop condition; returns the stop reason."""
        self.store.set_many({"state": "running", "stop_reason": None, "engine_pid": os.getpid(),
                             "engine_started_at": time.time(), "last_error": None})
        started = f"engine started (pid {os.getpid()}, proposer {self.proposer.kind})"
        self.store.event("engine", started)
        self.log(started)
        reason = "stopped"
        try:
            self.recover()
            if bookkeeping.baseline(self.iterations()) is None:
                self.baseline()
            pending = self.pending_review()
            if pending is not None:
                try:
                    self.finish_review(pending)
                except RestartRequested as r:
                    self.restart(r)
            while True:
                reason = self.stop_condition()
                if reason:
                    break
                try:
                    self.wait_if_paused()
                    self.iteration()
                except RestartRequested as r:
                    self.restart(r)
        except StopRequested as s:
            reason = s.reason
        except NoIdleGpu as e:
            reason = f"no idle GPU: {e}"
        except BaselineFailed as e:
            reason = str(e)
        finally:
            self.close_ab_server()
            self._account_active_time()
            self.gate.close()
        self.finish(reason)
        return reason

    def iterations(self, include_masked: bool = True) -> list[Iteration]:
        return self.store.iterations(include_masked=include_masked)

    def best_commit(self) -> str:
        best = bookkeeping.best_commit(self.iterations())
        return best or self.store.get("baseline_commit")

    # ===================================================================================
    # Stop conditions and finishing

    def stop_condition(self) -> str | None:
        its = self.iterations()
        c = bookkeeping.counters(its)
        s = self.cfg.stop
        if self.signal_stop:
            return self.signal_stop
        if c.consecutive_regressions >= s.consecutive_regressions:
            return f"{c.consecutive_regressions} consecutive measured regressions"
        if c.consecutive_failures >= s.consecutive_failures:
            return f"{c.consecutive_failures} failed candidates in a row (is the proposer broken?)"
        if s.max_iters and c.candidates >= s.max_iters:
            return f"[stop].max_iters = {s.max_iters} candidate iterations reached"
        if s.max_hours and self._active_s() >= s.max_hours * 3600:
            return f"[stop].max_hours = {s.max_hours:g} reached"
        best_it = bookkeeping.best_iteration(its)
        if best_it is not None and target_reached(best_it.record.get("roofline")):
            return (f"every production config reached {s.target_pct_of_peak:g}% of its roofline "
                    "([stop].target_pct_of_peak)")
        if self.proposer_fatal:
            return f"the proposer cannot go on: {self.proposer_fatal}"
        if self.exhausted:
            return "the proposer has nothing new to try (search space exhausted around the best point)"
        if self.session_max_iters is not None and self.session_iters >= self.session_max_iters:
            return f"--max-iters {self.session_max_iters} reached in this session"
        return None

    def finish(self, reason: str) -> None:
        best = self.best_commit()
        self.store.set_many({"state": "stopped", "stop_reason": reason, "stop_time": time.time(),
                             "best_commit": best, "progress": None, "engine_pid": None})
        self.store.event("stop", f"run stopped: {reason}")
        self.write_projections()
        self.log(f"stopped: {reason}")

    def _active_s(self) -> float:
        return float(self.store.get("active_s", 0.0)) + (time.monotonic() - self.active_mark)

    def _account_active_time(self) -> None:
        now = time.monotonic()
        self.store.set("active_s", float(self.store.get("active_s", 0.0)) + (now - self.active_mark))
        self.active_mark = now

    # ===================================================================================
    # Crash recovery

    def recover(self) -> None:
        """Make the workspace consistent with the store after any crash."""
        pgid = self.store.get("child_pgid")
        if pgid:
            n = runner.kill_orphans(int(pgid), (MARKER, str(self.ws.dir)))
            if n:
                self.store.event("recover", f"killed {n} orphan process(es) of group {pgid}", level="warn")
            self.store.set("child_pgid", None)
        for it in self.iterations():
            if it.status != "running":
                continue
            if it.phase in ("commit", "advance") and self._adopt_commit(it):
                continue
            it.status = "interrupted"
            it.finished_at = time.time()
            it.record.setdefault("decision", {}).update(
                {"verdict": "interrupted", "reason": f"engine stopped during {it.phase or 'start'}", "by": "engine"})
            self.store.save_iteration(it)
            self.store.event("recover", f"v{it.version} was interrupted during {it.phase}; closed", version=it.version,
                             level="warn")
            self.write_memory(it)
        if self.pending_review() is None:
            self.sync_worktrees()
        self.refresh_projections()

    def refresh_projections(self) -> None:
        """A crash between a store write and its projection left a file behind the store:
        memory/vN.json files that differ are rewritten, README/performance.md re-rendered."""
        try:
            for it in self.iterations():
                refresh_memory(self.ws, it)
        except OSError as e:
            self.store.event("disk", f"cannot refresh memory/: {e}", level="error")
        self.write_projections()

    def _adopt_commit(self, it: Iteration) -> bool:
        """A keep interrupted while committing: adopt the commit if it is exactly the one we
        meant to make (parent BEST_COMMIT, the recorded tree), else drop it."""
        sha = it.commit
        if sha is None:
            try:
                head = gitops.head(self.ws.cand)
                parents, tree = gitops.commit_info(self.ws.cand, head)
            except KoptFailure:
                return False
            if parents == [it.best_commit_before] and tree == it.record.get("commit_tree"):
                sha = head
        if sha is None:
            return False
        it.commit = sha
        status = it.record.get("keep_status", "keep")
        it.status, it.phase, it.finished_at = status, "done", time.time()
        self.store.save_iteration(it)
        self.store.event("recover", f"v{it.version}: adopted commit {sha[:10]} made before the crash", version=it.version)
        self.write_memory(it)
        return True

    def sync_worktrees(self) -> None:
        """best/ (branch kopt/TAG) and cand/ exactly at BEST_COMMIT, clean."""
        best = self.best_commit()
        repo = self.store.get("repo")
        for path, branch in ((self.ws.best, self.ws.branch), (self.ws.cand, None)):
            if gitops.ensure_worktree(repo, path, branch=branch, commit=best):
                self.store.event("recover", f"re-created the missing worktree {path.name}/", level="warn")
            stale = gitops.clear_stale_lock(path)
            if stale:
                self.store.event("recover", f"removed stale git lock(s): {', '.join(stale)}", level="warn")
        gitops.reset_clean(self.ws.best, best)
        gitops.reset_clean(self.ws.cand, best, detach=True)

    # ===================================================================================
    # Baseline

    def baseline(self) -> None:
        commit = self.store.get("baseline_commit")
        it = Iteration(0, "running", phase="baseline", hypothesis="baseline (unmodified)", scope="global",
                       best_commit_before=commit, started_at=time.time())
        self.store.save_iteration(it)
        self.store.delete_samples(0, "baseline")  # a baseline cut short by a crash starts over
        self.write_memory(it)
        self.sync_worktrees()
        self.store.event("baseline", "measuring the unmodified baseline", version=0)
        runs: list[Measurement] = []
        n = self.cfg.decide.min_rounds
        try:
            while len(runs) < n:
                r = len(runs)
                self.wait_if_paused()
                self.progress(it, "baseline", f"baseline run {r + 1}/{n}", r, n)
                env, before = self.acquire_gpu(it)
                try:
                    self.in_timed_step = True
                    m, secs = self.run_bench(it, self.ws.best, f"baseline_r{r}", env)
                except Preempted:
                    continue
                finally:
                    self.in_timed_step = False
                self.note_gpu(it, before, self.gate.evidence())
                if m.failing:
                    fail = _failure(m)
                    self.close(it, "fail_correctness", f"baseline fails correctness: {fail.summary()}")
                    raise BaselineFailed(f"the unmodified baseline fails correctness: {fail.summary()}")
                runs.append(m)
                self.store.add_samples(
                    (0, "baseline", r, 0, "best", c.key, c.cls, c.value) for c in m.configs.values())
        except BenchError as e:
            self.close(it, "fail_bench", f"baseline bench failed: {e}")
            raise BaselineFailed(f"the baseline bench failed: {e}") from None
        except (StopRequested, RestartRequested, NoIdleGpu) as e:
            self.close(it, "interrupted", getattr(e, "reason", str(e)))
            raise
        last = runs[-1]
        # the classes as decisions will see them ([decide].production_verdicts: a guard class)
        guard = self.guard_configs({k: c.production for k, c in last.configs.items()})
        votes = voting_classes({k: c.cls for k, c in last.configs.items()}, guard)
        classes: dict[str, dict[str, Any]] = {}
        for cls in sorted(set(votes.values())):
            values = [c.value for m in runs for k, c in m.configs.items() if votes.get(k) == cls]
            classes[cls] = {"best": _geomean(values), "configs": sum(1 for v in votes.values() if v == cls)}
        it.record["classes"] = classes
        it.record["configs"] = {k: {"cls": c.cls, "production": c.production, "row": c.row}
                                for k, c in last.configs.items()}
        it.record["config_columns"] = list(last.config_columns)
        it.record["decision"] = {"verdict": "baseline", "reason": f"{len(runs)} runs, all rows correct", "by": "engine"}
        it.commit = commit
        values = {k: statistics.median([m.configs[k].value for m in runs if k in m.configs]) for k in last.configs}
        self.update_roofline(it, values, base=it)
        summary = self.profile_tree(it, self.ws.best, "best", tolerate=True)
        if summary is not None:
            it.record["profile"] = {"best": summary.to_dict()}
        self.store.set_many({"config_columns": list(last.config_columns), "classes": last.classes(),
                             "environment": capture_environment(self.cfg, self.ws.best)})
        self.close(it, "baseline", f"baseline over {len(last.configs)} configs in {len(classes)} classes")

    # ===================================================================================
    # One iteration

    def iteration(self) -> None:
        self.sync_worktrees()
        its = self.iterations()
        best_it = bookkeeping.best_iteration(its)
        best = self.best_commit()
        v = self.store.next_version()
        it = Iteration(v, "running", phase="propose", parent=best_it.version if best_it else None,
                       best_commit_before=best, started_at=time.time())
        self.store.add_iteration(it)
        self.store.event("iteration", f"v{v} started from {best[:10]}", version=v)
        self.write_memory(it)
        try:
            self.evaluate_candidate(it)
        except BenchError as e:
            self.close(it, "fail_bench", str(e))
        except (StopRequested, RestartRequested, NoIdleGpu) as e:
            why = e.reason if isinstance(e, StopRequested) else str(e)
            self.close(it, "interrupted", why)
            raise
        finally:
            self.session_iters += 1

    def evaluate_candidate(self, it: Iteration) -> None:
        proposal = self.propose(it, repair=0)
        if proposal.details.get("exhausted"):
            self.exhausted = True
        if proposal.details.get("fatal") and not proposal.ok:
            self.proposer_fatal = proposal.reason
        if it.record.get("tampered"):
            return self.close(it, "fail_protected", it.record["tampered"])
        if not proposal.ok:
            return self.close(it, "fail_propose", proposal.reason)
        problem = self.read_plan(it) or self.check_candidate(it)
        if problem:
            status, reason = problem
            return self.close(it, status, reason)
        repair = 0
        while True:
            outcome = self.decide(it, stage="eval")
            if not isinstance(outcome, CorrectnessFailure):
                break
            it.record["failing_rows"] = outcome.failing
            if repair >= self.cfg.propose.repair_attempts:
                return self.close(it, "fail_correctness",
                                  f"still failing after {repair} repair attempt(s): {outcome.summary()}")
            repair += 1
            it.repair_attempts = repair
            self.save(it, phase=f"repair {repair}")
            self.store.event("repair", f"v{it.version}: correctness fails ({outcome.summary()}); repair {repair}",
                             version=it.version, level="warn")
            proposal = self.propose(it, repair=repair, failing=outcome.failing)
            if not proposal.ok:
                return self.close(it, "fail_correctness", f"repair {repair} failed: {proposal.reason}")
            problem = self.check_candidate(it)
            if problem:
                return self.close(it, *problem)
        verdict = outcome
        if verdict.kind == "keep":
            verdict = self.confirm_with_profiler(it, verdict)
        by = "engine"
        if verdict.kind == "borderline":
            verdict, by = self.review(it, verdict)
        if verdict.kind in ("keep", "accepted"):
            return self.keep(it, verdict, by)
        status = {"regression": "regression", "tie": "tie", "split": "split", "rejected": "rejected"}.get(
            verdict.kind, "rejected")
        self.close(it, status, verdict.reason, verdict=verdict, by=by)

    # -- proposing ----------------------------------------------------------------------

    def propose(self, it: Iteration, *, repair: int, failing: list[dict[str, Any]] | None = None) -> Proposal:
        self.save(it, phase="propose" if not repair else f"repair {repair}")
        if not getattr(self.proposer, "instant", False):
            self.close_ab_server()  # an agent or the engineer may take hours: no idle GPU memory held
        if repair:  # best/ as clean as at the iteration's start (the bench wrote there since)
            gitops.reset_clean(self.ws.best, it.best_commit_before or self.best_commit())
        self.progress(it, "propose", f"proposer ({self.proposer.kind})" + (f", repair {repair}" if repair else ""))
        env, _ = self.acquire_gpu(it)
        its = self.iterations(include_masked=False)
        history = [projections.memory_record(h) for h in its if h.final or h.status == "borderline"]
        c = bookkeeping.counters(its)
        best_it = bookkeeping.best_iteration(its)
        prompt_path = self.ws.prompt_path(it.version, repair)
        prompt = render_prompt(
            self.cfg, iteration=it.version, repair=repair, best_commit=it.best_commit_before or "",
            best_per_class=projections.best_per_class(its), classes=self.store.get("classes", []),
            profile=((best_it.record.get("profile") or {}).get("cand") or (best_it.record.get("profile") or {}).get("best"))
            if best_it else None,
            recent_regressions=c.recent_regressions, history=history, failing_rows=failing,
            hypothesis=it.hypothesis, roofline=best_it.record.get("roofline") if best_it else None)
        try:
            prompt_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(prompt_path, prompt)
        except OSError as e:  # a full disk: no proposal without its prompt (not a crash)
            self.store.event("disk", f"cannot write {prompt_path}: {e}", level="error")
            return Proposal(False, f"cannot write the prompt: {e}")
        plan = self.ws.plan_path(it.version)
        env = {**env, **self.cfg.target.env, "KOPT_ITERATION": str(it.version), "KOPT_REPAIR": str(repair),
               "KOPT_PROMPT": str(prompt_path), "KOPT_PLAN": str(plan), "KOPT_WORKSPACE": str(self.ws.dir)}
        ctx = ProposalContext(
            iteration=it.version, repair=repair, worktree=self.ws.cand, workspace=self.ws.dir,
            prompt_path=prompt_path, plan_path=plan, log_dir=self.ws.log_dir(it.version), config=self.cfg,
            best_commit=it.best_commit_before or "", classes=self.store.get("classes", []), history=history,
            env=env, run=self.run_cmd_for(it), wait_for_command=self.wait_for_command)
        try:
            proposal = self.proposer.propose(ctx)
        except KoptFailure as e:
            proposal = Proposal(False, f"proposer failed: {e}")
        self._guard_frozen_config(it)
        if repair == 0:
            it.record["proposal"] = proposal.details
        else:
            it.record.setdefault("repairs", []).append(proposal.details)
        self.save(it)
        return proposal

    def _guard_frozen_config(self, it: Iteration) -> None:
        """The run's kopt.toml is read again at every engine start: a proposer that edits it
        is caught right after it ran (whatever its exit), and the file is put back."""
        try:
            intact = self.ws.config_path.read_bytes() == self.frozen_config
        except OSError:
            intact = False
        if not intact:
            write_atomic(self.ws.config_path, self.frozen_config.decode("utf-8"))
            it.record["tampered"] = f"the proposer edited the run's frozen config {self.ws.config_path} (restored)"
            self.store.event("tamper", f"v{it.version}: {it.record['tampered']}", version=it.version, level="error")

    def read_plan(self, it: Iteration) -> tuple[str, str] | None:
        path = self.ws.plan_path(it.version)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:20000]
        except OSError:
            text = ""
        plan = parse_plan(text)
        if not plan.hypothesis:
            return "fail_propose", f"the proposer wrote no plan to {path.name} (first line: the hypothesis)"
        classes = self.store.get("classes", [])
        if plan.target_class and plan.target_class not in classes:
            return "fail_propose", (f"target_class {plan.target_class!r} is not a class of this bench "
                                    f"(classes: {', '.join(classes)})")
        it.hypothesis, it.target_class, it.scope = plan.hypothesis, plan.target_class, plan.scope
        self.save(it)
        self.store.event("plan", f"v{it.version}: {plan.hypothesis}"
                         + (f" [class {plan.target_class}]" if plan.target_class else " [global]"), version=it.version)
        return None

    def check_candidate(self, it: Iteration) -> tuple[str, str] | None:
        """The rules on what a candidate may change, before anything is timed."""
        best = it.best_commit_before or ""
        cand = self.ws.cand
        if it.record.get("tampered"):
            return "fail_protected", it.record["tampered"]
        if not (cand / ".git").is_file():
            return "fail_protected", "the proposer removed or replaced cand/.git"
        try:
            head = gitops.head(cand)
        except KoptError as e:
            return "fail_protected", f"cand/ is no longer a usable git worktree: {e}"
        if head != best:
            return "fail_propose", "the proposer made commits of its own in cand/ (kopt commits keeps; leave changes uncommitted)"
        try:
            best_dirty = gitops.dirty_tracked(self.ws.best)
            planted = gitops.untracked(self.ws.best, ignored_too=True)  # best/ was clean when it started
        except KoptError as e:
            return "fail_protected", f"best/ is no longer a usable git worktree: {e} (re-created next iteration)"
        if gitops.branch_sha(self.store.get("repo"), self.ws.branch) != best or best_dirty:
            return "fail_protected", "the proposer changed best/ or the run's branch"
        if planted:  # an agent that ran the bench there, or a module planted to slow best: wiped
            gitops.reset_clean(self.ws.best, best)
            self.store.event("tamper", f"v{it.version}: removed what the proposer left in best/: "
                             f"{', '.join(planted[:5])}{' ...' if len(planted) > 5 else ''}",
                             version=it.version, level="warn")
        changed = gitops.changed_files(cand, best)
        it.record["changed_files"] = changed
        self.save(it)
        if changed:
            try:
                write_atomic(self.ws.log_dir(it.version) / "candidate.diff", gitops.diff(cand, best))
            except OSError as e:
                self.store.event("disk", f"cannot write the candidate's diff: {e}", level="warn")
        if not changed:
            return "fail_propose", "the proposer changed nothing"
        hit = gitops.matching(changed, [*self.cfg.target.protected, *ALWAYS_PROTECTED])
        if hit:
            return "fail_protected", f"the candidate changes protected file(s): {', '.join(hit)}"
        new_only = gitops.untracked(cand)
        read_by_bench = gitops.matching(new_only, [*self.cfg.target.sources, *filter(None, [self.cfg.propose.tune.params])])
        if set(changed) == set(new_only) and not read_by_bench:
            # no tracked file imports them (and none is a declared source or the tune params
            # file): junk, or a module planted to shadow one the bench uses
            return "fail_propose", (f"the proposer only added untracked file(s) ({', '.join(new_only[:5])}) and "
                                    "changed no tracked file: nothing of the kernel changed")
        return None

    # -- deciding -----------------------------------------------------------------------

    def decide(self, it: Iteration, *, stage: str, extra_rounds: int = 0,
               pairs: list[Pair] | None = None) -> Verdict | CorrectnessFailure:
        """Rounds of paired measurement until the statistics decide (or a row fails)."""
        cfg = self.cfg
        policy = Policy.from_config(cfg.decide, cfg.target.direction)
        if extra_rounds:
            policy = _with(policy, max_rounds=policy.max_rounds + extra_rounds,
                           budget_gpu_s=policy.budget_gpu_s * (1 + extra_rounds / max(1, policy.max_rounds)))
        else:
            self.store.delete_samples(it.version, stage)
            # the candidate is what the proposer left (new files included); after that only
            # the files it holds may change (a formatter's caches never join it)
            stage_tree = gitops.stage_all_tree if stage == "eval" else gitops.stage_tracked_tree
            it.record["evaluated_tree"] = stage_tree(self.ws.cand)
        pairs = list(pairs or [])
        gpu_s = float(it.record.get("gpu_seconds", {}).get(stage, 0.0)) if extra_rounds else 0.0
        r = (max(p.round for p in pairs) + 1) if pairs else 0
        previous_gain = self._previous_subthreshold_gain(it)
        guard = self.guard_configs()
        self.decisions_started += 1
        settled = False
        try:
            while True:
                self.wait_if_paused()
                self.save(it, phase=f"{stage} round {r + 1}")
                self.progress(it, stage, f"round {r + 1} (min {policy.min_rounds}, max {policy.max_rounds})",
                              r, policy.max_rounds)
                env, before = self.acquire_gpu(it)
                try:
                    self.in_timed_step = True
                    if cfg.target.ab_command:
                        new, best_m, cand_m, secs = self.ab_round(it, stage, r, env)
                    else:
                        new, best_m, cand_m, secs = self.abba_round(it, stage, r, env)
                except Preempted:
                    continue
                finally:
                    self.in_timed_step = False
                after = self.gate.evidence()
                flags = round_flags(before, after)
                self.note_gpu(it, before, after, flags=flags, round_index=r)
                if cand_m.failing:
                    settled = True
                    return _failure(cand_m)
                if best_m.failing:
                    raise BenchError("the best tree now fails correctness too: "
                                     f"{_failure(best_m).summary()} (environment changed?)")
                if flags:
                    new = [_with(p, flagged=True) for p in new]
                pairs += new
                gpu_s += secs
                it.record.setdefault("gpu_seconds", {})[stage] = gpu_s
                self.store.add_samples(
                    row for p in new for row in (
                        (it.version, stage, p.round, p.block, "best", p.config, p.cls, p.best),
                        (it.version, stage, p.round, p.block, "cand", p.config, p.cls, p.cand)))
                r += 1
                if r < policy.min_rounds:
                    continue
                verdict = evaluate(pairs, policy, target_class=it.target_class, gpu_seconds=gpu_s,
                                   floors=self.floors(), previous_subthreshold_gain=previous_gain,
                                   guard_configs=guard)
                it.record["classes"] = {c.cls: c.to_dict() for c in verdict.classes}
                it.record["decision"] = {**verdict.to_dict(), "by": "engine"}
                self.save(it)
                self.store.set("live_classes", {"version": it.version, "stage": stage, "verdict": verdict.to_dict()})
                if verdict.final:
                    self.current_pairs = pairs
                    self.update_roofline(it, _cand_medians(pairs), readme=False)
                    self.store.event("decision", f"v{it.version} {stage}: {verdict.kind}: {verdict.reason} "
                                     f"({verdict.rounds} rounds, {gpu_s:.1f} GPU-s)", version=it.version)
                    settled = True
                    return verdict
        finally:
            if not settled:  # a failed or interrupted decision: its serving process goes with it
                self.close_ab_server()

    def guard_configs(self, production: dict[str, bool] | None = None) -> frozenset[str]:
        """[decide].production_verdicts: the non-production configs (of `production`, config
        -> is production; by default the baseline's), which guard the decision instead of
        voting in their classes."""
        if not self.cfg.decide.production_verdicts:
            return frozenset()
        if production is None:
            base = bookkeeping.baseline(self.iterations())
            configs = (base.record.get("configs") or {}) if base else {}
            production = {k: bool(c.get("production", True)) for k, c in configs.items()}
        return frozenset(k for k, is_production in production.items() if not is_production)

    def _previous_subthreshold_gain(self, it: Iteration) -> bool:
        prev = [p for p in self.iterations(include_masked=False) if p.version < it.version and p.final
                and p.status not in ("interrupted",)]
        if not prev:
            return False
        last = prev[-1]
        flags = (last.record.get("decision") or {}).get("flags") or []
        return "subthreshold_gain" in flags and last.target_class == it.target_class

    def abba_round(self, it: Iteration, stage: str, r: int, env: dict[str, str]
                   ) -> tuple[list[Pair], Measurement, Measurement, float]:
        order = ("best", "cand") if r % 2 == 0 else ("cand", "best")
        got: dict[str, Measurement] = {}
        secs = 0.0
        for side in order:
            tree = self.ws.best if side == "best" else self.ws.cand
            m, s = self.run_bench(it, tree, f"{stage}_r{r}_{side}", env)
            got[side] = m
            secs += s
            if side == "cand" and m.failing:
                break
        if "best" not in got:
            return [], got["cand"], got["cand"], secs
        best_m, cand_m = got["best"], got["cand"]
        pairs = []
        for key, b in best_m.configs.items():
            c = cand_m.configs.get(key)
            if c is None:
                continue
            if b.ok and c.ok:
                pairs.append(Pair(key, b.cls, b.value, c.value, r, "AB" if order[0] == "best" else "BA"))
        missing = sorted(set(best_m.configs) - set(cand_m.configs))
        if missing:
            raise BenchError(f"the candidate's CSV lacks config(s) {', '.join(missing[:3])}: the bench's shapes changed")
        return pairs, best_m, cand_m, secs

    def ab_round(self, it: Iteration, stage: str, r: int, env: dict[str, str]
                 ) -> tuple[list[Pair], Measurement, Measurement, float]:
        if self.cfg.target.ab_serve:
            return self.ab_look(it, stage, r, env)
        cmd = self.ab_command()
        before = metrics.csv_stamps(self.ws.best, self.cfg.target.csv)
        res = self.run_cmd_for(it)(cmd, cwd=self.ws.best, name=f"{stage}_r{r}_ab",
                                   timeout_s=self.cfg.target.timeout_s, env=env)
        if not res.ok:
            raise BenchError(f"ab_command {res.why()}: {_last_line(res)}")
        path = metrics.find_csv(self.ws.best, self.cfg.target.csv, before, res.stdout_path)
        self._keep_csv(it, path, f"{stage}_r{r}_ab")
        return (*self.ab_pairs_from(path, r, from_stdout=self.cfg.target.csv == "-"), res.duration_s)

    def ab_pairs_from(self, path: Path, r: int, *, from_stdout: bool = False
                      ) -> tuple[list[Pair], Measurement, Measurement]:
        """An A/B look's CSV as pairs and each side's measurement, once both trees are checked
        untouched by the bench."""
        df = metrics.read_table(path, metric=self.cfg.target.metric, from_stdout=from_stdout)
        self._check_tree_untouched(self.ws.best, "best")
        self._check_tree_untouched(self.ws.cand, "cand")
        return metrics.ab_pairs(df, self.cfg.target, r, path.name)

    def ab_command(self) -> str:
        return self.cfg.target.ab_command.replace("{best}", _q(self.ws.best)).replace("{cand}", _q(self.ws.cand))

    def ab_look(self, it: Iteration, stage: str, r: int, env: dict[str, str]
                ) -> tuple[list[Pair], Measurement, Measurement, float]:
        """One look from the serving ab_command ([target].ab_serve): asked `look r PATH`, it
        answers `done r` with the look's CSV in PATH (ab_server_for: which process)."""
        server = self.ab_server_for(it, stage, env)
        path = self.ws.log_dir(it.version) / f"{stage}_r{r}_ab.csv"
        path.unlink(missing_ok=True)
        t0 = time.monotonic()
        try:
            reply = server.ask(f"look {r} {path}", timeout_s=self.cfg.target.timeout_s, poll=self.poll,
                               poll_interval_s=self.poll_interval_s,
                               is_reply=lambda line: line.split()[:2] in (["done", str(r)], ["fail", str(r)]))
        except runner.ServerError as e:
            raise BenchError(f"ab_command (serving) {e}") from None
        secs = time.monotonic() - t0
        words = reply.split()
        if words[0] == "fail":
            self.close_ab_server()
            raise BenchError(f"ab_command could not measure look {r}: {' '.join(words[2:]) or 'no reason given'}")
        if words[2:3] == ["last"]:  # it leaves after this look; the next look starts a fresh one
            self.close_ab_server()
        return (*self.ab_pairs_from(path, r), secs)

    def ab_server_for(self, it: Iteration, stage: str, env: dict[str, str]) -> runner.Server:
        """The serving ab_command: the one kept from an earlier decision, told to `reload`
        both trees at a decision's first look, or a fresh one (none kept, it left, it could
        not reload, or the GPU chosen for this look is not the one it runs on)."""
        full_env = {**self.cfg.target.env, **env, MARKER: str(self.ws.dir)}
        server = self.ab_server
        if server is not None and server.alive and server.env == full_env:
            if self.ab_server_decision == self.decisions_started:
                return server
            try:
                reply = server.ask("reload", timeout_s=self.cfg.target.timeout_s, poll=self.poll,
                                   poll_interval_s=self.poll_interval_s,
                                   is_reply=lambda line: line == "reloaded" or line.startswith("fail"))
            except runner.ServerError:
                reply = "fail reload"
            if reply == "reloaded":
                self.ab_server_decision = self.decisions_started
                return server
        self.close_ab_server()
        self.ab_servers_started += 1
        name = f"{stage}_ab_serve{self.ab_servers_started}"
        self.store.set("live_log", str(self.ws.log_dir(it.version) / f"{name}.err"))
        try:
            self.ab_server = runner.Server(
                self.ab_command(), cwd=self.ws.best, log_dir=self.ws.log_dir(it.version), name=name, env=full_env,
                on_start=self._child_started, on_end=self._child_ended,
                max_output_bytes=int(self.cfg.target.max_output_mib * 2**20))
        except runner.ServerError as e:
            raise BenchError(f"ab_command (serving) {e}") from None
        self.ab_server_decision = self.decisions_started
        return self.ab_server

    def close_ab_server(self) -> None:
        """End the serving ab_command (idle or not). It is kept only across the loop's own
        quick steps between decisions; waits (pause, review), proposer runs that take time,
        restarts and the run's end close it, so nothing of kopt's holds the GPU then."""
        if self.ab_server is not None:
            server, self.ab_server = self.ab_server, None
            server.close()

    def run_bench(self, it: Iteration, tree: Path, name: str, env: dict[str, str]) -> tuple[Measurement, float]:
        csv = self.cfg.target.csv
        before = metrics.csv_stamps(tree, csv)
        res = self.run_cmd_for(it)(self.cfg.target.bench, cwd=tree, name=name,
                                   timeout_s=self.cfg.target.timeout_s, env=env)
        side = tree.name
        if not res.ok:
            raise BenchError(f"bench on {side}/ {res.why()}: {_last_line(res)}")
        path = metrics.find_csv(tree, csv, before, res.stdout_path)
        self._keep_csv(it, path, name)
        self._check_tree_untouched(tree, side)
        measurement = metrics.read_measurement(path, self.cfg.target, from_stdout=csv == "-")
        if tree == self.ws.cand:
            gitops.remove_untracked(tree)  # bench outputs never become part of the candidate
        return measurement, res.duration_s

    def _keep_csv(self, it: Iteration, path: Path, name: str) -> None:
        if path.suffix != ".out":
            dest = self.ws.log_dir(it.version) / f"{name}.csv"
            try:
                dest.write_bytes(path.read_bytes()[: 64 * 1024 * 1024])
            except OSError:
                pass

    def _check_tree_untouched(self, tree: Path, side: str) -> None:
        touched = gitops.unstaged_changes(tree)
        if touched:
            gitops.restore_from_index(tree)
            raise BenchError(f"the bench modified tracked file(s) in {side}/: {', '.join(touched[:5])} (restored)")

    # -- profiler, review, keep ---------------------------------------------------------

    def confirm_with_profiler(self, it: Iteration, verdict: Verdict) -> Verdict:
        """The reference program's final word: the profiler's GPU time must agree."""
        if self.profiler() is None:
            return verdict
        try:
            best = self.profile_tree(it, self.ws.best, "best")
            cand = self.profile_tree(it, self.ws.cand, "cand")
        except KoptFailure as e:
            it.record["profile"] = {"error": str(e)}
            self.save(it)
            return _with(verdict, kind="borderline", reason=f"the bench says keep, but the profiler failed: {e}",
                         flags=(*verdict.flags, "profiler_failed"))
        assert best is not None and cand is not None
        cmp = compare(best, cand)
        it.record["profile"] = {"best": best.to_dict(), "cand": cand.to_dict(), "comparison": cmp.to_dict()}
        self.save(it)
        self.store.event("profile", f"v{it.version}: {cmp.summary_line()}", version=it.version)
        checked = reconcile_profiler(verdict, cmp.ratio, agree_margin_pct=self.cfg.profile.agree_margin_pct)
        if checked.kind != verdict.kind:
            return checked
        return _with(verdict, reason=f"{verdict.reason}; profiler agrees ({cmp.summary_line()})")

    def profiler(self):  # noqa: ANN201 - a Profiler or None
        """The configured profiler for the chosen GPU's vendor (None: no profiling)."""
        if not hasattr(self, "_profiler"):
            vendor = getattr(self.gate.chosen, "vendor", "none") if self.gate.chosen is not None else "none"
            self._profiler = choose_profiler(self.cfg.profile.kind, str(vendor))
        return self._profiler

    def profile_tree(self, it: Iteration, tree: Path, side: str, *, tolerate: bool = False) -> ProfileSummary | None:
        """Run the bench (or [profile].command) under the profiler in `tree`."""
        try:
            prof = self.profiler()
            if prof is None:
                return None
            self.progress(it, "profile", f"{prof.name} on {side}/")
            out_dir = self.ws.profiles / f"v{it.version}" / side
            kernel = self.cfg.profile.kernel
            argv = prof.command(runner.as_argv(self.cfg.profile.command or self.cfg.target.bench), out_dir, kernel)
            env, _ = self.acquire_gpu(it)
            res = self.run_cmd_for(it)(argv, cwd=tree, name=f"profile_{side}", timeout_s=self.cfg.profile.timeout_s,
                                       env={**env, **PROFILE_ENV})
            self._check_tree_untouched(tree, side)
            if not res.ok:
                raise KoptFailure(f"{prof.name} on {side}/ {res.why()}: {_last_line(res)}")
            summary = prof.parse(out_dir, kernel)
            summary.save(out_dir / "summary.json")
            if tree == self.ws.cand:
                gitops.remove_untracked(tree)
            return summary
        except KoptFailure as e:
            if not tolerate:
                raise
            self.store.event("profile", f"v{it.version}: profiling {side}/ failed: {e}", version=it.version, level="warn")
            return None

    def update_roofline(self, it: Iteration, values: dict[str, float], *, base: Iteration | None = None,
                        readme: bool = True) -> None:
        """record["roofline"] of this tree, and (for the best tree) the README's Step 0 text."""
        base = base or bookkeeping.baseline(self.iterations())
        configs = (base.record.get("configs") or {}) if base else {}
        if not configs:
            return
        gpu = self.gate.chosen
        try:
            rr = evaluate_roofline(
                self.cfg, gpu_name=str(gpu.name) if gpu is not None else None,
                gpu_uuid=str(gpu.uuid) if gpu is not None else None,
                rows={k: c["row"] for k, c in configs.items()}, values=values,
                class_of={k: c["cls"] for k, c in configs.items()},
                production=[k for k, c in configs.items() if c.get("production", True)],
                measured_dir=self.ws.root / ".ceilings")
        except KoptFailure as e:
            it.record["roofline"] = {"error": str(e)}
            self.store.event("roofline", f"roofline analysis failed: {e}", level="error")
            return
        if rr is not None:
            it.record["roofline"] = rr.record
            if readme:
                self.store.set("roofline_md", rr.markdown)

    def floors(self) -> dict[str, float]:
        """Per config, the metric's roofline floor (beating it is suspicious)."""
        base = bookkeeping.baseline(self.iterations())
        points = ((base.record.get("roofline") or {}).get("configs") or {}) if base else {}
        scale = self.cfg.roofline.unit_scale
        if self.cfg.target.direction != "min":
            return {}
        return {k: p["floor_s"] / scale for k, p in points.items() if p.get("floor_s")}

    def pending_review(self) -> Iteration | None:
        for it in reversed(self.iterations()):
            if it.status == "borderline" and not it.masked:
                return it
        return None

    def review(self, it: Iteration, verdict: Verdict) -> tuple[Verdict, str]:
        """Borderline: wait for the engineer until the review timeout, then apply the policy."""
        while True:
            deadline = time.time() + self.cfg.decide.review_timeout_s
            it.status = "borderline"
            it.record["review"] = {"opened_at": time.time(), "deadline": deadline, "reason": verdict.reason}
            it.record["decision"] = {**verdict.to_dict(), "by": "engine"}
            self.set_state("awaiting_review")  # before the row: a reader never sees one without the other
            self.save(it, phase="review")
            self.store.event("review", f"v{it.version} is borderline: {verdict.reason}; awaiting the engineer",
                             version=it.version, level="warn")
            answer = self.await_review(it, self.cfg.decide.review_timeout_s)
            if answer is None:
                return self._reviewed(verdict, None)
            if answer.kind == "more_rounds":
                self.store.finish_command(answer.id, "done", f"more rounds for v{it.version}")
                more = self.decide(it, stage="eval", extra_rounds=self.cfg.decide.max_rounds,
                                   pairs=getattr(self, "current_pairs", []))
                if isinstance(more, CorrectnessFailure):
                    return _with(verdict, kind="rejected", reason=f"correctness failed in more rounds: {more.summary()}"), "engine"
                verdict = more
                if verdict.kind != "borderline":
                    it.status = "running"
                    self.save(it)
                    return verdict, "engine"
                continue
            self.store.finish_command(answer.id, "done", f"v{it.version} {answer.kind}ed")
            return self._reviewed(verdict, answer)

    def _reviewed(self, verdict: Verdict, answer: Command | None) -> tuple[Verdict, str]:
        """The review's outcome as a verdict: the engineer's answer, or the policy's."""
        why = str(answer.args.get("why") or "") if answer else ""
        out = review_outcome(verdict, answer.kind if answer else None,
                             Policy.from_config(self.cfg.decide, self.cfg.target.direction),
                             why=f"{answer.kind}ed by the engineer: {why} (borderline: {verdict.reason})"
                             if why else "")
        return _with(verdict, kind=out.status, reason=out.reason), out.by

    def finish_review(self, it: Iteration) -> None:
        """After a restart, a review left open: wait for it (the deadline persists)."""
        verdict = Verdict.from_dict(it.record.get("decision") or {"verdict": "borderline", "reason": "borderline"})
        deadline = float((it.record.get("review") or {}).get("deadline", time.time()))
        self.sync_worktrees_for_review(it)
        # the wall-clock deadline is all that survives a restart; a clock that jumped
        # meanwhile never makes the wait longer than review_timeout_s
        left = min(max(0.0, deadline - time.time()), self.cfg.decide.review_timeout_s)
        answer = self.await_review(it, left)
        if answer is not None and answer.kind == "more_rounds":
            self.store.finish_command(answer.id, "rejected", "more rounds are not possible after an engine restart")
            answer = None
        if answer is not None:
            self.store.finish_command(answer.id, "done", f"v{it.version} {answer.kind}ed")
        outcome, by = self._reviewed(verdict, answer)
        if outcome.kind == "accepted" and self._candidate_intact(it):
            return self.keep(it, _with(outcome, reason=f"{outcome.reason} (after an engine restart)"), by)
        reason = outcome.reason if outcome.kind == "rejected" else \
            "accepted, but the candidate in cand/ is no longer the one evaluated"
        self.close(it, "rejected", reason, verdict=verdict, by=by)

    def _candidate_intact(self, it: Iteration) -> bool:
        try:
            return gitops.head(self.ws.cand) == it.best_commit_before and \
                gitops.stage_tracked_tree(self.ws.cand) == it.record.get("evaluated_tree")
        except KoptFailure:
            return False

    def sync_worktrees_for_review(self, it: Iteration) -> None:
        """Keep the candidate in cand/ (it is what awaits review); only best/ must be exact."""
        repo = self.store.get("repo")
        gitops.ensure_worktree(repo, self.ws.best, branch=self.ws.branch, commit=it.best_commit_before or "")
        gitops.reset_clean(self.ws.best, it.best_commit_before or self.best_commit())

    def await_review(self, it: Iteration, seconds: float) -> Command | None:
        """Wait up to `seconds` (monotonic: a wall-clock jump neither ends nor extends it)."""
        self.review_version = it.version
        self.review_answer = None
        self.set_state("awaiting_review")
        self.close_ab_server()
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                self.poll()
                if self.review_answer is not None:
                    return self.review_answer
                self.progress(it, "review", f"awaiting the engineer: {end - time.monotonic():.0f} s left")
                time.sleep(self.poll_interval_s)
            return None
        finally:
            self.review_version = None
            self.set_state("paused" if self.paused else "running")

    def keep(self, it: Iteration, verdict: Verdict, by: str) -> None:
        status = "accepted" if verdict.kind == "accepted" else "keep"
        cand = self.ws.cand
        if self.cfg.format.command:
            self.save(it, phase="format")
            res = self.run_cmd_for(it)(self.cfg.format.command, cwd=cand, name="format",
                                       timeout_s=self.cfg.format.timeout_s, env=self.cfg.target.env)
            if not res.ok:
                return self.close(it, "fail_bench", f"the format command {res.why()}: {_last_line(res)}",
                                  verdict=verdict, by=by)
            changed = gitops.changed_files(cand, it.best_commit_before or "")
            hit = gitops.matching(changed, [*self.cfg.target.protected, *ALWAYS_PROTECTED])
            if hit:
                return self.close(it, "fail_protected", f"the format command changed protected file(s): {', '.join(hit)}",
                                  verdict=verdict, by=by)
            tree_after = gitops.stage_tracked_tree(cand)
            if self.cfg.decide.verify_after_format and tree_after != it.record.get("evaluated_tree"):
                check = self.decide(it, stage="verify")
                if isinstance(check, CorrectnessFailure):
                    return self.close(it, "fail_correctness", f"after formatting: {check.summary()}", verdict=verdict, by=by)
                ok = check.kind == "keep" or (status == "accepted" and check.kind not in ("regression", "split"))
                if not ok:
                    st = check.kind if check.kind in ("regression", "tie", "split") else "rejected"
                    return self.close(it, st, f"after formatting: {check.reason}", verdict=check, by=by)
                it.record["verify"] = check.to_dict()
        self.update_roofline(it, _cand_medians(self.current_pairs))
        self.save(it, phase="commit")
        it.record["commit_tree"] = gitops.stage_tracked_tree(cand)
        it.record["keep_status"] = status
        self.save(it)
        sha = gitops.commit(cand, self.commit_message(it, verdict))
        faults.step(f"v{it.version} git commit")
        it.commit = sha
        self.save(it, phase="advance")
        gitops.reset_clean(self.ws.best, sha)
        self.close(it, status, verdict.reason, verdict=verdict, by=by)

    def commit_message(self, it: Iteration, verdict: Verdict) -> str:
        lines = [it.hypothesis[:72], "", f"kopt v{it.version} ({self.ws.tag}): {verdict.kind} — {verdict.reason}", ""]
        for c in verdict.classes:
            lines.append(f"  {c.cls}: {c.best:.4g} -> {c.cand:.4g} ({c.delta_pct:+.2f}%, "
                         f"{(c.lo - 1) * 100:+.2f}..{(c.hi - 1) * 100:+.2f}%, {c.verdict})")
        lines += ["", f"Measured paired with the previous best over {verdict.rounds} rounds "
                  f"({verdict.gpu_seconds:.1f} GPU-s)."]
        if it.target_class:
            lines.append(f"Target class: {it.target_class}.")
        return "\n".join(lines) + "\n"

    # -- restart ------------------------------------------------------------------------

    def restart(self, r: RestartRequested) -> None:
        self.close_ab_server()
        control.restart_from(self.ws, self.store, r.version, r.why)
        self.sync_worktrees()
        self.write_projections()
        if r.command_id is not None:  # done once applied, not when read
            self.store.finish_command(r.command_id, "done", f"restarted from v{r.version}")

    # ===================================================================================
    # Closing an iteration and writing projections

    def close(self, it: Iteration, status: str, reason: str, *, verdict: Verdict | None = None, by: str = "engine") -> None:
        it.status = status
        it.phase = "done"
        it.finished_at = time.time()
        decision = dict(it.record.get("decision") or {})
        if verdict is not None:
            decision.update(verdict.to_dict())
        decision.update({"verdict": status, "reason": reason, "by": by})
        it.record["decision"] = decision
        self.store.save_iteration(it)
        level = "info" if status in ("baseline", "keep", "accepted", "tie") else "warn"
        self.store.event("verdict", f"v{it.version}: {status}: {reason}", version=it.version, level=level)
        self.log(f"v{it.version}: {status}: {reason}")
        self.write_memory(it)
        self.write_projections()
        if status not in ("baseline", "keep", "accepted"):
            self.discard_candidate()

    def discard_candidate(self) -> None:
        """Roll cand/ back to BEST_COMMIT (the reference program's "revert to BEST_COMMIT")."""
        try:
            gitops.reset_clean(self.ws.cand, self.best_commit(), detach=True)
        except KoptError as e:  # cand/ may be no repository at all now: sync_worktrees re-creates it
            self.store.event("git", f"could not reset cand/: {e} (retried at the next iteration)", level="warn")

    def save(self, it: Iteration, *, phase: str | None = None) -> None:
        if phase is not None:
            it.phase = phase
        self.store.save_iteration(it)

    def write_memory(self, it: Iteration) -> None:
        try:
            write_memory(self.ws, it)
        except OSError as e:
            self.store.event("disk", f"cannot write memory/v{it.version}.json: {e}", level="error")

    def write_projections(self) -> None:
        try:
            write_projections(self.ws, self.store, self.cfg)
        except OSError as e:
            self.store.event("disk", f"cannot write projections: {e}", level="error")

    # ===================================================================================
    # Commands, pausing, GPU gate, subprocesses

    def poll(self) -> None:
        """Act on pending commands; raise to interrupt what the engine is doing."""
        if self.signal_stop:
            raise StopRequested(self.signal_stop)
        for cmd in self.store.pending_commands():
            self.handle(cmd)

    def handle(self, cmd: Command) -> None:
        st = self.store
        kind = cmd.kind
        if kind == "pause":
            self.paused = True
            st.set("paused", True)
            self.set_state("paused")
            st.finish_command(cmd.id, "done", "paused")
            st.event("command", "paused by the engineer")
            if self.in_timed_step:
                raise Preempted()
        elif kind == "resume":
            self.paused = False
            st.set("paused", False)
            self.set_state("running")
            st.finish_command(cmd.id, "done", "resumed")
            st.event("command", "resumed by the engineer")
        elif kind == "stop":
            st.finish_command(cmd.id, "done", "stopping")
            why = cmd.args.get("why")
            raise StopRequested("stopped by the engineer" + (f": {why}" if why else ""))
        elif kind in ("accept", "reject", "more_rounds"):
            v = int(cmd.args.get("version", -1))
            if self.review_version is not None and v == self.review_version:
                self.review_answer = cmd
            else:
                st.finish_command(cmd.id, "rejected", f"v{v} is not awaiting review")
        elif kind == "restart":
            v = int(cmd.args.get("version", -1))
            try:
                control.check_restart_point(st, v)
            except BadInput as e:
                st.finish_command(cmd.id, "rejected", str(e))
                return
            raise RestartRequested(v, str(cmd.args.get("why") or ""), cmd.id)
        elif kind in ("mask", "unmask"):
            try:
                changed = control.set_masked(self.ws, st, [int(x) for x in cmd.args.get("versions", [])],
                                             kind == "mask")
            except BadInput as e:
                st.finish_command(cmd.id, "rejected", str(e))
                return
            self.write_projections()
            st.finish_command(cmd.id, "done", f"{kind}ed {', '.join(f'v{v}' for v in changed) or 'nothing'}")
        elif kind == "submit":
            if "submit" not in self.waiting_for:
                return  # stays pending until the manual proposer asks for it
        else:
            st.finish_command(cmd.id, "rejected", f"{kind!r} is not handled by this engine")

    def wait_for_command(self, kinds: set[str], timeout_s: float) -> Command:
        self.waiting_for = set(kinds)
        self.set_state("running")
        end = time.monotonic() + timeout_s
        try:
            while time.monotonic() < end:
                self.poll()
                for cmd in self.store.pending_commands(kinds):
                    self.store.finish_command(cmd.id, "done", "received")
                    return cmd
                self.progress(None, "propose", f"waiting for `kopt submit {self.ws.tag}` (manual proposer)")
                time.sleep(self.poll_interval_s)
        finally:
            self.waiting_for = set()
        raise KoptFailure(f"no {'/'.join(sorted(kinds))} command within {timeout_s:.0f} s")

    def wait_if_paused(self) -> None:
        if not self.paused:
            self.poll()
        if self.paused:
            self.close_ab_server()
        while self.paused:
            self.set_state("paused")
            self.progress(None, "paused", "paused by the engineer (resume with `p` or `kopt resume`)")
            time.sleep(self.poll_interval_s)
            self.poll()

    def set_state(self, state: str) -> None:
        if self.store.get("state") != state:
            self.store.set("state", state)

    def progress(self, it: Iteration | None, phase: str, step: str, done: int | None = None,
                 total: int | None = None) -> None:
        prev = self.store.get("progress") or {}
        version = it.version if it else prev.get("version")
        same = prev.get("version") == version and prev.get("phase") == phase
        if same and prev.get("step") != step and abs(time.time() - float(prev.get("t") or 0)) < 1.0 and done is None:
            return  # a countdown: at most one write a second
        if same and prev.get("step") == step and prev.get("done") == done:
            return
        started = prev.get("phase_started_at") if same else time.time()
        eta = None
        if done and total and started:
            eta = (time.time() - started) / done * max(0, total - done)
        self.store.set("progress", {"version": version, "phase": phase, "step": step, "done": done, "total": total,
                                    "phase_started_at": started, "eta_s": eta, "t": time.time()})

    def acquire_gpu(self, it: Iteration) -> tuple[dict[str, str], dict[str, Any] | None]:
        decision = self.gate.acquire()
        self.set_state("paused" if self.paused else "running")
        gpu = decision.gpu
        self.store.set("gpu", {"chosen": gpu.to_dict() if gpu else None, "waited_s": decision.waited_s,
                               "assessments": [a.to_dict() for a in decision.assessments], "t": time.time()})
        env = {**decision.env, MARKER: str(self.ws.dir)}
        return env, self.gate.evidence()

    def note_gpu(self, it: Iteration, before: Any, after: Any, *, flags: list[str] | None = None,
                 round_index: int | None = None) -> None:
        g = it.record.setdefault("gpu", {})
        g.setdefault("before", before)
        g["after"] = after
        if before:
            g.setdefault("index", before.get("index"))
            g.setdefault("name", before.get("name"))
            g.setdefault("uuid", before.get("uuid"))
        else:
            g.setdefault("name", "no GPU (CPU-only target)")
        if flags:
            g.setdefault("flagged_rounds", []).append({"round": round_index, "flags": flags})

    def _gate_sleep(self, seconds: float) -> None:
        self.set_state("waiting_gpu")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.poll()
            self.progress(None, "waiting_gpu", f"no idle GPU: next check in {end - time.monotonic():.0f} s")
            time.sleep(min(self.poll_interval_s, max(0.0, end - time.monotonic())))

    def _own_pids(self) -> set[int]:
        if self.child_pgid is None:
            return set()
        return {p.pid for p in runner.group_members(self.child_pgid)}

    def run_cmd_for(self, it: Iteration) -> Callable[..., runner.RunResult]:
        def run(command: str | list[str], *, cwd: Path, name: str, timeout_s: float, env: dict[str, str] | None = None
                ) -> runner.RunResult:
            full_env = {**self.cfg.target.env, **(env or {}), MARKER: str(self.ws.dir)}
            self.store.set("live_log", str(self.ws.log_dir(it.version) / f"{name}.out"))
            return runner.run(command, cwd=cwd, log_dir=self.ws.log_dir(it.version), name=name, timeout_s=timeout_s,
                              env=full_env, poll=self.poll, poll_interval_s=self.poll_interval_s,
                              on_start=self._child_started, on_end=self._child_ended,
                              max_output_bytes=int(self.cfg.target.max_output_mib * 2**20))
        return run

    def _child_started(self, pgid: int) -> None:
        self.child_pgid = pgid
        self.store.set("child_pgid", pgid)
        faults.step(f"child started: {Path(str(self.store.get('live_log') or '?')).stem}")

    def _child_ended(self, pgid: int) -> None:
        self.child_pgid = None
        self.store.set("child_pgid", None)


def write_initial_projections(ws: Workspace) -> None:
    """README.md and performance.md right after `kopt init`."""
    with ws.open_store() as store:
        write_projections(ws, store, ws.load_config())


class BaselineFailed(KoptFailure):
    """The unmodified baseline cannot be measured: the run stops with this reason."""


def _failure(m: Measurement) -> CorrectnessFailure:
    return CorrectnessFailure([{"config": c.key, "cls": c.cls, "reasons": list(c.reasons)} for c in m.failing])


def _cand_medians(pairs: list[Pair]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for p in pairs:
        values.setdefault(p.config, []).append(p.cand)
    return {k: statistics.median(v) for k, v in values.items()}


def _geomean(values: list[float]) -> float:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan


def _with(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


def _q(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def _last_line(res: runner.RunResult) -> str:
    tail = res.tail(5) or res.tail(5, "stdout")
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"

"""A proposal: what the proposer is handed and its run (`Proposing`), then the rules on what the
proposal may be, checked before anything is timed (`Police`).

The propose step, for one lane (docs/design.md §10): the context (KOPT_PROMPT and the KOPT_*
variables) and the proposer's run. A proposer that takes time (an agent, the engineer) first
gets the lane's serving bench closed, so nothing of kopt's holds GPU memory while it works.
Its result, whatever it is, is recorded in the iteration (`proposal`, or `repairs` for a
correctness repair).

Policing: the plan must name a hypothesis (and a target class the bench has, if any); the
run's frozen config must be as `kopt init` wrote it; cand/ must still be a worktree at
BEST_COMMIT with the change left uncommitted; best/ and the run's branch must be untouched;
protected files unchanged; and the change must touch something the bench runs. A violation
is a `Problem`: the status the iteration ends with and the reason, naming what was seen."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import stat
import sys
import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kopt_supervisor.engine import KoptError, KoptFailure, gitops, history, projections, treecheck
from kopt_supervisor.engine.diffscan import parse_diff, scan
from kopt_supervisor.engine.diffscan.findings import Finding, parse_allow, quote, review_reason
from kopt_supervisor.engine.loop.context import BEST, Lane, RunContext, acquire
from kopt_supervisor.engine.loop.control import Step
from kopt_supervisor.engine.propose.context import build_pack
from kopt_supervisor.engine.propose.context_inputs import PackInputs, SourceFile, list_sources
from kopt_supervisor.engine.propose.proposer import (
    Proposal,
    ProposalContext,
    Proposer,
    assess_plan,
    route_submit,
    wait_key,
)
from kopt_supervisor.engine.records import Iteration, Phase, Status
from kopt_supervisor.engine.workspace import write_atomic

ALWAYS_PROTECTED = ["kopt.toml", ".kopt/*"]


class Problem(NamedTuple):
    status: Status
    reason: str


class Police:
    def __init__(self, ctx: RunContext, frozen_config: bytes) -> None:
        self.ctx = ctx
        self.frozen_config = frozen_config
        self._modules: frozenset[str] | None = None
        self._listing: tuple[threading.Thread, list[frozenset[str] | KoptError]] | None = None

    def read_diff(
        self, it: Iteration, lane: Lane, new: Collection[str] = (), staged: gitops.StagedChange | None = None
    ) -> None:
        """The candidate's diff read for constructs that reach outside the kernel (engine/
        diffscan), and, where [target].sources is declared, for changes to tracked files
        outside it (`outside_sources`): what it finds goes with the verdict to the engineer
        (Evidence.confirm). `new`: the candidate's new (untracked) files; `staged`: the
        candidate as the police's step staged it (else it is staged here)."""
        text, truncated = (
            staged.scan_diff()
            if staged is not None
            else gitops.scan_diff(lane.cand, it.best_commit_before or "", force=it.record.get("forced_paths", []))
        )
        t = self.ctx.cfg.target
        findings = scan(
            text, lambda path: read_for_scan(lane.cand, path), allow=t.allow_constructs, truncated=truncated
        )
        sources = [*t.sources, *filter(None, [self.ctx.cfg.propose.tune.params])] if t.sources else []
        allows = parse_allow(t.allow_constructs)
        findings += [
            f
            for f in outside_sources(text, it.record.get("changed_files") or [], new, sources)
            if not any(a.covers(f) for a in allows)
        ]
        it.record["diff_scan"] = {
            "findings": [dataclasses.asdict(f) for f in findings],
            "reason": review_reason(findings),
        }
        if findings:
            self.ctx.event(
                "police",
                f"v{it.version}: the diff reaches outside the kernel: {it.record['diff_scan']['reason'][:300]}",
                it=it,
                level="warn",
            )

    def allowed(self) -> list[str]:
        """New files a candidate may hold: declared sources, [target].allow_untracked, the tune params."""
        t, tune = self.ctx.cfg.target, self.ctx.cfg.propose.tune
        return [*t.sources, *t.allow_untracked, *filter(None, [tune.params])]

    def _interpreter(self) -> tuple[str, dict[str, str]]:
        """The bench command's interpreter (its first word, `python ...` or a path to one),
        else kopt's own. Never one inside the run's workspace: the listing runs unconfined,
        and a file of a tree (a tracked `./python`) is candidate content."""
        env = self.ctx.procs.env()
        try:
            words = shlex.split(self.ctx.cfg.target.bench)
        except ValueError:
            words = []
        python = treecheck.python_of(words, env)
        if python is None or not os.path.isabs(python):
            return sys.executable, env
        inside = Path(os.path.realpath(python)).is_relative_to(os.path.realpath(self.ctx.ws.dir))
        return (sys.executable if inside else python), env

    def list_modules_ahead(self) -> None:
        """Start listing what the bench's interpreter imports in a thread (a subprocess of
        about 2 s on the H100's host), so that the first candidate's check need not wait for
        it: the engine starts it before the baseline."""
        if self._modules is not None or self._listing is not None:
            return
        python, env = self._interpreter()
        got: list[frozenset[str] | KoptError] = []

        def listing() -> None:
            try:
                got.append(treecheck.importable_names(python, env=env))
            except KoptError as e:
                got.append(e)

        thread = threading.Thread(target=listing, name="kopt-importable-modules", daemon=True)
        thread.start()
        self._listing = (thread, got)

    def modules(self) -> frozenset[str]:
        """What the bench's interpreter can import (a new module must not take one of these
        names), asked once per engine (or listed ahead, `list_modules_ahead`)."""
        if self._modules is None:
            python, env = self._interpreter()
            if self._listing is not None:
                thread, got = self._listing
                thread.join()
                self._listing = None
                result: frozenset[str] | KoptError = (
                    got[0] if got else KoptError("the listing thread ended without one")
                )
            else:
                try:
                    result = treecheck.importable_names(python, env=env)
                except KoptError as e:
                    result = e
            if isinstance(result, KoptError):
                self.ctx.event(
                    "police",
                    f"cannot list what {python} imports ({result}): checking the standard library only",
                    level="warn",
                )
                result = treecheck.STDLIB
            self._modules = result
        return self._modules

    def check(self, it: Iteration, lane: Lane, *, plan: bool = True) -> Problem | None:
        """Everything a proposal must satisfy (the plan only for a first proposal: a repair
        keeps the hypothesis)."""
        with self.ctx.clock(it, "police_s"):
            return self.config_intact(it) or (self.read_plan(it) if plan else None) or self.candidate(it, lane)

    def config_intact(self, it: Iteration) -> Problem | None:
        """The run's kopt.toml is the engine's: an edit is put back and the proposal fails."""
        try:
            intact = self.ctx.ws.config_path.read_bytes() == self.frozen_config
        except OSError:
            intact = False
        if intact:
            return None
        write_atomic(self.ctx.ws.config_path, self.frozen_config.decode("utf-8"))
        reason = f"the proposer edited the run's frozen config {self.ctx.ws.config_path} (restored)"
        it.record["tampered"] = reason
        self.ctx.event("tamper", f"v{it.version}: {reason}", it=it, level="error")
        return Problem(Status.FAIL_PROTECTED, reason)

    def read_plan(self, it: Iteration) -> Problem | None:
        path = self.ctx.ws.plan_path(it.version)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:20000]
        except OSError:
            text = ""
        if not text.strip():
            return Problem(
                Status.FAIL_PROPOSE, f"the proposer wrote no plan to {path.name} (first line: the hypothesis)"
            )
        pack = self.ctx.ws.prompt_path(it.version).with_suffix(".json")
        try:
            pack_json: Any = pack.read_text(encoding="utf-8")
        except OSError:
            pack_json = {"classes": self.ctx.store.get("classes", [])}
        assessed = assess_plan(text, pack_json)
        if not assessed.ok:
            return Problem(Status.FAIL_PROPOSE, f"{path.name}: {assessed.reason}")
        plan = assessed.plan
        it.hypothesis, it.target_class, it.scope = plan.hypothesis, plan.target_class, plan.scope
        it.record["plan"] = assessed.to_dict()
        self.ctx.save(it)
        self.ctx.event(
            "plan",
            f"v{it.version}: {plan.hypothesis}"
            + (f" [class {plan.target_class}]" if plan.target_class else " [global]"),
            it=it,
        )
        if assessed.flags:
            self.ctx.event(
                "plan", f"v{it.version}: the plan {', '.join(assessed.flags)}: {assessed.reason}", it=it, level="warn"
            )
        return None

    def restore_best(self, it: Iteration, lane: Lane, best: str, rb: treecheck.TreeReport, why: str) -> None:
        """The lane's best tree back at `best` (a failure is left to the next iteration's sync)."""
        try:
            restore_best(lane.best, best, rb, detach=lane.best != self.ctx.ws.best)
        except KoptError as e:
            self.ctx.event(
                "tamper", f"v{it.version}: could not restore best/: {e} (the next sync does)", it=it, level="error"
            )
            return
        if why:
            self.ctx.event("tamper", f"v{it.version}: best/ restored to {best[:10]} {why}", it=it, level="error")

    def candidate(self, it: Iteration, lane: Lane) -> Problem | None:
        """The rules on what a candidate may change."""
        ctx, cand = self.ctx, lane.cand
        best = it.best_commit_before or ""
        if not (cand / ".git").is_file():
            return Problem(Status.FAIL_PROTECTED, f"the proposer removed or replaced {cand.name}/.git")
        try:
            head = gitops.head(cand)
        except KoptError as e:
            return Problem(Status.FAIL_PROTECTED, f"{cand.name}/ is no longer a usable git worktree: {e}")
        if head != best:
            return Problem(
                Status.FAIL_PROPOSE,
                "the proposer made commits of its own in cand/ (kopt commits keeps; leave changes uncommitted)",
            )
        history.check_chain(ctx.key, ctx.store)  # BEST below is read from the rows: they must be the engine's
        with BEST:  # another lane's keep moves the branch, then BEST, under this lock (4xH200: v21 of ray4)
            moved = gitops.branch_sha(ctx.store.get("repo"), ctx.ws.branch) != ctx.history.best_commit()
        if moved:
            return Problem(Status.FAIL_PROTECTED, "the proposer changed best/ or the run's branch")
        try:
            rb = treecheck.inspect(
                lane.best, best, allow=ctx.cfg.target.allow_untracked, modules=(), strict=True, label="best/"
            )
        except KoptError as e:
            return Problem(
                Status.FAIL_PROTECTED, f"best/ is no longer a usable git worktree: {e} (re-created next iteration)"
            )
        try:
            rc = treecheck.inspect(cand, best, allow=self.allowed(), modules=self.modules(), label="cand/")
        except KoptError as e:
            return Problem(Status.FAIL_PROTECTED, f"cand/ is no longer a usable git worktree: {e}")
        if rb.modified or rb.index_hidden or rb.hardlinks:  # failed, and best/ put back first
            self.restore_best(it, lane, best, rb, f"after the proposer changed it: {rb.reason()}")
            return Problem(Status.FAIL_PROTECTED, f"the proposer changed best/ or the run's branch ({rb.reason()})")
        if rb.differs:  # an agent that ran the bench there, or a module planted to slow best: wiped
            self.restore_best(it, lane, best, rb, "")
            more = " ..." if len(rb.new) > 5 else ""
            ctx.event(
                "tamper",
                f"v{it.version}: removed what the proposer left in best/: {', '.join(rb.new[:5])}{more}",
                it=it,
                level="warn",
            )
        if not rc.ok:  # executable content, links, modules shadowing importable ones, nested repositories...
            return Problem(Status.FAIL_PROTECTED, f"{rc.reason()} ([target].allow_untracked may allow new code files)")
        removed = gitops.remove_ignored(cand, keep=self.allowed())  # never executed, never committed
        it.record["forced_paths"] = [p for p in rc.ignored if p in rc.allowed]
        if removed:
            ctx.event(
                "police", f"v{it.version}: removed ignored files the candidate is not: {', '.join(removed[:5])}", it=it
            )
        # the change staged once for its three readings (the files, the recorded patch, the
        # diff scan): nothing runs in cand/ between them
        with gitops.staged_change(cand, best, force=it.record["forced_paths"]) as staged:
            return self.change(it, lane, staged)

    def change(self, it: Iteration, lane: Lane, staged: gitops.StagedChange) -> Problem | None:
        """The rules on what the candidate changes (`staged`: against BEST_COMMIT)."""
        ctx, cand = self.ctx, lane.cand
        changed = staged.changed
        it.record["changed_files"] = changed
        ctx.save(it)
        if changed:
            try:
                write_atomic(ctx.ws.log_dir(it.version) / "candidate.diff", staged.diff())
            except OSError as e:
                ctx.event("disk", f"cannot write the candidate's diff: {e}", level="warn")
        if not changed:
            return Problem(Status.FAIL_PROPOSE, "the proposer changed nothing")
        hit = gitops.matching(changed, [*ctx.cfg.target.protected, *ALWAYS_PROTECTED])
        if hit:
            return Problem(Status.FAIL_PROTECTED, f"the candidate changes protected file(s): {', '.join(hit)}")
        new_only = gitops.untracked(cand)
        self.read_diff(it, lane, {*new_only, *it.record["forced_paths"]}, staged)
        read_by_bench = gitops.matching(
            new_only, [*ctx.cfg.target.sources, *filter(None, [ctx.cfg.propose.tune.params])]
        )
        if set(changed) == set(new_only) and not read_by_bench:
            # no tracked file imports them (and none is a declared source or the tune params
            # file): junk, or a module planted to shadow one the bench uses
            return Problem(
                Status.FAIL_PROPOSE,
                f"the proposer only added untracked file(s) ({', '.join(new_only[:5])}) "
                "and changed no tracked file: nothing of the kernel changed",
            )
        return None


def restore_best(tree: Path, commit: str, report: treecheck.TreeReport, *, detach: bool) -> None:
    """A best tree exactly at `commit` again after `report` found it changed: files with
    other names (hard links: a write through the other name would reach the tree again, and
    git leaves a file whose content is unchanged alone) are unlinked first, then the tree is
    reset and cleaned."""
    for rel in report.hardlinks:
        with contextlib.suppress(OSError):
            (tree / rel).unlink()
    gitops.reset_clean(tree, commit, detach=detach)


SCAN_READ_MAX = 64 << 20
"""The most of one changed file the diff scan reads (the diff's own cap, gitops.scan_diff)."""


def read_for_scan(tree: Path, path: str) -> bytes | None:
    """A changed file whole, as bytes (the diff scan decodes them as the interpreter does), or
    None where it cannot be (gone, a link, not a regular file, over SCAN_READ_MAX): the scan's
    `unread` finding. Never a prefix: a file cut at a read limit hid code past the cut."""
    try:
        fd = os.open(tree / path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            data = f.read(SCAN_READ_MAX + 1)
    except OSError:
        return None
    return data if len(data) <= SCAN_READ_MAX else None


def outside_sources(
    diff: str, changed: Sequence[str], new: Collection[str], sources: Sequence[str], *, per_file: int = 20
) -> list[Finding]:
    """Changes to tracked files outside `sources` ([target].sources: the files a candidate is
    meant to change), each with its changed lines quoted (rule `outside-sources`): an input
    generator, a batch size, a reference in a file the bench imports changes what is
    measured, not how fast the kernel is, and no other layer can tell. Protected files are
    refused before; new files are the tree check's. Nothing when no sources are declared."""
    if not sources:
        return []
    tracked = [p for p in changed if p not in new]
    outside = set(tracked) - set(gitops.matching(tracked, list(sources)))
    found: list[Finding] = []
    seen: set[str] = set()
    for fd in parse_diff(diff):
        if fd.path not in outside:
            continue
        seen.add(fd.path)
        if fd.new_file:  # not in BEST (staged by the proposer): the tree check's
            continue
        lines = sorted(fd.added.items())
        if fd.deleted:
            what = ["the file is deleted"]
        elif fd.binary:
            what = ["a binary file changed"]
        elif not lines:
            what = ["lines removed (or its mode changed)"]
        else:
            what = []
        found += [Finding(OUTSIDE_SOURCES, fd.path, 0, w) for w in what]
        found += [Finding(OUTSIDE_SOURCES, fd.path, n, quote(text)) for n, text in lines[:per_file]]
        if len(lines) > per_file:
            found.append(Finding(OUTSIDE_SOURCES, fd.path, 0, f"... and {len(lines) - per_file} more added lines"))
    found += [
        Finding(OUTSIDE_SOURCES, p, 0, "changed (not in the part of the diff read)") for p in sorted(outside - seen)
    ]
    return found


OUTSIDE_SOURCES = "outside-sources"
"""The diff scan's rule id for a change to a tracked file outside [target].sources."""


ONE_AT_A_TIME = threading.Lock()
"""A proposer that runs inside the engine (tune) proposes for one lane at a time: each sees
the points the others took."""


class Proposing:
    def __init__(self, ctx: RunContext, proposer: Proposer, in_flight: dict[int, str] | None = None) -> None:
        self.ctx = ctx
        self.proposer = proposer
        self._sources: dict[str, list[SourceFile]] = {}
        self.in_flight: dict[int, str] = {} if in_flight is None else in_flight
        """lane -> the hypothesis it is evaluating now (shared by the lanes: they tell each other)."""

    def sources(self, lane: Lane, it: Iteration) -> list[SourceFile]:
        """The target's files as the proposal's BEST has them (read once per BEST)."""
        best = it.best_commit_before or ""
        if best not in self._sources:
            self._sources = {best: list_sources(lane.best, self.ctx.cfg)}
        return self._sources[best]

    def other_lanes(self, lane: Lane) -> list[str]:
        """What the other lanes are trying now (their hypotheses), so proposals differ."""
        return [h for index, h in self.in_flight.items() if index != lane.index and h]

    @property
    def instant(self) -> bool:
        """A proposer that runs inside the engine in a moment (tune): the serving bench stays up."""
        return bool(getattr(self.proposer, "instant", False))

    def propose(
        self,
        it: Iteration,
        lane: Lane,
        *,
        repair: int = 0,
        failing: list[dict[str, Any]] | None = None,
        handed_back: dict[str, Any] | None = None,
    ) -> Proposal:
        ctx = self.ctx
        ctx.save(it, Phase.PROPOSE)
        if not self.instant and lane.measurer is not None:
            lane.measurer.release()  # an agent or the engineer may take hours: no idle GPU memory held
        if repair:  # best/ as clean as at the iteration's start (the bench wrote there since)
            gitops.reset_clean(lane.best, it.best_commit_before or ctx.history.best_commit())
        ctx.progress(it, "propose", f"proposer ({self.proposer.kind})" + (f", repair {repair}" if repair else ""))
        lease = acquire(ctx, lane, it)
        with ctx.clock(it, "proposer_s"), ONE_AT_A_TIME if self.instant else contextlib.nullcontext():
            proposal = self._run(it, lane, lease.env, repair, failing, handed_back)
            if repair == 0:
                it.record["proposal"] = proposal.details
            else:
                it.record.setdefault("repairs", []).append(proposal.details)
            ctx.save(it)  # inside the lock: the next lane's tune proposer sees this point as tried
        return proposal

    def _run(
        self,
        it: Iteration,
        lane: Lane,
        gpu_env: dict[str, str],
        repair: int,
        failing: list[dict[str, Any]] | None,
        handed_back: dict[str, Any] | None = None,
    ) -> Proposal:
        ctx = self.ctx
        its = ctx.store.iterations()
        # what other lanes are evaluating counts as tried: the tune proposer hands each a new point
        history = [
            projections.memory_record(h)
            for h in its
            if not h.masked
            and (h.final or h.awaiting_review or (h.version != it.version and bool(h.record.get("proposal"))))
        ]
        prompt_path = ctx.ws.prompt_path(it.version, repair)
        pack_path = prompt_path.with_suffix(".json")
        pack = build_pack(
            PackInputs(
                ctx.cfg,
                ctx.store.meta(),
                its,
                it.version,
                repair=repair,
                failing_rows=failing or (),
                hypothesis=it.hypothesis,
                target_class=it.target_class,
                sources=self.sources(lane, it),
                worktree=lane.cand,
                prompt_json_path=pack_path,
                plan_path=ctx.ws.plan_path(it.version),
                other_lanes=self.other_lanes(lane),
            )
        )
        try:
            prompt_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(prompt_path, handed_back_note(handed_back) + pack.markdown)
            write_atomic(pack_path, pack.json)
        except OSError as e:  # a full disk: no proposal without its prompt (not a crash)
            ctx.event("disk", f"cannot write {prompt_path}: {e}", level="error")
            return Proposal(False, f"cannot write the prompt: {e}")
        plan = ctx.ws.plan_path(it.version)
        env = {
            **gpu_env,
            **ctx.cfg.target.env,
            "KOPT_ITERATION": str(it.version),
            "KOPT_REPAIR": str(repair),
            "KOPT_PROMPT": str(prompt_path),
            "KOPT_PLAN": str(plan),
            "KOPT_WORKSPACE": str(ctx.ws.dir),
        }

        jail = ctx.jails.proposer(lane.cand, prompt_path, pack_path, plan, ctx.ws.log_dir(it.version) / "agent")

        def run(command: str | list[str], **kw: Any) -> Any:
            kw["env"] = {**(kw.get("env") or {}), **ctx.jails.env("proposer")}  # unconfined: caches out of cand/
            return ctx.procs.run(it, command, confine=jail, **kw)

        def wait_for_command(kinds: set[str], timeout_s: float) -> Any:
            return self.wait_for_submit(it, lane, repair, kinds, timeout_s)

        pctx = ProposalContext(
            iteration=it.version,
            repair=repair,
            worktree=lane.cand,
            workspace=ctx.ws.dir,
            prompt_path=prompt_path,
            plan_path=plan,
            log_dir=ctx.ws.log_dir(it.version),
            config=ctx.cfg,
            best_commit=it.best_commit_before or "",
            classes=ctx.store.get("classes", []),
            history=history,
            env={**env, "KOPT_PROMPT_JSON": str(pack_path)},
            run=run,
            wait_for_command=wait_for_command,
            prompt_json_path=pack_path,
            handed_back=handed_back,
        )
        try:
            with ctx.control.during(Step.PROPOSE):
                return self.proposer.propose(pctx)
        except KoptFailure as e:
            return Proposal(False, f"proposer failed: {e}")

    def wait_for_submit(self, it: Iteration, lane: Lane, repair: int, kinds: set[str], timeout_s: float) -> Any:
        """The manual proposer's wait: only for a submit addressed to this lane (each lane waits
        from its own thread on the run's one pump), said in the run's meta while it lasts
        (engine/propose/proposer.py `wait_key`: clients read which lanes wait, and where)."""
        ctx, lanes = self.ctx, self.ctx.cfg.parallel.lanes
        route = route_submit(lanes, lane.index)
        where = f" --lane {lane.index}" if lanes > 1 else ""
        key = wait_key(lane.index)
        said = {
            "lane": lane.index,
            "worktree": str(lane.cand.absolute()),
            "version": it.version,
            "repair": repair,
            "pid": os.getpid(),
        }
        ctx.store.set(key, {**said, "waiting": True, "t": time.time()})
        try:
            return ctx.control.wait_for(
                kinds,
                timeout_s,
                lambda: ctx.progress(
                    None, "propose", f"waiting for `kopt submit {ctx.ws.tag}{where}` (manual proposer)"
                ),
                route=lambda cmd: route(cmd.args),
            )
        finally:
            ctx.store.set(key, {**said, "waiting": False, "t": time.time()})


def keep_unsubmitted(ctx: RunContext, lane: Lane, best: str) -> None:
    """Before cand/ is put back at BEST (recovery, the run's end): a change found there that no
    iteration holds (a manual proposer's edits not yet submitted, an agent cut off) is kept as
    `saved/cand-lane<i>-<time>.diff` and said, never lost (a new user's edits were wiped by a
    `kopt stop`). `git apply --binary` in cand/ brings it back."""
    try:
        patch = gitops.saved_patch(lane.cand, best)
        if not patch:
            return
        path = ctx.ws.dir / "saved" / f"cand-lane{lane.index}-{time.strftime('%Y%m%d-%H%M%S')}.diff"
        path.parent.mkdir(exist_ok=True)
        path.write_text(patch, encoding="utf-8", errors="surrogateescape")
    except (KoptError, OSError) as e:
        ctx.event("recover", f"{lane.cand.name}/'s changes could not be saved before its reset: {e}", level="error")
        return
    said = f"{lane.cand.name}/ held changes no iteration holds: kept in {path.relative_to(ctx.ws.dir)}"
    ctx.event("recover", f"{said} (git apply --binary it in {lane.cand.name}/ to go on)", level="warn")
    ctx.log(f"{said}; `git apply --binary {path}` in {lane.cand} brings them back")


def handed_back_note(back: dict[str, Any] | None) -> str:
    """The prompt's first lines when a change comes back to its proposer (engine/loop/__init__.py
    LaneLoop.hand_back): why, and what it was ("" otherwise)."""
    if not back:
        return ""
    return (
        f"## Handed back\n\nYour previous change ({back.get('hypothesis') or 'no hypothesis'}) was not "
        f"measured: {back.get('why')}. The worktree is at that BEST now.\n\n"
    )

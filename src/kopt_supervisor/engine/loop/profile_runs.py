"""The profiler's runs in one tree (docs/profiling.md): the bench (or [profile].command) under ncu /
rocprofv3, one run per pass of the profiler, each pass's report read back, all of them parsed
into one summary (`profile_in`). Run where the lane's GPU is: here, or on a Ray lane's worker
(ray_lanes.py `LaneWorker.profile`).

`HeldProfile`: a keep's one-pass profile started while the decision's looks still run and held
by kopt's harness before it runs anything of the tree or on the GPU, at the CPU's idle priority
(kernels/harness/hold.py); released when the decision keeps, told to stop otherwise. `WarmUp`:
its tree's kernels compiled into its copy's cache by a short unprofiled run while the decision
prepares, ended before any timed look."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import KoptFailure, gitops
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.loop.context import Lane, RunContext, acquire, last_line
from kopt_supervisor.engine.loop.control import Step
from kopt_supervisor.engine.loop.look_files import NEUTRAL, BlindCopy, check_after_run
from kopt_supervisor.engine.profile import profiler
from kopt_supervisor.engine.profile.profiler import (
    PROFILE_ENV,
    PROFILE_HELD_SUFFIX,
    PROFILE_HOLD_ENV,
    PROFILE_HOLD_GO,
    PROFILE_OUTPUTS,
    PROFILE_OUTPUTS_ENV,
    PROFILE_SEED_ENV,
    PROFILE_WARM_ENV,
    ProfileCalls,
    ProfilePass,
    Profiler,
)
from kopt_supervisor.engine.profile.summary import ProfileSummary
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner import tail_file
from kopt_supervisor.engine.runner.command import all_at_once, as_argv
from kopt_supervisor.engine.runner.server import Server, ServerError
from kopt_supervisor.engine.sandbox import Confinement

FIRST = ProfileCalls()
"""The bench's own calls per config (none named)."""


def profile_in(
    ctx: RunContext,
    it: Iteration,
    lane: Lane,
    prof: Profiler,
    tree: Path,
    side: str,
    *,
    calls: ProfileCalls = FIRST,
    seed: int | None = None,
) -> ProfileSummary:
    """The bench (or [profile].command) under the profiler, in a copy of `tree` that does not say
    which side it is (`ProfiledTree`), one run per pass of the profiler (ncu: inside the kopt
    ranges, then GPU time alone outside them), each pass's report read back, and all of them
    parsed into one summary. `calls`: the calls per config asked of the bench (KOPT_PROFILE_CALLS,
    KOPT_PROFILE_CONFIGS; the summary's `asked` where each is named); `seed`: its inputs' seed (KOPT_PROFILE_SEED), and it summarises each config's outputs
    into outputs.json (KOPT_PROFILE_OUTPUTS) for `profiler.compare_outputs`. What the runs wrote
    ends in profiles/v<N>/<side> of `ctx`'s workspace. Run where the lane's GPU is: a Ray lane's
    on its worker (`lane.remote`, loop/ray_lanes.py, which runs this function there), the folder
    brought back."""
    out_dir = ctx.ws.profiles / f"v{it.version}" / side
    if lane.remote is not None:
        ctx.progress(it, "profile", f"{prof.name} on {tree.name}/ (on the lane's worker)")
        which = "cand" if tree == lane.cand else "best"
        with ctx.control.during(Step.PROFILE), ctx.clock(it, "profiler_s"):
            return lane.remote.profile(it, prof, which, side, calls, seed, out_dir)
    ctx.progress(it, "profile", f"{prof.name} on {tree.name}/")
    kernel = ctx.cfg.profile.kernel
    bench = as_argv(ctx.cfg.profile.command or ctx.cfg.target.bench)
    lease = acquire(ctx, lane, it)
    done: list[ProfilePass] = []
    with ctx.control.during(Step.PROFILE), ctx.clock(it, "profiler_s"):
        pt = ProfiledTree.of(ctx, it, lane, tree, side, out_dir)
        try:
            while (
                step := prof.next_pass(bench, pt.copy.out, kernel, done)
            ) is not None:  # ncu: inside, then outside the ranges
                name = f"profile_{NEUTRAL}" + (f"_pass{len(done)}" if done else "")
                res = ctx.procs.run(
                    it,
                    list(step.argv),
                    cwd=pt.copy.tree,
                    name=name,
                    timeout_s=ctx.cfg.profile.timeout_s,
                    env=profile_env(ctx, lease.env, pt, calls, seed),
                    confine=pt.jail(ctx),
                    log_dir=pt.copy.logs,
                )
                failed = "" if res.ok else f"{prof.name} on {side}/ ({step.label}) {res.why()}: {last_line(res)}"
                pt.copy.move_logs(ctx.ws.log_dir(it.version), side)  # read first: `res` reads its logs
                if failed:
                    raise KoptFailure(failed)
                read_back(ctx, it, prof, step, pt, name)
                done.append(step)
            return pt.finish(prof.parse_passes(done, kernel), calls)
        except BaseException:
            pt.copy.hand_over(pt.out_dir)  # what the profiler wrote says why (ncu: its --log-file)
            raise
        finally:
            pt.after(ctx, lane, it)


@dataclass(frozen=True)
class ProfiledTree:
    """A tree being profiled: which it is (`source`, best/ or cand/, at `tree_hash`: BEST_COMMIT's
    tree or the candidate's staged one), the name of its profile's folder (`side`: best, cand,
    cand_more, ...) and that folder (`out_dir`), and where it runs: a copy of its files that
    does not say which side it is (look_files.BlindCopy: its folder, cache, output path and
    log names are a random label's; what it wrote is moved into `out_dir` after its runs).

    Why every profile runs in a copy: a tree kept once is profiled as BEST in later decisions
    (a closer profile never reuses best's), and code in it that is slower there lent every
    later timer patch a gain (tests/security/test_review_s30_hostile.py). The copy's cache is
    new and empty: what the tree's earlier runs left there (how often it ran, and as what)
    would say it too; so its kernels compile under the profiler, outside the ranges measured."""

    source: Path
    kind: str
    tree_hash: str
    side: str
    out_dir: Path
    copy: BlindCopy = field(compare=False)

    @classmethod
    def of(
        cls,
        ctx: RunContext,
        it: Iteration,
        lane: Lane,
        tree: Path,
        side: str,
        out_dir: Path,
        staged: str | None = None,
    ) -> ProfiledTree:
        """`staged`: the candidate's tree as staged before its decision (else the record's)."""
        kind, tree_hash = which_tree(it, lane, tree, staged)
        return cls(tree, kind, tree_hash, side, out_dir, BlindCopy(ctx, tree, tree_hash))

    def jail(self, ctx: RunContext, *, reading: bool = False, warming: bool = False) -> Confinement | None:
        """The copy's confinement: its tree, its new cache, its output folder the one it writes
        (`reading`: the report read back, without the GPU, the tree read-only; `warming`: a
        warm-up, the GPU and the cache, the tree read-only, the output folder not there)."""
        c = self.copy
        return ctx.jails.bench(
            c.tree,
            c.label,
            self.tree_hash,
            outputs=() if warming else (c.out,),
            write_tree=not (reading or warming),
            gpu=not reading,
            cache=c.cache,
        )

    def after(self, ctx: RunContext, lane: Lane, it: Iteration) -> None:
        """The copy removed; unconfined, the tree it came from checked too (a process that can
        write anywhere could change what the keep commits: look_files.check_after_run)."""
        self.copy.drop()
        if not ctx.jails.confined:
            check_after_run(ctx, lane, it, self.source)

    def finish(self, summary: ProfileSummary, calls: ProfileCalls) -> ProfileSummary:
        """What the runs wrote moved into `out_dir`, the summary (the files it names where they
        now are, the calls kopt asked) saved beside it."""
        self.copy.hand_over(self.out_dir)
        out = self.copy.out.resolve()
        moved = tuple(
            str(self.out_dir / Path(f).resolve().relative_to(out)) if Path(f).resolve().is_relative_to(out) else f
            for f in summary.files
        )
        summary = dataclasses.replace(summary, files=moved, asked=calls.asked)
        summary.save(self.out_dir / "summary.json")
        return summary


def which_tree(it: Iteration, lane: Lane, tree: Path, staged: str | None = None) -> tuple[str, str]:
    """("cand" or "best", its tree's hash): the candidate's as staged (`staged`, else the
    record's evaluated tree), best's at BEST_COMMIT."""
    if tree == lane.cand:
        return "cand", str(staged or it.record.get("evaluated_tree"))
    return "best", tree_of(tree, it.best_commit_before or "HEAD")


def profile_env(
    ctx: RunContext, gpu_env: dict[str, str], pt: ProfiledTree, calls: ProfileCalls, seed: int | None
) -> dict[str, str]:
    """A profile run's environment: the GPU's, the profile mode's, the calls and seed kopt asks
    for, where the outputs go (in the copy's output folder), and the copy's cache's."""
    c = pt.copy
    return {
        **gpu_env,
        **PROFILE_ENV,
        **calls.env(),
        **(
            {PROFILE_SEED_ENV: str(seed), PROFILE_OUTPUTS_ENV: str(c.out / PROFILE_OUTPUTS)} if seed is not None else {}
        ),
        **ctx.jails.env(c.label, pt.tree_hash, cache=c.cache),
    }


def read_back(ctx: RunContext, it: Iteration, prof: Profiler, step: ProfilePass, pt: ProfiledTree, name: str) -> None:
    """A pass's report read back by the profiler's own commands (no GPU, all at once), in the
    copy's jail, read-only, writing only into its output folder. `name`: the pass's log name (in
    the copy's logs/, moved out under the side's name after)."""
    reads = prof.after_commands(step.out_dir)
    if not reads:
        return
    done_read = ctx.procs.run(
        it,
        all_at_once(reads),
        cwd=pt.copy.tree,
        name=f"{name}_read",
        timeout_s=ctx.cfg.profile.timeout_s,
        confine=pt.jail(ctx, reading=True),
        log_dir=pt.copy.logs,
    )
    failed = "" if done_read.ok else f"{done_read.why()}: {last_line(done_read)}"
    pt.copy.move_logs(ctx.ws.log_dir(it.version), pt.side)  # read first: `done_read` reads its logs
    if failed:
        raise KoptFailure(f"{prof.name} reading its report of {pt.side}/ {failed}")


ACK_WAIT_S = 30.0
"""At the release, how long a profile started ahead that has not written `go.held` yet (still
starting: bwrap, ncu, Python) is waited for before it counts as one that does not hold."""


def baseline_profile(
    ctx: RunContext,
    it: Iteration,
    lane: Lane,
    prof: Profiler,
    seed: int,
    gpu: Callable[[Lane], str | None],
    when: str,
    take: Callable[[Profiler], ProfileSummary],
) -> dict[str, Any]:
    """The baseline's record["profile"], its tree profiled at `seed` before the first proposal by
    `take` (the profile started ahead with the baseline's runs where there is one, else one taken
    now): with every metric ([profile].baseline "start"), or as a keep's first profile takes a
    tree ("early": the keep's pass, the bench's own calls, named once its outputs said them), with
    the `taken` a first keep reuses (profiler.reusable) to profile its candidate alone. The
    baseline's tree is the trusted one: no candidate has run yet. `gpu`: the lane's GPU's name,
    as the lease chose it."""
    if when != "early":
        return {"best": take(prof).to_dict(), "seed": seed}
    cfg = ctx.cfg.profile
    summary = take(prof.for_keep(cfg.keep))
    columns = [str(c) for c in it.record.get("config_columns") or []]
    own = profiler.own_calls(ctx.ws.profiles / f"v{it.version}" / "best", columns, list(it.record.get("configs") or {}))
    if own:  # it ran unasked: the bench's own calls, named as a keep's profile names them
        summary = dataclasses.replace(summary, asked=tuple(sorted(own.items())))
    trees = {"best": tree_of(lane.best, it.commit or "HEAD")}
    taken = {"keep": cfg.keep, "profiler": prof.name, "gpu": gpu(lane), "trees": trees, "t": time.time()}
    ctx.event("profile", f"v{it.version}: the baseline's tree profiled as a keep profiles it", it=it)
    return {
        "best": summary.to_dict(),
        "seed": seed,
        "taken": {**taken, "calls": None, "seed": seed, "format": profiler.PROFILE_FORMAT, "baseline": True},
    }


class NotHeld(KoptFailure):
    """A profile started ahead that did not hold: its command is not kopt's harness (or ignores
    KOPT_PROFILE_HOLD), so it may have run while the decision's looks were measured."""


class HeldProfile:
    """A keep's profile started ahead (one pass: [profile].keep = "time"), held by kopt's
    harness until `release` (kernels/harness/hold.py): the profiler's start, torch's import and
    the host's input draws overlap the decision, which they cannot disturb: nothing of the tree
    runs and nothing touches the GPU before `go`, and the harness holds at the CPU's idle
    priority (SCHED_IDLE: only CPU time no other process wants). Never stopped with SIGSTOP: ncu
    took its stopped and continued child for one that ended (exit codes 19 and 18, H200,
    2026-12-01). On the H200 the start, the import and the draws were 6-7 s of a keep's 15 s
    profile (docs/h100-wave3/part17-profile-ahead-and-the-bytes-floor-h200.md)."""

    def __init__(
        self,
        ctx: RunContext,
        it: Iteration,
        lane: Lane,
        prof: Profiler,
        tree: Path,
        side: str,
        seed: int,
        calls: ProfileCalls,
    ) -> None:
        self.ctx, self.it, self.lane, self.prof, self.seed, self.calls = ctx, it, lane, prof, seed, calls
        out_dir = ctx.ws.profiles / f"v{it.version}" / side
        # the candidate as the decision will stage it (the record's may be a repaired or rebased tree's)
        staged = (
            gitops.stage_all_tree(lane.cand, force=it.record.get("forced_paths", [])) if tree == lane.cand else None
        )
        bench = as_argv(ctx.cfg.profile.command or ctx.cfg.target.bench)
        self.pt = ProfiledTree.of(ctx, it, lane, tree, side, out_dir, staged)  # in a copy that says neither side
        try:
            step = prof.next_pass(bench, self.pt.copy.out, ctx.cfg.profile.kernel, [])
            if step is None or prof.next_pass(bench, self.pt.copy.out, ctx.cfg.profile.kernel, [step]) is not None:
                raise KoptFailure(f"{prof.name}: a profile started ahead takes one pass")
            self.step = step
            self.go = self.pt.copy.out / PROFILE_HOLD_GO
            self.gpu_env = dict(acquire(ctx, lane, it).env)
            env = {**profile_env(ctx, self.gpu_env, self.pt, calls, seed), PROFILE_HOLD_ENV: str(self.go)}
            self.name = f"profile_{NEUTRAL}_ahead"  # its own logs: a profile taken anew writes profile_<side>.*
            self.server = ctx.procs.server(
                it,
                list(step.argv),
                cwd=self.pt.copy.tree,
                name=self.name,
                env=env,
                confine=self.pt.jail(ctx),
                log_dir=self.pt.copy.logs,
            )
            self.warm = WarmUp(ctx, it, lane, self.pt, self.gpu_env) if ctx.cfg.target.serve_prepare else None
        except BaseException:
            if hasattr(self, "server"):
                self.server.close(grace_s=0.0)
            self.pt.copy.drop()
            raise

    @property
    def acknowledged(self) -> bool:
        """The run wrote `<go>.held`: it holds."""
        return self.go.with_name(self.go.name + PROFILE_HELD_SUFFIX).exists()

    def wait_held(self, poll: Callable[[], None]) -> str:
        """Wait until the run holds: '' once it does, else why not (it ended first, or wrote no
        `<go>.held` within ACK_WAIT_S). `poll` runs between checks (the control's pump)."""
        deadline = time.monotonic() + ACK_WAIT_S
        while not self.acknowledged and self.server.alive and time.monotonic() < deadline:
            poll()
            time.sleep(0.02)
        if self.acknowledged:
            return ""
        return "it ended without holding" if not self.server.alive else f"no {self.go.name}{PROFILE_HELD_SUFFIX}"

    def not_held(self, why: str) -> str:
        """The one line that says a command did not hold, and the fix."""
        return (
            f"{self.prof.name} on {self.pt.side}/: the profile started ahead did not hold ({why}): "
            '[profile].command is not kopt\'s harness; set [profile].ahead = "off"'
        )

    def matches(self, it: Iteration, tree: Path, side: str, seed: int, calls: ProfileCalls) -> bool:
        """This is the profile `profile_in(ctx, it, lane, prof, tree, side, calls=calls, seed=seed)` would take."""
        pt = self.pt
        return (
            it.version == self.it.version
            and (tree, side) == (pt.source, pt.side)
            and which_tree(it, self.lane, tree) == (pt.kind, pt.tree_hash)  # at the same commit or staged tree
            and seed == self.seed
            and calls == self.calls
        )

    def release(self) -> ProfileSummary | None:
        """Go: the GPU gate asked first (as any profile's); None when it chose another GPU than
        the one this run was started for, or when the run held and then ended (the caller
        profiles anew). Raises NotHeld when the run never held, KoptFailure when it failed."""
        ctx, it, lane, pt = self.ctx, self.it, self.lane, self.pt
        ctx.progress(it, "profile", f"{self.prof.name} on {pt.source.name}/ (started ahead)")
        if dict(acquire(ctx, lane, it).env) != self.gpu_env:
            self.cancel()
            return None
        try:
            with ctx.control.during(Step.PROFILE), ctx.clock(it, "profiler_s"):
                if self.warm is not None:  # ended before the looks already, unless none was taken
                    self.warm.settle(ctx.control.pump)
                why = self.wait_held(ctx.control.pump)  # a run still starting has not written it yet
                if why:  # read before `go`: nothing of the tree ran yet
                    self.cancel()
                    raise NotHeld(self.not_held(why))
                if not self.server.alive:  # it held, then ended (its own limit, memory, a failed import)
                    ctx.event(
                        "profile",
                        f"v{it.version}: {pt.side}'s profile started ahead ended before go; taken anew",
                        it=it,
                    )
                    self.cancel()
                    return None
                say(self.go, "go")
                try:
                    code = self.server.finish(
                        timeout_s=ctx.cfg.profile.timeout_s, poll=ctx.control.pump, poll_interval_s=ctx.poll_interval_s
                    )
                except ServerError as e:
                    raise KoptFailure(f"{self.prof.name} on {pt.side}/ (started ahead) {e}") from None
                if code != 0:
                    lines = [ln for ln in tail_file(self.server.err_path, 5).splitlines() if ln.strip()]
                    raise KoptFailure(
                        f"{self.prof.name} on {pt.side}/ ({self.step.label}) exit code {code}: "
                        f"{lines[-1][:300] if lines else '(no output)'}"
                    )
                read_back(ctx, it, self.prof, self.step, pt, self.name)
            return pt.finish(self.prof.parse_passes([self.step], ctx.cfg.profile.kernel), self.calls)
        except KoptFailure:
            pt.copy.hand_over(pt.out_dir)  # what the profiler wrote says why (ncu: its --log-file)
            raise
        finally:
            pt.copy.move_logs(ctx.ws.log_dir(it.version), pt.side)
            pt.after(ctx, lane, it)

    def cancel(self) -> None:
        """Stop: the run is told so and ended at once (before `go` it holds nothing worth a wait);
        its copy removed."""
        if self.warm is not None:
            self.warm.cancel()
        if self.server.alive:
            try:
                say(self.go, "stop")
            except OSError:
                pass
        self.server.close(grace_s=0.0)
        self.pt.copy.move_logs(self.ctx.ws.log_dir(self.it.version), self.pt.side)
        self.pt.copy.drop()


WARM_WAIT_S = 10.0
"""How long the first timed look waits for a warm-up still running before it is killed (its
compiles so far stay in the cache; the profile compiles the rest)."""


class WarmUp:
    """A held profile's tree's kernels compiled before its `go`, into its copy's cache: the
    profile command (or the bench) run once without the profiler (KOPT_PROFILE_WARM=1, one call
    per config, KOPT_PROFILE_CALLS=1; no outputs) in the same copy, started with the held
    profile and ended before the decision's first timed look (`Lane.settle`, called by
    served_trees between the look's prepare and its timed requests: nothing is timed while the
    candidate's new process imports and prepares). Only on a served target that prepares
    (`[target].serve_prepare`), where that window exists.

    It runs the tree's code while the held run waits, so it writes nothing but the cache: the
    copy's tree read-only, its output folder (where `go` is written) not there at all; were it
    writable, the tree could release its own profile into the timed looks
    (tests/engine/test_profile_warm.py). On the H200 a keep's held profile went from 11.3-11.8 s
    to 7.8-8.3 s, and the first look waited 0.1-0.7 s for it (docs/h100-wave3/part30-profile-warm-up-h200.md)."""

    def __init__(self, ctx: RunContext, it: Iteration, lane: Lane, pt: ProfiledTree, gpu_env: dict[str, str]) -> None:
        self.ctx, self.it, self.lane = ctx, it, lane
        self.t0 = time.monotonic()
        self.server: Server = ctx.procs.server(
            it,
            as_argv(ctx.cfg.profile.command or ctx.cfg.target.bench),
            cwd=pt.copy.tree,
            name=f"profile_{NEUTRAL}_warm",
            env={**profile_env(ctx, gpu_env, pt, ProfileCalls(1), None), PROFILE_WARM_ENV: "1"},
            confine=pt.jail(ctx, warming=True),
            log_dir=pt.copy.logs,
        )
        lane.untimed.append(self)

    def settle(self, poll: Callable[[], None]) -> None:
        """Ended: waited for up to WARM_WAIT_S, then killed with its process group; an event
        says which, and how long the look waited."""
        if self.server.closed:
            return
        t0 = time.monotonic()
        try:
            code: int | str = self.server.finish(
                timeout_s=WARM_WAIT_S, poll=poll, poll_interval_s=self.ctx.poll_interval_s
            )
        except ServerError as e:
            code = str(e)
        finally:
            self.forget()
        waited, ran = time.monotonic() - t0, time.monotonic() - self.t0
        self.ctx.event(
            "profile",
            f"v{self.it.version}: a profile's warm-up ended ({'exit code ' if isinstance(code, int) else ''}{code}) "
            f"after {ran:.1f} s; the look waited {waited:.1f} s for it",
            it=self.it,
        )

    def cancel(self) -> None:
        """Ended at once (its held profile is not taken)."""
        self.server.close(grace_s=0.0)
        self.forget()

    def forget(self) -> None:
        if self in self.lane.untimed:
            self.lane.untimed.remove(self)


def prove_held(ctx: RunContext, it: Iteration, started: Iterable[HeldProfile]) -> str:
    """Wait, before the decision's first look, until each of `started` holds: '' when all do,
    else the line that says which did not and the fix (an event says either). A command that
    ignores KOPT_PROFILE_HOLD runs the tree, and the profiler, at once: beside every look of
    the decision, where the release's own check comes only after them. The command is the
    run's, so the run's first proof serves the run (a few seconds once: bwrap, the profiler's
    start, Python; 0.7 s on the H200 with Liger's bench)."""
    t0 = time.monotonic()
    for held in started:
        why = held.wait_held(ctx.control.drain)
        if why:
            line = held.not_held(why)
            ctx.event("profile", f"v{it.version}: {line}; profiles are no longer started ahead", it=it, level="warn")
            return line
    ctx.event("profile", f"v{it.version}: the profiles started ahead hold ({time.monotonic() - t0:.1f} s)", it=it)
    return ""


def say(go: Path, word: str) -> None:
    """Write `word` into the go file at once (a rename: the harness never reads half of it)."""
    part = go.with_name(f".{go.name}.part")
    part.write_text(f"{word}\n", encoding="utf-8")
    os.replace(part, go)

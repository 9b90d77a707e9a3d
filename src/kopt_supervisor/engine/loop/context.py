"""What every step of the loop shares, and the lane it works for.

`RunContext`: the workspace, its frozen config, the store, the command pump and what is bound
to them: `history` (reading it as the seals vouch for it) and `projections` (memory/,
performance.md, README.md), both in engine/history.py, `procs` (the interruptible runner and
servers: control.py), `jails` (what each child may touch: engine/sandbox/paths.py), and here
events, progress, closing an iteration and its phase timings (where its seconds go: spent.py); BEST (the lock held while BEST_COMMIT moves), and a lane's GPU (`acquire` ->
`GpuLease`; `single_lane`, lane 0). Nothing here decides anything; the state machine
(the package's `__init__`) and its collaborators do.

A `Lane`: what one candidate is measured with — its candidate worktree, the best tree it is
compared against, its GPU gate (and so its GPU), the host it runs on, and its measurer. Every
step of an iteration takes the lane it works for instead of assuming one `cand/`, so that
several candidates can be measured at once (docs/design.md §13). A run has one lane today,
lane 0: `cand/` against `best/` (the worktree of the run's branch) on the gate's GPU. A
`Measurer` takes a lane's looks (measure.py has them: served trees, a shared A/B process, a
bench process per side); a `Look` is one round of best against candidate."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kopt_supervisor.engine import gitops, history
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide.estimate import Pair, Verdict
from kopt_supervisor.engine.decide.external_truth import SideCost
from kopt_supervisor.engine.decide.plausible import BenchRun
from kopt_supervisor.engine.gpu.gate import Gate, GateDecision
from kopt_supervisor.engine.history import Projections, RunHistory
from kopt_supervisor.engine.loop.control import Control, Processes
from kopt_supervisor.engine.metrics import Measurement
from kopt_supervisor.engine.propose.agents import PRESETS, writable_paths
from kopt_supervisor.engine.records import KEPT, Iteration, Phase, Status
from kopt_supervisor.engine.runner.command import RunResult
from kopt_supervisor.engine.sandbox.paths import Jails
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import (
    Workspace,
    chain_head,
    config_seal,
    frozen_config,
    list_workspaces,
    read_secret,
    read_text_nofollow,
    seal_new_keep,
    write_atomic,
)

if TYPE_CHECKING:
    from kopt_supervisor.engine.profile.profiler import ProfileCalls, Profiler
    from kopt_supervisor.engine.profile.summary import ProfileSummary


@dataclass(frozen=True)
class Look:
    pairs: list[Pair]
    best: Measurement
    cand: Measurement
    seconds: float
    """Timed bench seconds (the decision's GPU-second budget counts these)."""
    runs: tuple[BenchRun, ...] = ()
    """Process-level: each side's bench process and its wall time (the plausibility check
    of a reported metric against the time the process took)."""
    gpu: tuple[dict[str, Any] | None, dict[str, Any] | None] | None = None
    """The GPU's state before and after, when the look ran where the lane's own gate cannot
    see (a Ray worker's gate picked the GPU there)."""
    costs: tuple[SideCost, ...] = ()
    """Served per tree (`ServedTrees`): what each side's process spent on the look as the OS
    accounts for it (CPU and wall seconds) beside what its bench claims."""


class Measurer(Protocol):
    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        """Round r of a decision: best and candidate measured together."""
        ...

    def new_decision(self) -> None:
        """A decision starts: the next look measures freshly loaded trees."""
        ...

    def release(self) -> None:
        """Free the GPU for a long wait (a proposer, a reviewer): what holds its memory ends;
        what holds none may stay."""
        ...

    def close(self) -> None:
        """Release what is kept between looks (a serving process)."""
        ...


class ReleaseCloses:
    """A measurer whose `release` (before a long wait) is its `close`: all it keeps between
    looks holds the GPU."""

    def release(self) -> None:
        self.close()

    def close(self) -> None:
        pass


GpuPair = tuple[dict[str, Any] | None, dict[str, Any] | None]
"""A GPU's state before the first timed step and after the last (Gate.evidence)."""


class RemoteTrees(Protocol):
    """A lane whose trees and GPU are on another host (a Ray worker: loop/ray_lanes.py): every
    run that needs its GPU goes there, the baseline's and the profiler's too, so that a head
    without a GPU never measures or profiles anything."""

    @property
    def vendor(self) -> str: ...  # of the GPU the worker's gate chose ("none": none yet)

    @property
    def gpu(self) -> GpuPair: ...  # the worker's GPU before and after its last run

    def baseline_run(self, it: Iteration, name: str, r: int) -> tuple[Measurement, float]: ...

    def profiler(self, it: Iteration, kind: str, outside_ranges: str) -> Profiler | None: ...

    def profile(
        self,
        it: Iteration,
        prof: Profiler,
        which: str,
        side: str,
        calls: ProfileCalls,
        seed: int | None,
        out_dir: Path,
    ) -> ProfileSummary:
        """`which` tree ("best", "cand") profiled on the worker into its folder `side`, the
        folder's files brought back into `out_dir`."""
        ...


class Untimed(Protocol):
    """A run that must end before a timed look (`Lane.settle`)."""

    def settle(self, poll: Callable[[], None]) -> None: ...


@dataclass
class Lane:
    index: int
    best: Path
    """The best tree this lane's candidate is compared against (lane 0: best/, the branch's worktree)."""
    cand: Path
    """The candidate worktree the proposer edits (lane 0: cand/)."""
    gate: Gate
    """This lane's GPU gate: the GPU it holds is the lane's GPU (best and candidate of a pair
    always run on it)."""
    host: str = "local"
    measurer: Measurer | None = field(default=None, repr=False)
    fresh: Measurer | None = field(default=None, repr=False)
    """What decides a keep again in fresh, separate processes of the process-level bench
    (None: measure.ProcessAbba on this host; a Ray lane's runs on its worker)."""
    remote: RemoteTrees | None = field(default=None, repr=False)
    """Where the lane's trees and GPU are when not on this host (a Ray lane's worker)."""
    untimed: list[Untimed] = field(default_factory=list, repr=False)
    """Runs started beside a decision that must end before its first timed look (a held
    profile's warm-up: profile_runs.WarmUp)."""

    @property
    def name(self) -> str:
        return f"lane {self.index}"

    @property
    def vendor(self) -> str:
        """The vendor of the GPU the lane's gate chose (a remote lane's: its worker's); "none"
        for a target without one."""
        if self.remote is not None:
            return self.remote.vendor
        chosen = self.gate.chosen
        return str(getattr(chosen, "vendor", "none")) if chosen is not None else "none"

    def settle(self, poll: Callable[[], None]) -> None:
        """Each of `untimed` ended (waited for briefly, else killed): called before a timed look."""
        for run in list(self.untimed):
            run.settle(poll)

    def close(self) -> None:
        for m in (self.measurer, self.fresh):
            if m is not None:
                m.close()
        self.gate.close()


def note_gpu(
    it: Iteration,
    lane: Lane,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    *,
    flags: list[str] | None = None,
    round_index: int | None = None,
) -> None:
    """The GPU evidence of an iteration's record: which GPU (on which host), its state before
    the first timed step and after the last, and the rounds something disturbed."""
    g = it.record.setdefault("gpu", {})
    g.setdefault("before", before)
    g["after"] = after
    g.setdefault("host", lane.host)
    if before:
        g.setdefault("index", before.get("index"))
        g.setdefault("name", before.get("name"))
        g.setdefault("uuid", before.get("uuid"))
    else:
        g.setdefault("name", "no GPU (CPU-only target)")
    if flags:
        g.setdefault("flagged_rounds", []).append({"round": round_index, "flags": flags})


def carried(it: Iteration) -> bool:
    """Whether the iteration is a keep decided against an older BEST and carried to the one it
    is on now (loop/keep.py `Keeper.carry`), not decided again there since."""
    moves = it.record.get("carried") or []
    return bool(moves) and not moves[-1].get("decided_again")


def gpu_of(lane: Lane, lease: GpuLease) -> GpuPair:
    """The lane's GPU before and after the run just made under `lease`: a remote lane's as
    its worker's gate saw it, else the lease's reading and the gate's now."""
    if lane.remote is not None:
        return lane.remote.gpu
    return lease.before, lane.gate.evidence()


BEST = threading.RLock()
"""Held while BEST_COMMIT moves (a keep's commit and advance) and while the run's branch is
checked: keeps of several lanes commit one at a time."""


ENDING = threading.RLock()
"""Iterations of several lanes end one at a time (their place in the end order, their seal)."""

TIMED_KEYS = ("gate_wait_s", "proposer_s", "police_s", "reload_s", "profiler_s", "reverify_s", "format_s", "commit_s")
"""The phases an iteration's record["timings"] holds (and `looks_s`: one entry per look)."""


class RunContext:
    def __init__(
        self,
        ws: Workspace,
        cfg: Config,
        store: Store,
        control: Control,
        jails: Jails,
        key: bytes,
        *,
        log: Callable[[str], None],
        poll_interval_s: float = 0.2,
    ) -> None:
        self.ws = ws
        self.jails = jails
        self.key = key
        """The run's secret (engine/workspace.py): seals keeps, checks command rows."""
        self.lane_index: int | None = None
        """Set in a lane's own context (several lanes): its live state goes to meta `lane:<i>`."""
        self.cfg = cfg
        self.store = store
        self.control = control
        self.log = log
        self.poll_interval_s = poll_interval_s
        self.history = RunHistory(store, key)
        """Reading the history as the seals vouch for it (BEST_COMMIT, the counters...)."""
        self.procs = Processes(ws, cfg, store, control, poll_interval_s=poll_interval_s)
        """Starting commands and servers, and the run's live child groups."""
        self.projections = Projections(ws, cfg, store, self.event)
        """memory/, performance.md and README.md kept equal to run.db."""

    def for_lane(self, index: int) -> RunContext:
        """A context for lane `index`'s thread: its own connection to run.db and its own
        child processes; the run's config, pump, jails and secret shared."""
        ctx = RunContext(
            self.ws,
            self.cfg,
            Store(self.ws.db_path),
            self.control,
            self.jails,
            self.key,
            log=self.log,
            poll_interval_s=self.poll_interval_s,
        )
        ctx.lane_index = index
        ctx.projections = Projections(self.ws, self.cfg, ctx.store, ctx.event, self.projections._projected)
        return ctx

    # -- writing ----------------------------------------------------------------------------

    def save(self, it: Iteration, phase: Phase | None = None) -> None:
        if phase is not None:
            it.phase = phase
        self.store.save_iteration(it)

    def event(self, kind: str, message: str, *, it: Iteration | None = None, level: str = "info") -> None:
        self.store.event(kind, message, version=it.version if it else None, level=level)

    def set_state(self, state: str) -> None:
        if self.store.get("state") != state:
            self.store.set("state", state)

    def progress(
        self, it: Iteration | None, phase: str, step: str, done: int | None = None, total: int | None = None
    ) -> None:
        """The live step shown on the dashboard (a countdown writes at most once a second)."""
        key = "progress" if self.lane_index is None else f"lane:{self.lane_index}"
        prev = self.store.get(key) or {}  # a lane's own step (several lanes write at once)
        version = it.version if it else prev.get("version")
        same = prev.get("version") == version and prev.get("phase") == phase
        if same and prev.get("step") != step and abs(time.time() - float(prev.get("t") or 0)) < 1.0 and done is None:
            return
        if same and prev.get("step") == step and prev.get("done") == done:
            return
        started = prev.get("phase_started_at") if same else time.time()
        eta = (time.time() - started) / done * max(0, total - done) if done and total and started else None
        now = {
            "version": version,
            "phase": phase,
            "step": step,
            "done": done,
            "total": total,
            "phase_started_at": started,
            "eta_s": eta,
            "t": time.time(),
        }
        self.store.set("progress", now)
        if self.lane_index is not None:
            self.store.set(key, {**prev, **now})

    def close(
        self, it: Iteration, status: Status, reason: str, *, verdict: Verdict | None = None, by: str = "engine"
    ) -> None:
        """End an iteration: its final status and decision, the event, its projections."""
        it.status, it.phase, it.finished_at = status, Phase.DONE, time.time()
        decision = dict(it.record.get("decision") or {})
        if verdict is not None:
            decision.update(verdict.to_dict())
        decision.update({"verdict": status, "reason": reason, "by": by})
        it.record["decision"] = decision
        self.finish_timings(it)
        self.end_row(it)
        level = "info" if status in (Status.BASELINE, Status.KEEP, Status.ACCEPTED, Status.TIE) else "warn"
        self.event("verdict", f"v{it.version}: {status}: {reason}", it=it, level=level)
        self.log(f"v{it.version}: {status}: {reason}")
        self.projections.write_memory(it)
        self.projections.write_projections()
        self.projections.refresh_memory_files()

    def end_row(self, it: Iteration) -> None:
        """Save an ended iteration: its place in the end order, and for a keep its seal and
        the chain's new head, in one transaction (a crash leaves both or neither)."""
        with ENDING, self.store.transaction():
            self.seal_if_kept(it)
            self.store.save_iteration(it)
            if it.status in KEPT and it.commit:
                self.store.set("chain_head", chain_head(self.key, history.kept_rows(self.store)))

    def seal_if_kept(self, it: Iteration) -> None:
        """An ended iteration takes its place in the order iterations ended; a kept one joins
        the chain of keeps (engine/workspace.py) after the keep that ended before it."""
        with ENDING:
            rows = self.history.rows()
            if it.record.get("ended_seq") is None:
                it.record["ended_seq"] = 1 + max((r.order for r in rows if r.version != it.version), default=-1)
            if it.status in KEPT and it.commit:
                kept = self.store.iterations(versions=[r.version for r in rows if r.kept and r.version != it.version])
                seal_new_keep(self.key, kept, it)

    def verify(self, lanes: list[Lane]) -> None:
        """Before a comparison and at every start: the chain of keeps is the engine's, and the
        run's branch sits at BEST_COMMIT (moved, it is put back; a forged keep stops the run)."""
        history.check_chain(self.key, self.store)
        frozen = str(self.store.get("frozen_config") or "")
        try:
            on_disk = read_text_nofollow(self.ws.config_path)
        except OSError:
            on_disk = None
        if frozen and on_disk != frozen:
            write_atomic(self.ws.config_path, frozen)
            self.event("tamper", "kopt.toml was edited behind kopt's back; restored from run.db", level="error")
        with BEST:  # no keep moves it meanwhile
            best = self.history.best_commit()
            if gitops.branch_sha(self.store.get("repo"), self.ws.branch) != best:
                gitops.reset_clean(self.ws.best, best)
                self.event(
                    "tamper",
                    f"the run's branch {self.ws.branch} had moved off BEST_COMMIT {best[:12]}; put back",
                    level="error",
                )

    # -- phase timings ------------------------------------------------------------------------

    @contextlib.contextmanager
    def clock(self, it: Iteration | None, key: str) -> Iterator[None]:
        """Add the time spent inside to it.record["timings"][key] (`looks_s`: appended)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            if it is not None:
                timings = it.record.setdefault("timings", {})
                spent = round(time.monotonic() - t0, 4)
                if key == "looks_s":
                    timings.setdefault("looks_s", []).append(spent)
                else:
                    timings[key] = round(float(timings.get(key, 0.0)) + spent, 4)

    def finish_timings(self, it: Iteration) -> None:
        """total_s and engine_s (what kopt itself spent: all but the proposer, the looks, the
        profiler, waiting for an idle GPU and waiting for the engineer's review)."""
        timings = it.record.setdefault("timings", {})
        total = max(0.0, (it.finished_at or time.time()) - it.started_at)
        outside = sum(float(timings.get(k, 0.0)) for k in ("proposer_s", "profiler_s", "gate_wait_s"))
        outside += float((timings.get("spent") or {}).get("review", 0.0))  # the engineer's, not kopt's
        outside += sum(float(x) for x in timings.get("looks_s", []))
        timings["total_s"] = round(total, 4)
        timings["engine_s"] = round(max(0.0, total - outside), 4)


def last_line(res: RunResult) -> str:
    """The last non-empty line a failed command wrote (stderr first), for one-line reasons."""
    tail = res.tail(5) or res.tail(5, "stdout")
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def with_(obj: Any, **changes: Any) -> Any:
    """A frozen dataclass with some fields changed."""
    import dataclasses

    return dataclasses.replace(obj, **changes)


def open_run(
    ws: Workspace,
    *,
    proposer_kind: str | None,
    no_sandbox: bool,
    log: Callable[[str], None],
    poll_interval_s: float,
    demo: bool = False,
) -> RunContext:
    """An engine starting on a workspace: its config from run.db's sealed copy (a kopt.toml
    edited on disk is put back, never adopted), the sandbox rule (a refusal comes here,
    before any state changes; `demo`, `kopt demo`'s own start, counts only on a workspace
    whose run.db records it as a demo), the command pump, the run's secret."""
    from kopt_supervisor.engine import sandbox
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    store = ws.open_store()
    key = read_secret(ws.dir)
    text, edited = frozen_config(ws.dir, store.meta(), key)
    cfg = loads_config(text, source=str(ws.config_path))
    support = sandbox.probe()
    mode = sandbox.start_rule(
        support,
        proposer_kind=proposer_kind or cfg.propose.kind,
        no_sandbox=no_sandbox,
        demo=demo and isinstance(store.get("demo"), dict),
    )
    ctx: RunContext
    control = Control(
        ws,
        store,
        key,
        poll_interval_s=poll_interval_s,
        on_state=lambda state: ctx.set_state(state),
        on_history_changed=lambda: ctx.projections.write_projections(),
    )
    preset = PRESETS.get(cfg.propose.agent) if cfg.propose.agent else None
    jails = Jails(
        ws.dir,
        cfg,
        confined=mode.confined,
        bwrap=support.bwrap if support else None,
        proposer_writable=writable_paths(preset, extra=cfg.propose.writable) if preset else cfg.propose.writable,
        other_runs=lambda: [w.dir for w in list_workspaces(ws.root) if w.tag != ws.tag],
    )
    ctx = RunContext(ws, cfg, store, control, jails, key, log=log, poll_interval_s=poll_interval_s)
    before = store.get("sandbox") or {}
    store.set(
        "sandbox",
        {
            "confined": mode.confined,
            "summary": mode.summary,
            "support": support.to_dict(),
            "ever_unconfined": bool(before.get("ever_unconfined")) or not mode.confined,
        },
    )
    if edited is not None:
        write_atomic(ws.config_path, text)
        ctx.event(
            "tamper", f"kopt.toml was edited behind kopt's back; restored from run.db:\n{edited[:4000]}", level="error"
        )
    store.set_many({"frozen_config": text, "frozen_config_seal": config_seal(key, text)})
    return ctx


# ---------------------------------------------------------------------------------------
# A lane's GPU, and lane 0


@dataclass(frozen=True)
class GpuLease:
    """The GPU a step runs on: the environment binding children to it and its state just
    before (the evidence a look's flags compare against)."""

    env: dict[str, str]
    before: dict[str, Any] | None
    waited_s: float
    acquire_s: float = 0.0
    """Seconds the gate took (its samples, its waits)."""


def acquire(ctx: RunContext, lane: Lane, it: Iteration | None = None) -> GpuLease:
    """Ask the lane's gate for an idle GPU (waiting, through the pump, if none is), and
    show what it saw on the dashboard."""
    t0 = time.monotonic()
    decision: GateDecision = lane.gate.acquire()
    spent = time.monotonic() - t0
    if it is not None:
        timings = it.record.setdefault("timings", {})
        timings["gate_wait_s"] = round(float(timings.get("gate_wait_s", 0.0)) + spent, 4)
    ctx.set_state("paused" if ctx.control.paused else "running")
    gpu = decision.gpu
    ctx.store.set(
        "gpu",
        {
            "chosen": gpu.to_dict() if gpu else None,
            "waited_s": decision.waited_s,
            "assessments": [a.to_dict() for a in decision.assessments],
            "t": time.time(),
            "lane": lane.index,
            "host": lane.host,
        },
    )
    lease = GpuLease(dict(decision.env), lane.gate.evidence(), decision.waited_s, spent)
    if lease.before is not None or lane.host != "local":
        ctx.store.set(
            f"lane:{lane.index}",
            {**(ctx.store.get(f"lane:{lane.index}") or {}), "host": lane.host, "gpu": lease.before},
        )
    return lease


def single_lane(ctx: RunContext) -> Lane:
    """Lane 0: cand/ against best/, on the GPU its own gate picks (or none: a CPU target)."""
    from kopt_supervisor.engine.gpu.backends import open_backend

    def sleep(seconds: float) -> None:
        ctx.set_state("waiting_gpu")
        ctx.control.sleep(
            seconds, lambda left: ctx.progress(None, "waiting_gpu", f"no idle GPU: next check in {left:.0f} s")
        )

    gate = Gate(
        ctx.cfg.gpu,
        open_backend(ctx.cfg.gpu.vendor),
        sleep=sleep,
        pause=lambda seconds: ctx.control.sleep(seconds, lambda _left: None),  # a check's own: no GPU is busy
        own_pids=ctx.procs.own_pids,
        log=lambda m: ctx.event("gpu", m, level="warn"),
        owner=f"kopt run {ctx.ws.tag} ({ctx.ws.dir})",
    )
    return Lane(0, ctx.ws.best, ctx.ws.cand, gate)

"""What every step of the loop shares: the workspace, its frozen config, the store, the
command pump and the plumbing bound to them (events, progress, the interruptible runner,
closing an iteration, phase timings, projections), BEST (the lock held while BEST_COMMIT
moves), and a lane's GPU (`acquire` -> `GpuLease`; `single_lane`, lane 0).

Nothing here decides anything; the state machine (machine.py) and its collaborators do.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import bookkeeping, faults, gitops, history, integrity, runner
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import Verdict
from kopt_supervisor.engine.gpu.gate import Gate, GateDecision
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.loop.control import Control
from kopt_supervisor.engine.loop.jails import Jails
from kopt_supervisor.engine.loop.lane import Lane
from kopt_supervisor.engine.projections import memory_record
from kopt_supervisor.engine.propose.costs import Spent, spent
from kopt_supervisor.engine.records import KEPT, Iteration, IterationRow, Phase, Status
from kopt_supervisor.engine.sandbox import Confinement
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_atomic, write_memory

BEST = threading.RLock()
"""Held while BEST_COMMIT moves (a keep's commit and advance) and while the run's branch is
checked: keeps of several lanes commit one at a time."""


MARKER = "KOPT_WORKSPACE"
"""Every child kopt starts carries this variable (the workspace's path): after a crash, the
orphans of a recorded process group are recognised by it (a recycled pid never is)."""

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
        """The run's secret (engine/integrity.py): seals keeps, checks command rows."""
        self.lane_index: int | None = None
        """Set in a lane's own context (several lanes): its live state goes to meta `lane:<i>`."""
        self.cfg = cfg
        self.store = store
        self.control = control
        self.log = log
        self.poll_interval_s = poll_interval_s
        self.child_pgids: set[int] = set()
        self._ended_records: dict[int, Any] = {}
        self._projected: dict[Path, bytes | None] = {}
        """performance.md and README.md as this engine (any lane) last wrote them."""

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
        ctx._projected = self._projected  # what any lane last wrote there
        return ctx

    # -- reading the history --------------------------------------------------------------

    def rows(self) -> list[IterationRow]:
        return self.store.rows()

    def chain(self) -> integrity.ChainCheck:
        """What the run's seals vouch for (which keeps may be BEST)."""
        return history.chain(self.key, self.store)

    def best_commit(self) -> str:
        """BEST_COMMIT: the last keep whose seal verifies (a forged keep never is; integrity.
        Tampered when the seals vouch for no commit at all)."""
        best = self.trusted_best()
        if best is None:
            raise integrity.Tampered(self.chain().problem or "no BEST_COMMIT the run's seals vouch for")
        return best

    def trusted_best(self) -> str | None:
        """BEST_COMMIT as the seals vouch for it, None when they vouch for none."""
        chain = self.chain()
        return bookkeeping.best_commit(self.rows(), chain.trusted) or chain.baseline_commit

    def baseline(self) -> Iteration | None:
        v = bookkeeping.baseline_version(self.rows())
        return None if v is None else self.store.iteration(v)

    def best_iteration(self) -> Iteration | None:
        best = bookkeeping.best_row(self.rows(), self.chain().trusted)
        return None if best is None else self.store.iteration(best.version)

    def counters(self) -> bookkeeping.Counters:
        return bookkeeping.counters(self.rows(), self._records)

    def agent_spent(self) -> Spent:
        """What the agent cost so far (masked iterations too: their money is spent). Ended
        iterations' records are read once."""
        rows = self.rows()
        wanted = [r.version for r in rows if r.version not in self._ended_records]
        records: dict[int, Any] = {}
        for it in self.store.iterations(versions=wanted):
            records[it.version] = it.record
            if it.final:
                self._ended_records[it.version] = it.record
        return spent(sorted({**self._ended_records, **records}.items()))

    def _records(self, versions: list[int]) -> dict[int, Iteration]:
        return {it.version: it for it in self.store.iterations(versions=versions)}

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
        self.write_memory(it)
        self.write_projections()
        self.refresh_memory_files()

    def end_row(self, it: Iteration) -> None:
        """Save an ended iteration: its place in the end order, and for a keep its seal and
        the chain's new head, in one transaction (a crash leaves both or neither)."""
        with ENDING, self.store.transaction():
            self.seal_if_kept(it)
            self.store.save_iteration(it)
            if it.status in KEPT and it.commit:
                self.store.set("chain_head", integrity.chain_head(self.key, history.kept_rows(self.store)))

    def seal_if_kept(self, it: Iteration) -> None:
        """An ended iteration takes its place in the order iterations ended; a kept one joins
        the chain of keeps (engine/integrity.py) after the keep that ended before it."""
        with ENDING:
            rows = self.rows()
            if it.record.get("ended_seq") is None:
                it.record["ended_seq"] = 1 + max((r.order for r in rows if r.version != it.version), default=-1)
            if it.status in KEPT and it.commit:
                kept = self.store.iterations(versions=[r.version for r in rows if r.kept and r.version != it.version])
                integrity.seal_new_keep(self.key, kept, it)

    def verify(self, lanes: list[Lane]) -> None:
        """Before a comparison and at every start: the chain of keeps is the engine's, and the
        run's branch sits at BEST_COMMIT (moved, it is put back; a forged keep stops the run)."""
        history.check_chain(self.key, self.store)
        frozen = str(self.store.get("frozen_config") or "")
        try:
            on_disk = integrity.read_text_nofollow(self.ws.config_path)
        except OSError:
            on_disk = None
        if frozen and on_disk != frozen:
            write_atomic(self.ws.config_path, frozen)
            self.event("tamper", "kopt.toml was edited behind kopt's back; restored from run.db", level="error")
        with BEST:  # no keep moves it meanwhile
            best = self.best_commit()
            if gitops.branch_sha(self.store.get("repo"), self.ws.branch) != best:
                gitops.reset_clean(self.ws.best, best)
                self.event(
                    "tamper",
                    f"the run's branch {self.ws.branch} had moved off BEST_COMMIT {best[:12]}; put back",
                    level="error",
                )

    def write_memory(self, it: Iteration) -> None:
        try:
            self.memory_folder()
            write_memory(self.ws, it)
        except OSError as e:
            self.event("disk", f"cannot write memory/v{it.version}.json: {e}", level="error")

    def write_projections(self) -> None:
        """performance.md and README.md re-rendered from the store. One that holds neither
        what this engine last wrote there nor what the store says now was edited behind
        kopt's back: said (it is rewritten like any other)."""
        paths = (self.ws.performance, self.ws.readme)
        with PROJECTING:
            found = {path: read_projection(path) for path in paths}
            try:
                write_projections(self.ws, self.store, self.cfg)
            except OSError as e:
                self.event("disk", f"cannot write projections: {e}", level="error")
                return
            now = {path: read_projection(path) for path in paths}
            edited = [
                path.name
                for path in paths
                if path in self._projected and found[path] not in (self._projected[path], now[path])
            ]
            self._projected.update(now)
        if edited:
            self.event(
                "tamper", f"{', '.join(edited)} had been edited behind kopt's back; rewritten from run.db", level="warn"
            )

    def memory_folder(self) -> bool:
        """memory/ a folder of the workspace's own before anything is written there: a link or
        a file in its place (which would carry kopt's writes and removals elsewhere) is
        removed and the folder made again. True when it had to."""
        memory = self.ws.memory
        replaced = memory.is_symlink() or (memory.exists() and not memory.is_dir())
        if replaced:
            memory.unlink()
        memory.mkdir(mode=0o700, exist_ok=True)
        return replaced

    def refresh_memory_files(self) -> list[str]:
        """Every memory/vN.json exactly as the store says: a file that differs (edited, or
        left behind by a crash), that is a link or a hard link, or that names no iteration is
        rewritten or removed, and said. Returns the names it had to touch."""
        memory = self.ws.memory
        touched: list[str] = []
        try:
            if self.memory_folder():
                touched.append("memory/ (not a folder)")
            its = self.store.iterations()
            names = [e.name for e in os.scandir(memory)]
        except OSError as e:
            self.event("disk", f"cannot refresh memory/: {e}", level="error")
            return touched
        versions = {it.version for it in its}
        for it in its:
            path = self.ws.memory_path(it.version)
            if memory_is_the_stores(path, it):
                continue
            try:
                remove_entry(path)
                write_memory(self.ws, it)
            except OSError as e:
                self.event("disk", f"cannot rewrite {path.name}: {e}", level="error")
                continue
            touched.append(path.name)
        for name in names:
            m = MEMORY_NAME.fullmatch(name)
            if m and int(m.group(1)) not in versions:
                try:
                    remove_entry(memory / name)
                except OSError as e:
                    self.event("disk", f"cannot remove memory/{name}: {e}", level="error")
                    continue
                touched.append(f"{name} (no such iteration: removed)")
        if touched:
            self.event(
                "tamper",
                f"memory/ differed from run.db (edited behind kopt's back, or left behind by a "
                f"crash): {', '.join(touched[:10])}{' ...' if len(touched) > 10 else ''}; rewritten from the "
                "store",
                level="warn",
            )
        return touched

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
        profiler and waiting for an idle GPU)."""
        timings = it.record.setdefault("timings", {})
        total = max(0.0, (it.finished_at or time.time()) - it.started_at)
        outside = sum(float(timings.get(k, 0.0)) for k in ("proposer_s", "profiler_s", "gate_wait_s"))
        outside += sum(float(x) for x in timings.get("looks_s", []))
        timings["total_s"] = round(total, 4)
        timings["engine_s"] = round(max(0.0, total - outside), 4)

    # -- subprocesses ---------------------------------------------------------------------------

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**self.cfg.target.env, **(extra or {}), MARKER: str(self.ws.dir)}

    def run(
        self,
        it: Iteration,
        command: str | list[str],
        *,
        cwd: Path,
        name: str,
        timeout_s: float,
        env: dict[str, str] | None = None,
        confine: Confinement | None = None,
    ) -> runner.RunResult:
        """A command in its own process group (under bubblewrap when `confine` is given: see
        jails.py), interruptible through the pump, logged to logs/vN/<name>.out|.err, its
        group recorded (orphans are killed after a crash). Unconfined, every process that
        carries the run's marker is ended with it (runner.end_leftovers)."""
        log_dir = self.ws.log_dir(it.version)
        self.store.set("live_log", str(log_dir / f"{name}.out"))
        return runner.run(
            command,
            cwd=cwd,
            log_dir=log_dir,
            name=name,
            timeout_s=timeout_s,
            env=self.env(env),
            poll=self.control.pump,
            poll_interval_s=self.poll_interval_s,
            on_start=self.child_started,
            on_end=self.child_ended,
            max_output_bytes=self.max_output_bytes,
            confine=confine,
            marker=self.marker,
        )

    def server(
        self,
        it: Iteration,
        command: str,
        *,
        cwd: Path,
        name: str,
        env: dict[str, str],
        confine: Confinement | None = None,
    ) -> runner.Server:
        log_dir = self.ws.log_dir(it.version)
        self.store.set("live_log", str(log_dir / f"{name}.err"))
        return runner.Server(
            command,
            cwd=cwd,
            log_dir=log_dir,
            name=name,
            env=self.env(env),
            on_start=self.child_started,
            on_end=self.child_ended,
            max_output_bytes=self.max_output_bytes,
            confine=confine,
            marker=self.marker,
        )

    @property
    def marker(self) -> tuple[str, str]:
        """(MARKER, this workspace): what every child of this run carries in its environment."""
        return MARKER, str(self.ws.dir)

    @property
    def max_output_bytes(self) -> int:
        return int(self.cfg.target.max_output_mib * 2**20)

    def child_started(self, pgid: int) -> None:
        """meta.child_pgid names the newest live child group (the TUI shows its processes as
        this run's own; recovery finds orphans by MARKER, whatever their group)."""
        self.child_pgids.add(pgid)
        self.store.set("child_pgid", pgid)
        faults.step(f"child started: {Path(str(self.store.get('live_log') or '?')).stem}")

    def child_ended(self, pgid: int) -> None:
        self.child_pgids.discard(pgid)
        self.store.set("child_pgid", max(self.child_pgids) if self.child_pgids else None)

    def own_pids(self) -> set[int]:
        """This run's live child processes, those that left their group included (the GPU gate
        does not count them as foreign)."""
        return {p.pid for pgid in self.child_pgids for p in runner.process_tree(pgid)}


MEMORY_NAME = re.compile(r"v(\d+)\.json")

PROJECTING = threading.Lock()
"""performance.md and README.md are checked, written and remembered by one lane at a time."""


def memory_is_the_stores(path: Path, it: Iteration) -> bool:
    """memory/vN.json is a regular file of one name holding what the store says of vN."""
    text = read_projection(path)
    if text is None:
        return False
    try:
        return bool(json.loads(text) == json.loads(json.dumps(memory_record(it), default=str)))
    except ValueError:
        return False


def read_projection(path: Path, limit: int = 64 << 20) -> bytes | None:
    """A projection file's bytes, None when it is anything but a regular file of one name
    (missing, a link, a hard link, a FIFO, a folder): such a file is never taken as kopt's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        return os.read(fd, limit) if st.st_size < limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def remove_entry(path: Path) -> None:
    """Whatever has this name (a file, a link, a FIFO, a folder) removed, never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def last_line(res: runner.RunResult) -> str:
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
    from kopt_supervisor.engine import config, sandbox

    store = ws.open_store()
    key = integrity.read_secret(ws.dir)
    text, edited = integrity.frozen_config(ws.dir, store.meta(), key)
    cfg = config.loads(text, source=str(ws.config_path))
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
        on_history_changed=lambda: ctx.write_projections(),
    )
    ctx = RunContext(
        ws, cfg, store, control, Jails(ws, cfg, mode, support), key, log=log, poll_interval_s=poll_interval_s
    )
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
    store.set_many({"frozen_config": text, "frozen_config_seal": integrity.config_seal(key, text)})
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
        own_pids=ctx.own_pids,
        log=lambda m: ctx.event("gpu", m, level="warn"),
        owner=f"kopt run {ctx.ws.tag} ({ctx.ws.dir})",
    )
    return Lane(0, ctx.ws.best, ctx.ws.cand, gate)

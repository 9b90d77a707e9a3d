"""The command pump: pause, stop and restart as states the loop checks, and the one table of
what they interrupt.

Clients (the TUI, the CLI) insert command rows into run.db; `Control.pump()` reads them while
the engine waits (every fraction of a second, also inside a running benchmark) and turns
them into state: `paused`, a pending stop reason, a pending restart, a review answer, a mask
applied. The state machine looks at that state at its named points (`checkpoint()`).

A running step (a proposer working for an hour, a benchmark, a wait for an idle GPU) cannot
wait for the next checkpoint to honour a stop, so the pump raises `Interrupt` out of the
step — but only for the requests the step's row of `INTERRUPTS` names. That table is the one
place that says which steps a request interrupts, and `RESUMES` how each is resumed:

    step           stop / restart              pause
    gate_wait      interrupts                  - (the wait goes on paused; the gate re-checks)
    propose        interrupts (iteration       - (takes effect at the next checkpoint)
                   closed as interrupted)
    timed          interrupts                  interrupts: the look or baseline run is
                                               discarded and run again after the resume
    profile        interrupts                  -
    format         -                           -   (short; the keep finishes, then stops)
    review_wait    interrupts                  - (the review waits on; its deadline holds)
    submit_wait    interrupts                  -
    idle           - (the machine's checkpoints act on them)

A restart is finished (its command marked done) only once applied, so an engine dying in
between leaves it pending and the next engine applies it.

The run's child processes the pump interrupts (`Processes`, at the end): the environment every
child carries (`MARKER`, the workspace), a command or a server in its own process group (under
bubblewrap when given a confinement: engine/sandbox/paths.py `Jails`), interruptible through the
pump and logged under logs/vN/, and the groups alive now (`own_pids`: the GPU gate counts them
as the run's own, never as foreign). The side effects of starting processes live there and in
engine/runner; nothing decides.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypedDict, TypeVar

from kopt_supervisor.engine import BadInput, KoptFailure, history
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner import process_trees
from kopt_supervisor.engine.runner.command import RunResult
from kopt_supervisor.engine.runner.command import run as run_command
from kopt_supervisor.engine.runner.server import Server
from kopt_supervisor.engine.sandbox import Confinement
from kopt_supervisor.engine.store import Command, Store, fault_step
from kopt_supervisor.engine.workspace import Workspace, command_seal, same

T = TypeVar("T")


class Clock:
    """The clock of the engine's waits (a review's timeout, the manual proposer's submit, the
    gate's pause between checks, a pause): monotonic seconds and a sleep. Tests replace
    `CLOCK` with one they drive (tests/clock.py), so a review timeout of half an hour passes
    in a few polls instead of being slept through."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


CLOCK = Clock()


class Request(StrEnum):
    PAUSE = "pause"
    STOP = "stop"
    RESTART = "restart"


class Step(StrEnum):
    """What the engine is doing while the pump runs (the rows of INTERRUPTS)."""

    IDLE = "idle"
    GATE_WAIT = "gate_wait"
    PROPOSE = "propose"
    TIMED = "timed"
    """A timed run: a baseline run or a look (best and candidate measured)."""
    PROFILE = "profile"
    FORMAT = "format"
    REVIEW_WAIT = "review_wait"
    SUBMIT_WAIT = "submit_wait"


_ENDS_RUN = frozenset({Request.STOP, Request.RESTART})
INTERRUPTS: dict[Step, frozenset[Request]] = {
    Step.IDLE: frozenset(),
    Step.GATE_WAIT: _ENDS_RUN,
    Step.PROPOSE: _ENDS_RUN,
    Step.TIMED: _ENDS_RUN | {Request.PAUSE},
    Step.PROFILE: _ENDS_RUN,
    Step.FORMAT: frozenset(),
    Step.REVIEW_WAIT: _ENDS_RUN,
    Step.SUBMIT_WAIT: _ENDS_RUN,
}
RESUMES: dict[Request, str] = {
    Request.PAUSE: "a timed run is discarded and run again after the resume; other steps go on",
    Request.STOP: "the iteration in flight is closed as interrupted; `kopt run` starts the next one",
    Request.RESTART: "the iteration in flight is closed as interrupted; the restart is applied and the "
    "loop goes on from the restart point",
}


@dataclass
class Interrupt(Exception):
    """A request that ends the running step (raised by the pump, per INTERRUPTS)."""

    request: Request
    reason: str = ""
    version: int | None = None
    """RESTART: the restart point vK."""
    command_id: int | None = None
    """RESTART: finished (done) once the restart is applied."""
    why: str = ""

    def __str__(self) -> str:
        return self.reason or str(self.request)


class Control:
    """Shared by every lane of a run (each lane pumps from its own thread): the state is the
    run's, the step is the pumping thread's, a command is handled once (a lock), and each
    thread reads run.db through its own connection."""

    def __init__(
        self,
        ws: Workspace,
        store: Store,
        key: bytes,
        *,
        poll_interval_s: float = 0.2,
        on_state: Callable[[str], None] | None = None,
        on_history_changed: Callable[[], None] | None = None,
    ) -> None:
        self.ws = ws
        self._main = store
        self._main_thread = threading.get_ident()
        self._local = threading.local()
        self._lock = threading.RLock()
        self.key = key
        """The run's secret: a command row is acted on only with its seal (engine/workspace.py)."""
        self.poll_interval_s = poll_interval_s
        self.on_state = on_state or (lambda state: None)
        self.on_history_changed = on_history_changed or (lambda: None)
        self.paused = bool(store.get("paused", False))
        self.stop_reason: str | None = None
        self.restart: Interrupt | None = None
        self.reviews: dict[int, Command | None] = {}
        """Versions awaiting the engineer now -> the answer once it came (lanes queue reviews)."""
        self._held: set[int] = set()
        """Answers handed to a review and not finished yet (`finish`): still pending in run.db,
        and no other lane's drain may refuse them as answers nobody awaits."""
        self.waiting_for: collections.Counter[str] = collections.Counter()
        """The command kinds threads wait for now (`wait_for`), each with how many wait."""

    @property
    def store(self) -> Store:
        """The calling thread's connection to run.db (SQLite connections stay in their thread)."""
        if threading.get_ident() == self._main_thread:
            return self._main
        store = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = Store(self.ws.db_path)
        return store

    @property
    def step(self) -> Step:
        """What the calling thread is doing (its row of INTERRUPTS)."""
        return getattr(self._local, "step", Step.IDLE)

    @step.setter
    def step(self, value: Step) -> None:
        self._local.step = value

    # -- the state the machine reads ----------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """A stop from outside the store (a signal): honoured at the next pump."""
        self.stop_reason = self.stop_reason or reason

    def pending(self) -> Interrupt | None:
        """A stop or restart waiting to be acted on (stop first)."""
        if self.stop_reason:
            return Interrupt(Request.STOP, self.stop_reason)
        return self.restart

    def checkpoint(self) -> Interrupt | None:
        """A named point of the machine: act on commands, wait while paused, and return the
        stop or restart the machine must act on now (None: go on)."""
        self.drain()
        while self.paused and self.pending() is None:
            self.on_state("paused")
            self.store.set(
                "progress",
                {
                    "version": None,
                    "phase": "paused",
                    "t": time.time(),
                    "step": "paused by the engineer (resume with `p` or `kopt resume`)",
                },
            )
            CLOCK.sleep(self.poll_interval_s)
            self.drain()
        return self.pending()

    def restart_applied(self) -> None:
        if self.restart is not None and self.restart.command_id is not None:
            self.store.finish_command(self.restart.command_id, "done", f"restarted from v{self.restart.version}")
        self.restart = None

    @contextlib.contextmanager
    def during(self, step: Step) -> Iterator[None]:
        """Mark what the engine does while the pump may run (its INTERRUPTS row applies)."""
        outer, self.step = self.step, step
        try:
            self.pump()
            yield
        finally:
            self.step = outer

    def preemptible(self, run: Callable[[], T]) -> T:
        """A timed run: paused in the middle, it is discarded and run again once resumed."""
        while True:
            try:
                with self.during(Step.TIMED):
                    return run()
            except Interrupt as i:
                if i.request != Request.PAUSE:
                    raise
                stop = self.checkpoint()  # waits while paused
                if stop is not None:
                    raise stop from None

    # -- the pump -------------------------------------------------------------------------

    def pump(self) -> None:
        """Act on pending commands; raise Interrupt when one ends the running step."""
        self.drain()
        allowed = INTERRUPTS[self.step]
        pending = self.pending()
        if pending is not None and pending.request in allowed:
            raise pending
        if self.paused and Request.PAUSE in allowed:
            raise Interrupt(Request.PAUSE, "paused by the engineer")

    def drain(self) -> None:
        """Act on pending commands (state changes only; nothing is raised)."""
        with self._lock:
            for cmd in self.store.pending_commands():
                if cmd.id not in self._held:
                    self._handle(cmd)

    def _sealed(self, cmd: Command) -> bool:
        return same(cmd.seal, command_seal(self.key, cmd.kind, cmd.args, cmd.t))

    def _handle(self, cmd: Command) -> None:
        st = self.store
        kind = cmd.kind
        if not self._sealed(cmd):
            st.finish_command(cmd.id, "rejected", "not sent by the user's kopt (no valid seal): refused")
            st.event(
                "tamper",
                f"refused command #{cmd.id} ({kind} {cmd.args}) from {cmd.source or '?'}: "
                "it carries no valid seal (inserted into run.db by something other than the user's kopt)",
                level="error",
            )
            return
        if kind in ("pause", "resume"):
            self.paused = kind == "pause"
            st.set("paused", self.paused)
            self.on_state("paused" if self.paused else "running")
            st.finish_command(cmd.id, "done", "paused" if self.paused else "resumed")
            st.event("command", f"{'paused' if self.paused else 'resumed'} by the engineer")
        elif kind == "stop":
            st.finish_command(cmd.id, "done", "stopping")
            why = cmd.args.get("why")
            self.request_stop("stopped by the engineer" + (f": {why}" if why else ""))
        elif kind in ("accept", "reject", "more_rounds"):
            v = int(cmd.args.get("version", -1))
            if v in self.reviews:
                if self.reviews[v] is None:
                    self.reviews[v] = cmd
                    self._held.add(cmd.id)
            else:
                st.finish_command(cmd.id, "rejected", f"v{v} is not awaiting review")
        elif kind == "restart":
            v = int(cmd.args.get("version", -1))
            try:
                history.check_restart_point(st, v)
            except BadInput as e:
                st.finish_command(cmd.id, "rejected", str(e))
                return
            if self.restart is None:
                self.restart = Interrupt(
                    Request.RESTART, f"restart from v{v}", v, cmd.id, str(cmd.args.get("why") or "")
                )
        elif kind in ("mask", "unmask"):
            try:
                changed = history.set_masked(
                    self.ws, st, [int(x) for x in cmd.args.get("versions", [])], kind == "mask"
                )
            except BadInput as e:
                st.finish_command(cmd.id, "rejected", str(e))
                return
            self.on_history_changed()
            st.finish_command(cmd.id, "done", f"{kind}ed {', '.join(f'v{v}' for v in changed) or 'nothing'}")
        elif kind == "submit":
            return  # stays pending until the manual proposer asks for it (wait_for)
        else:
            st.finish_command(cmd.id, "rejected", f"{kind!r} is not handled by this engine")

    # -- waits that other steps make --------------------------------------------------------

    def await_answer(self, version: int, seconds: float, tick: Callable[[float], None]) -> Command | None:
        """Wait up to `seconds` for the engineer's answer on vN's review (monotonic: a
        wall-clock jump neither ends nor extends it). `tick(seconds_left)` reports progress.
        The answer stays pending in run.db, held from other pumps, until `finish` closes it."""
        with self._lock:
            self.reviews[version] = None
        end = CLOCK.monotonic() + seconds
        try:
            with self.during(Step.REVIEW_WAIT):
                while CLOCK.monotonic() < end:
                    self.pump()
                    answer = self.reviews.get(version)
                    if answer is not None:
                        return answer
                    tick(end - CLOCK.monotonic())
                    CLOCK.sleep(self.poll_interval_s)
            return None
        finally:
            with self._lock:
                self.reviews.pop(version, None)

    def finish(self, answer: Command, status: str, result: str) -> None:
        """Close an answer `await_answer` returned, once the review has acted on it."""
        with self._lock:
            self.store.finish_command(answer.id, status, result)
            self._held.discard(answer.id)

    def wait_for(
        self,
        kinds: set[str],
        timeout_s: float,
        tick: Callable[[], None],
        route: Callable[[Command], bool | str] | None = None,
    ) -> Command:
        """Block until a command of these kinds arrives for this waiter (the manual proposer's
        `submit`). `route(cmd)` says whose a command is when several waiters share the pump
        (lanes, each from its own thread): True, this waiter's (taken); False, another's (left
        pending for it); text, no waiter's (finished "rejected" with that text). A command is
        taken under the pump's lock, and only with its seal: two waiters never take one command."""
        with self._lock:
            self.waiting_for.update(kinds)
        end = CLOCK.monotonic() + timeout_s
        try:
            with self.during(Step.SUBMIT_WAIT):
                while CLOCK.monotonic() < end:
                    self.pump()
                    taken = self._take(kinds, route)
                    if taken is not None:
                        return taken
                    tick()
                    CLOCK.sleep(self.poll_interval_s)
        finally:
            with self._lock:
                self.waiting_for.subtract(kinds)
                self.waiting_for = +self.waiting_for  # kinds nobody waits for any more leave it
        raise KoptFailure(f"no {'/'.join(sorted(kinds))} command within {timeout_s:.0f} s")

    def _take(self, kinds: set[str], route: Callable[[Command], bool | str] | None) -> Command | None:
        with self._lock:
            for cmd in self.store.pending_commands(kinds):
                if not self._sealed(cmd):  # inserted since the pump's drain: refused, never taken
                    self._handle(cmd)
                    continue
                whose = True if route is None else route(cmd)
                if whose is True:
                    self.store.finish_command(cmd.id, "done", "received")
                    return cmd
                if isinstance(whose, str):
                    self.store.finish_command(cmd.id, "rejected", whose)
                    self.store.event(
                        "command", f"rejected {cmd.kind} #{cmd.id} from {cmd.source or '?'}: {whose}", level="warn"
                    )
        return None

    def sleep(self, seconds: float, tick: Callable[[float], None]) -> None:
        """The gate's sleep between checks: the pump keeps running (stop, restart end it)."""
        end = CLOCK.monotonic() + seconds
        with self.during(Step.GATE_WAIT):
            while CLOCK.monotonic() < end:
                self.pump()
                tick(end - CLOCK.monotonic())
                CLOCK.sleep(min(self.poll_interval_s, max(0.0, end - CLOCK.monotonic())))


# ---------------------------------------------------------------------------------------
# A run's child processes


MARKER = "KOPT_WORKSPACE"
"""Every child kopt starts carries this variable (the workspace's path): after a crash, the
orphans of a recorded process group are recognised by it (a recycled pid never is)."""


class Launch(TypedDict):
    """The arguments every child of a run is started with (runner.command.run and runner.server.Server)."""

    cwd: Path
    log_dir: Path
    name: str
    env: dict[str, str]
    on_start: Callable[[int], None]
    on_end: Callable[[int], None]
    max_output_bytes: int
    confine: Confinement | None
    marker: tuple[str, str]


class Processes:
    def __init__(
        self, ws: Workspace, cfg: Config, store: Store, control: Control, *, poll_interval_s: float = 0.2
    ) -> None:
        self.ws = ws
        self.cfg = cfg
        self.store = store
        self.control = control
        self.poll_interval_s = poll_interval_s
        self.child_pgids: set[int] = set()

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
        log_dir: Path | None = None,
    ) -> RunResult:
        """A command in its own process group (under bubblewrap when `confine` is given: see
        sandbox.paths.Jails), interruptible through the pump, logged to logs/vN/<name>.out|.err
        (or `log_dir`: a run that must not learn its iteration from its open logs' path), its
        group recorded (orphans are killed after a crash). Unconfined, every process that
        carries the run's marker is ended with it (runner.processes.end_leftovers)."""
        return run_command(
            command,
            timeout_s=timeout_s,
            poll=self.control.pump,
            poll_interval_s=self.poll_interval_s,
            **self._launch(it, cwd, name, env, confine, live=".out", log_dir=log_dir),
        )

    def server(
        self,
        it: Iteration,
        command: str | list[str],
        *,
        cwd: Path,
        name: str,
        env: dict[str, str],
        confine: Confinement | None = None,
        log_dir: Path | None = None,
    ) -> Server:
        return Server(command, **self._launch(it, cwd, name, env, confine, live=".err", log_dir=log_dir))

    def _launch(
        self,
        it: Iteration,
        cwd: Path,
        name: str,
        env: dict[str, str] | None,
        confine: Confinement | None,
        live: str,
        log_dir: Path | None = None,
    ) -> Launch:
        """What every child of the run is started with: its logs in logs/vN/<name>.* (or
        `log_dir`), the run's environment and marker, its group recorded, its output bounded;
        `live`: the log the TUI follows meanwhile."""
        log_dir = log_dir or self.ws.log_dir(it.version)
        self.store.set("live_log", str(log_dir / f"{name}{live}"))
        return Launch(
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
        fault_step(f"child started: {Path(str(self.store.get('live_log') or '?')).stem}")

    def child_ended(self, pgid: int) -> None:
        self.child_pgids.discard(pgid)
        self.store.set("child_pgid", max(self.child_pgids) if self.child_pgids else None)

    def own_pids(self) -> set[int]:
        """This run's live child processes, those that left their group included (the GPU gate
        does not count them as foreign)."""
        return {p.pid for p in process_trees(self.child_pgids)}

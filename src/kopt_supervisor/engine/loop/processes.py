"""A run's child processes: the environment every child carries (`MARKER`, the workspace),
a command or a server in its own process group (under bubblewrap when confined: jails.py),
interruptible through the command pump and logged under logs/vN/, and the groups alive now
(`own_pids`: the GPU gate counts them as the run's own, never as foreign).

The side effects of starting processes live here and in engine/runner; nothing decides.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from kopt_supervisor.engine import faults
from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.loop.control import Control
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner.command import RunResult, Server
from kopt_supervisor.engine.runner.command import run as run_command
from kopt_supervisor.engine.runner.processes import process_tree
from kopt_supervisor.engine.sandbox import Confinement
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace

MARKER = "KOPT_WORKSPACE"
"""Every child kopt starts carries this variable (the workspace's path): after a crash, the
orphans of a recorded process group are recognised by it (a recycled pid never is)."""


class Launch(TypedDict):
    """The arguments every child of a run is started with (runner.command.run and runner.command.Server)."""

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
    ) -> RunResult:
        """A command in its own process group (under bubblewrap when `confine` is given: see
        jails.py), interruptible through the pump, logged to logs/vN/<name>.out|.err, its
        group recorded (orphans are killed after a crash). Unconfined, every process that
        carries the run's marker is ended with it (runner.processes.end_leftovers)."""
        return run_command(
            command,
            timeout_s=timeout_s,
            poll=self.control.pump,
            poll_interval_s=self.poll_interval_s,
            **self._launch(it, cwd, name, env, confine, live=".out"),
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
    ) -> Server:
        return Server(command, **self._launch(it, cwd, name, env, confine, live=".err"))

    def _launch(
        self, it: Iteration, cwd: Path, name: str, env: dict[str, str] | None, confine: Confinement | None, live: str
    ) -> Launch:
        """What every child of the run is started with: its logs in logs/vN/<name>.*, the
        run's environment and marker, its group recorded, its output bounded; `live`: the log
        the TUI follows meanwhile."""
        log_dir = self.ws.log_dir(it.version)
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
        faults.step(f"child started: {Path(str(self.store.get('live_log') or '?')).stem}")

    def child_ended(self, pgid: int) -> None:
        self.child_pgids.discard(pgid)
        self.store.set("child_pgid", max(self.child_pgids) if self.child_pgids else None)

    def own_pids(self) -> set[int]:
        """This run's live child processes, those that left their group included (the GPU gate
        does not count them as foreign)."""
        return {p.pid for pgid in self.child_pgids for p in process_tree(pgid)}

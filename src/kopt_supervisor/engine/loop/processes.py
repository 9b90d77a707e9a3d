"""A run's child processes: what each may touch (`Jails`), the environment every child carries
(`MARKER`, the workspace), a command or a server in its own process group, interruptible
through the command pump and logged under logs/vN/, and the groups alive now (`own_pids`:
the GPU gate counts them as the run's own, never as foreign). The side effects of starting
processes live here and in engine/runner; nothing decides.

`Jails`: the bubblewrap confinements of engine/sandbox/, chosen per run (docs/design.md §12
layer 1; docs/security.md).

| run                        | writes                                  | reads of the workspace          |
|----------------------------|-----------------------------------------|---------------------------------|
| proposer (`command`)       | cand/, its plan, logs/vN/agent/, the    | its prompt (md + json)          |
|                            | agent's own folders ([propose].writable)|                                 |
| bench on best / on cand    | that tree (its CSV), its per-tree cache | nothing else                    |
| served bench (`serve`)     | its looks folder, its per-tree cache    | its tree, read-only             |
|                            | (the confirmation's own, emptied)       |                                 |
| ab_command (per look)      | its per-pair cache                      | best/ and cand/, read-only      |
| ab_command (served)        | its looks folder, its per-pair cache    | best/ and cand/, read-only      |
| profiler                   | the tree, the profile's folder, cache   | nothing else                    |
| formatter                  | cand/, its cache (no GPU)               | nothing else                    |

A run without bubblewrap happens only when the user passed `--no-sandbox` (or in the demo,
where no sandbox works): every confinement method then returns None (unconfined), and the
run's meta says so wherever results are shown. Unconfined runs still send their compile
caches, bytecode included, where a confined run of the same kind would (`env`): a tree's
code never writes a `__pycache__` into the tree, which the after-run check refuses
(served_trees.check_after_run), and no run of one tree reads what another compiled."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from kopt_supervisor.engine import gitops, sandbox
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.loop.control import Control
from kopt_supervisor.engine.propose.agents import PRESETS, writable_paths
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner import process_tree
from kopt_supervisor.engine.runner.command import RunResult, Server
from kopt_supervisor.engine.runner.command import run as run_command
from kopt_supervisor.engine.sandbox import Confinement, SandboxMode, SandboxSupport
from kopt_supervisor.engine.store import Store, fault_step
from kopt_supervisor.engine.workspace import Workspace, list_workspaces


class Jails:
    def __init__(self, ws: Workspace, cfg: Config, mode: SandboxMode, support: SandboxSupport | None) -> None:
        self.ws, self.cfg, self.mode = ws, cfg, mode
        self.bwrap = (support.bwrap if support else None) or sandbox.BWRAP

    @property
    def confined(self) -> bool:
        return self.mode.confined

    def proposer(self, worktree: Path, prompt: Path, pack: Path, plan: Path, agent_dir: Path) -> Confinement | None:
        if not self.confined:
            return None
        p = self.cfg.propose
        preset = PRESETS.get(p.agent) if p.agent else None
        extra = writable_paths(preset, extra=p.writable) if preset else tuple(p.writable)
        return sandbox.for_proposer(
            worktree=worktree,
            workspace=self.ws.dir,
            prompt=prompt,
            plan=plan,
            inputs=[pack],
            outputs=[agent_dir],
            writable=extra,
            readable=p.readable,
            hidden=self.other_runs(),
            network=p.network,
            bwrap=self.bwrap,
        )

    def bench(
        self,
        tree: Path,
        side: str,
        tree_hash: str,
        *,
        outputs: tuple[Path, ...] = (),
        write_tree: bool = True,
        gpu: bool = True,
        cache: Path | None = None,
    ) -> Confinement | None:
        """A run of one tree's code (its bench, its profile, its formatter), with the tree's
        own cache unless `cache` names another (the fresh-process re-decision's)."""
        if not self.confined:
            return None
        t = self.cfg.target
        cache = cache or sandbox.cache_dir(self.ws.dir, side, tree_hash)
        return sandbox.for_bench(
            workspace=self.ws.dir,
            cache=cache,
            writable_trees=[tree] if write_tree else [],
            readonly_trees=[] if write_tree else [tree],
            outputs=outputs,
            writable=t.writable,
            readable=t.readable,
            hidden=self.other_runs(),
            network=t.network,
            devices=None if gpu else [],
            bwrap=self.bwrap,
        )

    def env(self, side: str, *trees: str, cache: Path | None = None) -> dict[str, str]:
        """Unconfined: the variables that send a run's compile caches (Triton's, Inductor's,
        ...) to the folder its confinement would bind: `cache`, or the per-tree cache of
        `side` and `trees` (for a proposer, side "proposer" and no tree). Confined: none (the
        confinement sets them).

        Python's bytecode is the exception: unconfined, no shared library cache can be bound
        read-only over a tree's `PYTHONPYCACHEPREFIX` (sandbox/bytecode.py), and a prefix of
        its own made every new tree's first run compile torch again (~3.5 CPU-s on a 2-core
        machine). An unconfined run instead reads the library bytecode pip installed and
        writes none (`PYTHONDONTWRITEBYTECODE`): no `__pycache__` lands in a tree, and nothing
        is lost that a wall kept, since an unconfined candidate can write anywhere anyway."""
        if self.confined:
            return {}
        folder = cache or (sandbox.cache_dir(self.ws.dir, side, *trees) if trees else self.ws.dir / "cache" / side)
        folder.mkdir(parents=True, exist_ok=True)
        env = sandbox.cache_env(folder)
        del env["PYTHONPYCACHEPREFIX"]
        return {**env, "PYTHONDONTWRITEBYTECODE": "1"}

    def ab(
        self, best: Path, cand: Path, best_hash: str, cand_hash: str, *, outputs: tuple[Path, ...] = ()
    ) -> Confinement | None:
        """The ab_command: candidate code runs in the process that loads best, so neither
        tree is writable to it; its looks go to `outputs`."""
        if not self.confined:
            return None
        t = self.cfg.target
        return sandbox.for_bench(
            workspace=self.ws.dir,
            cache=sandbox.cache_dir(self.ws.dir, "ab", best_hash, cand_hash),
            readonly_trees=[best, cand],
            outputs=outputs,
            writable=t.writable,
            readable=t.readable,
            hidden=self.other_runs(),
            network=t.network,
            bwrap=self.bwrap,
        )

    def other_runs(self) -> list[Path]:
        """The other workspaces under the same root: no run's sandbox sees another run."""
        return [w.dir for w in list_workspaces(self.ws.root) if w.tag != self.ws.tag]


def tree_of(worktree: Path, commit: str) -> str:
    """The git tree hash of a commit (the key of its per-tree cache)."""
    return gitops.commit_info(worktree, commit)[1]


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
        Jails), interruptible through the pump, logged to logs/vN/<name>.out|.err, its
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
        fault_step(f"child started: {Path(str(self.store.get('live_log') or '?')).stem}")

    def child_ended(self, pgid: int) -> None:
        self.child_pgids.discard(pgid)
        self.store.set("child_pgid", max(self.child_pgids) if self.child_pgids else None)

    def own_pids(self) -> set[int]:
        """This run's live child processes, those that left their group included (the GPU gate
        does not count them as foreign)."""
        return {p.pid for pgid in self.child_pgids for p in process_tree(pgid)}

"""What each kind of run the loop starts may touch: the bubblewrap confinements of
engine/sandbox/, chosen per run (docs/design.md §12 layer 1; docs/security.md).

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
(look_files.check_after_run), and no run of one tree reads what another compiled.
"""

from __future__ import annotations

from pathlib import Path

from kopt_supervisor.engine import gitops, sandbox
from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.propose.agents import PRESETS, writable_paths
from kopt_supervisor.engine.sandbox import Confinement, SandboxMode, SandboxSupport
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
        """Unconfined: the variables that send a run's compile caches (PYTHONPYCACHEPREFIX,
        Triton's, ...) to the folder its confinement would bind: `cache`, or the per-tree
        cache of `side` and `trees` (for a proposer, side "proposer" and no tree). Confined:
        none (the confinement sets them)."""
        if self.confined:
            return {}
        folder = cache or (sandbox.cache_dir(self.ws.dir, side, *trees) if trees else self.ws.dir / "cache" / side)
        folder.mkdir(parents=True, exist_ok=True)
        return sandbox.cache_env(folder)

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

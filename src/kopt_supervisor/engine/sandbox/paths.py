"""A confined run's paths: which of them each kind of confinement sees, and what is made,
cleared and read on disk around a run.

- The two kinds kopt runs: `for_proposer` (a `command` proposer: writes cand/ and its plan,
  a private git copy) and `for_bench` (candidate or best code: its trees, outputs and
  per-tree cache). Extra paths from kopt.toml or a preset are resolved and refused where
  they would reach what the sandbox hides, a system folder, or what stays read-only inside a
  writable one.
- The side effects on the disk around a run: `prepare` makes what a confinement binds
  (missing folders and files, the private copy of a worktree's git metadata) and removes its
  scratch afterwards; the workspace's leftover scratch (`clear_scratch`) and per-tree caches
  (`cache_dir`, `prune_caches`) are cleared; a file a sandboxed process could have written is
  read safely (`read_output`).
- One run's confinements (`Jails`), chosen from its kopt.toml (docs/design.md §12 layer 1;
  docs/security.md):

| run                        | writes                                  | reads of the workspace          |
|----------------------------|-----------------------------------------|---------------------------------|
| proposer (`command`)       | cand/, its plan, logs/vN/agent/, the    | its prompt (md + json)          |
|                            | agent's own folders ([propose].writable)|                                 |
| bench on best / on cand    | that tree (its CSV), its per-tree cache | nothing else                    |
| served bench (`serve`)     | its looks folder, its per-tree cache    | its tree, read-only             |
|                            | (the confirmation's own, emptied)       |                                 |
| profiler                   | the tree, the profile's folder, cache   | nothing else                    |
| formatter                  | cand/, its cache (no GPU)               | nothing else                    |

A run without bubblewrap happens only when the user passed `--no-sandbox` (or in the demo,
where no sandbox works): every confinement method then returns None (unconfined), and the
run's meta says so wherever results are shown. Unconfined runs still send their compile
caches, bytecode included, where a confined run of the same kind would (`Jails.env`): a tree's
code never writes a `__pycache__` into the tree, which the after-run check refuses
(engine/loop/look_files.py check_after_run), and no run of one tree reads what another compiled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.sandbox import bytecode
from kopt_supervisor.engine.sandbox.confinement import (
    BASE_ENV,
    BWRAP,
    GIT_COMMON_MOUNT,
    PROPOSER_CACHE,
    SANDBOX_HOME,
    SYSTEM_DIRS,
    UNSET_ENV,
    Confinement,
    PrivateGit,
    _host_hidden,
    cache_env,
    gpu_devices,
    linked_worktree_git,
    python_site_dirs,
)


def for_proposer(
    *,
    worktree: Path,
    workspace: Path,
    prompt: Path,
    plan: Path,
    inputs: Sequence[Path] = (),
    outputs: Sequence[Path] = (),
    writable: Sequence[str | Path] = (),
    readable: Sequence[str | Path] = (),
    hidden: Sequence[str | Path] = (),
    network: bool = True,
    devices: Sequence[Path] | None = None,
    sockets: Sequence[Path] | None = None,
    writable_key: str = "[propose].writable",
    bwrap: str = BWRAP,
) -> Confinement:
    """A `command` proposer: writes `worktree` (cand/), `plan` and its `outputs` folders
    (e.g. logs/vN/agent/) and the extra `writable` paths (from [propose].writable and
    the agent's preset; `~` allowed); reads `prompt` and the other workspace files in
    `inputs` (the context pack's JSON); sees nothing else of `workspace`.
    Its git metadata is a private copy (git add/diff/commit work; kopt's branch refs,
    packed-refs, config and hooks stay read-only). Network on unless told otherwise.
    `devices`/`sockets` default to what the machine has; `bwrap` is the path `probe()` found."""
    ws = _real(workspace)
    tree = _inside(ws, worktree, "the candidate worktree")
    plan_r = _inside(ws, plan, "the plan file")
    outs = [_inside(ws, o, "a proposer output folder") for o in outputs]
    hide = [ws, *_hidden_extras(hidden)]
    extras = _extra_paths(writable, hide, writable_key)
    git = linked_worktree_git(tree)
    protected = [*_dotgit_files([tree]), *_common_dirs([tree]), *python_site_dirs()]
    _refuse_inside_protected(extras, protected, writable_key)
    return Confinement(
        writable=_uniq([tree, plan_r, *outs, *extras]),
        readable=_uniq(
            [
                _real(prompt),
                *(_inside(ws, x, "a proposer input") for x in inputs),
                *_extra_paths(readable, hide, "readable"),
            ]
        ),
        readonly=_uniq(protected),
        hidden=_uniq([*hide, *_host_hidden(sockets)]),
        network=network,
        devices=tuple(gpu_devices() if devices is None else (Path(d) for d in devices)),
        env=tuple({**BASE_ENV, **cache_env(PROPOSER_CACHE)}.items()),
        unset_env=UNSET_ENV,
        private_git=git,
        scratch_root=ws / SCRATCH,
        make_dirs=tuple(outs),
        make_files=(plan_r,),
        writable_key=writable_key,
        bwrap=bwrap,
    )


def for_bench(
    *,
    workspace: Path,
    cache: Path,
    writable_trees: Sequence[Path] = (),
    readonly_trees: Sequence[Path] = (),
    outputs: Sequence[Path] = (),
    writable: Sequence[str | Path] = (),
    readable: Sequence[str | Path] = (),
    hidden: Sequence[str | Path] = (),
    network: bool = False,
    devices: Sequence[Path] | None = None,
    sockets: Sequence[Path] | None = None,
    writable_key: str = "[target].writable",
    bwrap: str = BWRAP,
) -> Confinement:
    """Anything that runs candidate (or best) code: a bench, the profiler, a formatter. Sees of `workspace` only the trees it is given (`writable_trees` it may
    write, e.g. the bench's CSV; `readonly_trees` it may not), its `outputs` folders and
    its `cache` (`cache_dir(...)`, writable); gets a fresh HOME and /tmp, no network
    unless [target].network, the GPU device nodes. `devices`/`sockets` default to what the
    machine has; `bwrap` is the path `probe()` found."""
    ws = _real(workspace)
    rw_trees = [_real(t) for t in writable_trees]
    ro_trees = [_real(t) for t in readonly_trees]
    trees = [*rw_trees, *ro_trees]
    cache_r = _real(cache)
    outs = [_real(o) for o in outputs]
    hide = [ws, *_hidden_extras(hidden)]
    extras = _extra_paths(writable, hide, writable_key)
    protected = [*_dotgit_files(trees), *_common_dirs(trees), *python_site_dirs()]
    _refuse_inside_protected(extras, protected, writable_key)
    env = {
        **BASE_ENV,
        **cache_env(cache_r),
        "XDG_CONFIG_HOME": f"{SANDBOX_HOME}/.config",
        "XDG_DATA_HOME": f"{SANDBOX_HOME}/.local/share",
        "XDG_STATE_HOME": f"{SANDBOX_HOME}/.local/state",
    }
    return Confinement(
        writable=_uniq([*rw_trees, cache_r, *outs, *extras]),
        readable=_uniq([*ro_trees, *_extra_paths(readable, hide, "readable")]),
        readonly=_uniq(protected),
        hidden=_uniq([*hide, *_host_hidden(sockets)]),
        network=network,
        devices=tuple(gpu_devices() if devices is None else (Path(d) for d in devices)),
        home=SANDBOX_HOME,
        env=tuple(env.items()),
        # bytecode goes to the per-tree cache (PYTHONPYCACHEPREFIX): written there, it is read
        # back by the next run of the same tree (a user's PYTHONDONTWRITEBYTECODE would make
        # every run compile its imports from source, torch's included)
        unset_env=(*UNSET_ENV, "PYTHONDONTWRITEBYTECODE"),
        make_dirs=_uniq([cache_r, *outs]),
        writable_key=writable_key,
        bwrap=bwrap,
        library_bytecode=bytecode.shared_dir(),
    )


# ---------------------------------------------------------------------------------------
# Paths
def _real(p: str | Path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(p))))


def _within(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _inside(ws: Path, p: Path, what: str) -> Path:
    r = _real(p)
    if not _within(r, ws) or r == ws:
        raise BadInput(f"{what} {p} is not inside the run's workspace {ws}")
    return r


def _hidden_extras(values: Sequence[str | Path]) -> list[Path]:
    return [_real(v) for v in values]


def _extra_paths(values: Sequence[str | Path], hidden: Sequence[Path], key: str) -> list[Path]:
    """A user's (or a preset's) extra paths: `~` expanded, absolute, resolved, and never
    inside what the sandbox hides nor a system folder as such."""
    out = []
    for v in values:
        text = str(v)
        expanded = os.path.expanduser(text)
        if not text.strip() or not os.path.isabs(expanded):
            raise BadInput(f"{key}: {text!r} must be an absolute path (or start with ~)")
        r = _real(expanded)
        if str(r) in SYSTEM_DIRS:
            raise BadInput(f"{key}: {text!r} names {r}, which the sandbox keeps as it is; name a folder inside it")
        for h in hidden:
            if _within(r, h):
                raise BadInput(f"{key}: {text!r} lies inside {h}, which a sandboxed process must not see")
        out.append(r)
    return out


def _refuse_inside_protected(extras: Sequence[Path], protected: Sequence[Path], key: str) -> None:
    for r in extras:
        for p in protected:
            if _within(r, p):
                raise BadInput(f"{key}: {r} lies inside {p}, which stays read-only in the sandbox")


def _dotgit_files(trees: Sequence[Path]) -> list[Path]:
    """Each worktree's `.git` pointer file: read-only, so no run re-points it."""
    return [t / ".git" for t in trees if (t / ".git").is_file() and not (t / ".git").is_symlink()]


def _common_dirs(trees: Sequence[Path]) -> list[Path]:
    out = []
    for t in trees:
        g = linked_worktree_git(t)
        if g is not None:
            out.append(g.common)
        elif (t / ".git").is_dir() and not (t / ".git").is_symlink():
            out.append(_real(t / ".git"))
    return out


def _uniq(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(paths))


# ---------------------------------------------------------------------------------------
# One run's confinements


class Jails:
    """What each child of one run may touch: the confinements above, chosen from the run's
    kopt.toml (the table of this module's docstring). `confined` False: every method returns None
    (unconfined); `proposer_writable`: the agent preset's folders and [propose].writable;
    `other_runs`: the other workspaces under the same root, asked at each confinement (no run's
    sandbox sees another run)."""

    def __init__(
        self,
        workspace: Path,
        cfg: Config,
        *,
        confined: bool,
        bwrap: str | None,
        proposer_writable: Sequence[str],
        other_runs: Callable[[], list[Path]],
    ) -> None:
        self.workspace, self.cfg, self.confined = workspace, cfg, confined
        self.bwrap = bwrap or BWRAP
        self.proposer_writable = tuple(proposer_writable)
        self.other_runs = other_runs

    def proposer(self, worktree: Path, prompt: Path, pack: Path, plan: Path, agent_dir: Path) -> Confinement | None:
        if not self.confined:
            return None
        p = self.cfg.propose
        return for_proposer(
            worktree=worktree,
            workspace=self.workspace,
            prompt=prompt,
            plan=plan,
            inputs=[pack],
            outputs=[agent_dir],
            writable=self.proposer_writable,
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
        cache = cache or cache_dir(self.workspace, side, tree_hash)
        c = for_bench(
            workspace=self.workspace,
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
        return dataclasses.replace(c, library_units=bytecode.frozen(self.workspace))

    def freeze_library(self) -> None:
        """Once the baseline ran: the shared library bytecode units this workspace's runs bind
        fixed for its life (bytecode.freeze), from what the baseline's runs imported."""
        shared = bytecode.shared_dir()
        if self.confined and shared is not None:
            bytecode.freeze(self.workspace, shared, (self.workspace / "cache").glob("*/pycache"))

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
        folder = cache or (cache_dir(self.workspace, side, *trees) if trees else self.workspace / "cache" / side)
        folder.mkdir(parents=True, exist_ok=True)
        env = cache_env(folder)
        del env["PYTHONPYCACHEPREFIX"]
        return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


# ---------------------------------------------------------------------------------------
# Around a run: prepare, scratch, caches, reading back
@contextlib.contextmanager
def prepare(c: Confinement) -> Iterator[Confinement]:
    """Create what `c` binds and does not exist yet, and the private git copy; yield the
    confinement to wrap with; remove the scratch afterwards (whatever the run did)."""
    for f in c.make_files:
        if not f.exists() and not f.is_symlink():
            f.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.close(os.open(f, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    for d in (*c.make_dirs, *(p for p in c.writable if not p.exists() and not p.is_symlink())):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    shared, prefix = c.library_bytecode, c.pycache_prefix
    if shared is not None and prefix is not None:
        try:
            prefix.mkdir(parents=True, exist_ok=True)
            c = dataclasses.replace(c, library_binds=bytecode.binds(prefix, shared, units=c.library_units))
        except OSError:  # the shared cache is a speed-up: a run goes on without it
            c = dataclasses.replace(c, library_bytecode=None, library_binds=())
            shared = None
    scratch: Path | None = None
    try:
        if c.private_git is not None:
            if c.scratch_root is not None:
                c.scratch_root.mkdir(parents=True, exist_ok=True, mode=0o700)
            scratch = Path(tempfile.mkdtemp(prefix="kopt-sandbox-git-", dir=c.scratch_root))
            _copy_git_metadata(c.private_git, scratch)
            c = dataclasses.replace(c, scratch=scratch)
        yield c
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if shared is not None and prefix is not None:
            with contextlib.suppress(OSError):
                bytecode.harvest(prefix, shared)


def _copy_git_metadata(g: PrivateGit, scratch: Path) -> None:
    """What git writes, made private: the worktree's git dir copied (index, HEAD, its logs)
    with its `commondir` pointing at GIT_COMMON_MOUNT; over that read-only view of the
    repo's git dir, an empty object store whose alternate is the real one, a copy of
    `refs/` and `packed-refs`, and an empty `logs/`. Inside the sandbox `git status`, `diff`,
    `add`, `stash`, `commit`, `checkout -b` work and write only here; the real refs
    (kopt/TAG), packed-refs, config, hooks and objects are never written."""
    shutil.copytree(g.admin, scratch / "admin", symlinks=True)
    (scratch / "admin" / "commondir").write_text(GIT_COMMON_MOUNT + "\n")
    info = scratch / "objects" / "info"
    info.mkdir(parents=True)
    (info / "alternates").write_text(str(g.common / "objects") + "\n")
    shutil.copytree(g.common / "refs", scratch / "refs", symlinks=True)
    if (g.common / "packed-refs").is_file():
        shutil.copyfile(g.common / "packed-refs", scratch / "packed-refs", follow_symlinks=False)
    (scratch / "logs").mkdir()


SCRATCH = "sandbox"
"""The workspace's folder of per-run sandbox scratch (hidden from every sandbox)."""


def clear_scratch(workspace: Path) -> int:
    """Remove what runs killed with kopt left in `<workspace>/sandbox` (at engine start, when
    no sandbox of this workspace can be running). Returns how many were removed."""
    root = workspace / SCRATCH
    if not root.is_dir() or root.is_symlink():
        return 0
    n = 0
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
        n += 1
    return n


def prune_caches(workspace: Path, keep: Iterable[Path]) -> list[Path]:
    """Remove the per-tree caches under `<workspace>/cache` other than `keep` (a discarded
    candidate's, an old best's). Returns what was removed."""
    root = workspace / "cache"
    keep_set = {Path(os.path.realpath(k)) for k in keep}
    removed = []
    if root.is_dir():
        for child in root.iterdir():
            if Path(os.path.realpath(child)) not in keep_set:
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
                removed.append(child)
    return removed


def read_output(path: Path, max_bytes: int) -> bytes:
    """Read a file a sandboxed process could have written, safely: never through a link
    (O_NOFOLLOW), never blocking on a FIFO (O_NONBLOCK), only a regular file, at most
    `max_bytes`. Raises OSError (with the reason) otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        chunks, left = [], max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_SIDE_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_TREE_RE = re.compile(r"^[0-9a-f]{7,64}$")


def cache_dir(workspace: Path, side: str, *trees: str) -> Path:
    """The per-tree cache folder: `<workspace>/cache/<side>-<tree>[-<tree>...]`, e.g.
    `cache/best-<tree of BEST>`, `cache/cand-<tree of the candidate>`."""
    if not _SIDE_RE.match(side):
        raise ValueError(f"cache side {side!r}: use lowercase letters, digits, '_'")
    if not trees or not all(_TREE_RE.match(t) for t in trees):
        raise ValueError(f"cache key {trees!r}: git tree hashes (hex) expected")
    return workspace / "cache" / "-".join([side, *(t[:20] for t in trees)])

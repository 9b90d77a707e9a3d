"""The sandbox's side effects on the disk around a run: `prepare` makes what a confinement
binds (missing folders and files, the private copy of a worktree's git metadata) and removes
its scratch afterwards; the workspace's leftover scratch and per-tree caches are cleared;
a file a sandboxed process could have written is read safely.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from kopt_supervisor.engine.sandbox import bytecode
from kopt_supervisor.engine.sandbox.confinement import GIT_COMMON_MOUNT, Confinement, PrivateGit


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
            c = dataclasses.replace(c, library_binds=bytecode.binds(prefix, shared))
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
    `cache/best-<tree of BEST>`, `cache/cand-<tree of the candidate>`, and for an
    ab_command that loads both, `cache/ab-<best tree>-<cand tree>`."""
    if not _SIDE_RE.match(side):
        raise ValueError(f"cache side {side!r}: use lowercase letters, digits, '_'")
    if not trees or not all(_TREE_RE.match(t) for t in trees):
        raise ValueError(f"cache key {trees!r}: git tree hashes (hex) expected")
    return workspace / "cache" / "-".join([side, *(t[:20] for t in trees)])

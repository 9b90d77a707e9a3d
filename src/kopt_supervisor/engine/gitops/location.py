"""Where a worktree's repository is, checked: the explicit git dir, common dir and work tree
of every git call, found from the worktree's `.git` file and checked both ways (the admin
folder's `gitdir` must point back at this worktree, its `commondir` at the repository kopt
made it in), and the branch a worktree kopt keeps on a branch must still have checked out.

Reads a few small files without blocking or following links; runs no git.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine.errors import BadInput, KoptFailure


class GitFailure(KoptFailure):
    """A git operation failed; the message says which and why."""


@dataclass(frozen=True)
class Location:
    """The explicit repository of one git call: GIT_DIR, GIT_COMMON_DIR and the work tree."""

    git_dir: Path
    common_dir: Path
    work_tree: Path


@dataclass(frozen=True)
class _Trust:
    common_dir: Path  # realpath of the repository's git directory kopt made the worktree in
    branch: str | None  # the branch the worktree has checked out (None: a detached HEAD)


# Worktrees kopt made or re-created (add_worktrees, ensure_worktree) in this process: their
# `.git` file must lead into this repository, nowhere else.
_TRUSTED: dict[Path, _Trust] = {}


def _abs(path: str | Path) -> Path:
    return Path(os.path.abspath(path))


def _read_small(path: Path, limit: int = 65536) -> str:
    """A small regular file's text, read without blocking (a FIFO put in place of a git file
    would hang a plain read) and without following a link; OSError when it is not one."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return os.read(fd, limit).decode("utf-8", "surrogateescape").strip()
    finally:
        os.close(fd)


def _read_gitfile(dotgit: Path) -> Path:
    try:
        text = _read_small(dotgit)
    except OSError as e:
        raise GitFailure(f"{dotgit}: unreadable ({e.strerror or e})") from None
    if not text.startswith("gitdir:"):
        raise GitFailure(f"{dotgit}: not a gitdir link")
    target = Path(text.split(":", 1)[1].strip())
    return target if target.is_absolute() else _abs(dotgit.parent / target)


def _same(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _linked_worktree(work_tree: Path, common: Path | None) -> Location:
    """The admin folder of a linked worktree, checked: inside `common`/worktrees (any
    repository's when `common` is None), its `gitdir` pointing back at this worktree's `.git`
    file and its `commondir` at the repository."""
    dotgit = work_tree / ".git"
    try:
        st = os.lstat(dotgit)
    except OSError:
        raise GitFailure(f"{work_tree}: no .git file (not a worktree any more)") from None
    if not stat.S_ISREG(st.st_mode):
        raise GitFailure(
            f"{dotgit}: replaced (a {'link' if stat.S_ISLNK(st.st_mode) else 'folder'}, not the worktree's .git file)"
        )
    admin = Path(os.path.realpath(_read_gitfile(dotgit)))
    if admin.parent.name != "worktrees" or (common is not None and not _same(admin.parent, common / "worktrees")):
        where = f"a worktree of {common}" if common is not None else "a worktree's admin folder"
        raise GitFailure(f"{dotgit} links to {admin}, not to {where}")
    try:
        back = _read_small(admin / "gitdir")
        commondir = _read_small(admin / "commondir")
    except OSError:
        raise GitFailure(f"{dotgit} links to {admin}, which is not a worktree's admin folder") from None
    if not _same(back if os.path.isabs(back) else admin / back, dotgit):
        raise GitFailure(f"{dotgit} links to {admin}, which belongs to {back}")
    resolved_common = Path(os.path.realpath(admin / commondir))
    if not _same(resolved_common, admin.parent.parent) or (common is not None and not _same(resolved_common, common)):
        raise GitFailure(f"{admin}/commondir points to {resolved_common}, not to its repository")
    if resolved_common.is_relative_to(os.path.realpath(work_tree)):
        raise GitFailure(f"{dotgit} links to a repository inside the worktree itself ({resolved_common})")
    return Location(admin, resolved_common, work_tree)


def locate(path: str | Path) -> Location:
    """The checked repository of a work tree (see the module's docstring)."""
    p = _abs(path)
    trust = _TRUSTED.get(p)
    if trust is not None:
        if p.is_symlink() or not p.is_dir():
            raise GitFailure(f"{p}: replaced (a link or not a folder); kopt re-creates it")
        return _linked_worktree(p, trust.common_dir)
    dotgit = p / ".git"
    if dotgit.is_dir():
        g = Path(os.path.realpath(dotgit))
        return Location(g, g, p)  # a main worktree's git directory is its own common dir
    if dotgit.is_file():
        target = Path(os.path.realpath(_read_gitfile(dotgit)))
        if target.parent.name == "worktrees":
            return _linked_worktree(p, None)
        if not target.is_dir():
            raise BadInput(f"{p}: not a git repository ({dotgit} links to {target})")
        return Location(target, target, p)  # a submodule's checkout: its git dir is under the superproject
    raise BadInput(f"{path}: not a git repository")


def _trust(repo_path: str | Path, path: Path, branch: str | None) -> None:
    _TRUSTED[_abs(path)] = _Trust(Path(os.path.realpath(locate(repo_path).common_dir)), branch)


def _head_file(loc: Location) -> str:
    try:
        return _read_small(loc.git_dir / "HEAD")
    except OSError:
        return ""


def _check_head_branch(loc: Location) -> None:
    """A worktree kopt keeps on a branch must still have that branch checked out before a
    reset moves it: a HEAD turned to another branch (the user's) would move that one."""
    trust = _TRUSTED.get(loc.work_tree)
    head = _head_file(loc)
    if trust is None or not head.startswith("ref:"):
        return
    ref = head[4:].strip()
    if trust.branch is None or ref != f"refs/heads/{trust.branch}":
        raise GitFailure(
            f"{loc.work_tree}: HEAD points to {ref}, not to "
            f"{'a detached commit' if trust.branch is None else 'refs/heads/' + trust.branch}"
        )

"""The guards of every git call, none of which runs git: what git may run and the environment
it runs in, and where a worktree's repository is, checked.

What git may run: the settings that start a program, neutralized at the command scope (fixed
keys, and per-name keys for the names a repository's config holds), the fixed environment of
every git call, and the identity kopt commits as. Pure tables and functions of the config keys
git reads (engine.gitops.invoke applies them).

Where: the explicit git dir, common dir and work tree of every git call, found from the
worktree's `.git` file and checked both ways (the admin folder's `gitdir` must point back at
this worktree, its `commondir` at the repository kopt made it in), and the branch a worktree
kopt keeps on a branch must still have checked out. Reads a few small files without blocking
or following links.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kopt_supervisor.engine.errors import BadInput, KoptFailure


class Actor(NamedTuple):
    name: str
    email: str


KOPT_AUTHOR = Actor("kopt", "kopt@localhost")


def author_env(author: Actor = KOPT_AUTHOR) -> dict[str, str]:
    """The variables that make `author` the author and committer of a commit (kopt's own
    name or address where `author` has none)."""
    name, email = author.name or KOPT_AUTHOR.name, author.email or KOPT_AUTHOR.email
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


# Executing /dev/null fails (EACCES): a value that names no program can ever start.
NO_PROGRAM = "/dev/null"

FIXED_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", NO_PROGRAM),
    ("core.fsmonitor", "false"),
    ("core.editor", ":"),  # git treats ":" as "no editor"
    ("sequence.editor", ":"),
    ("core.pager", "cat"),  # git treats "cat" as "no pager"
    ("core.askPass", ""),
    ("core.sshCommand", NO_PROGRAM),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("interactive.diffFilter", ""),
    ("core.attributesFile", os.devnull),  # only the tree's own .gitattributes count
    ("core.bare", "false"),
    ("core.sparseCheckout", "false"),  # sparse patterns would leave files unrestored
    ("core.sparseCheckoutCone", "false"),
    ("index.sparse", "false"),
    ("core.untrackedCache", "false"),  # a forged cache could hide untracked files
    ("core.splitIndex", "false"),
    ("core.fileMode", "true"),  # a mode change must show
    ("core.symlinks", "true"),
    ("core.ignoreCase", "false"),
    ("core.trustctime", "true"),  # ctime cannot be set back by a process: stat checks hold
    ("core.checkStat", "default"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.useReplaceRefs", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("tag.forceSignAnnotated", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("gpg.format", "openpgp"),
    ("gpg.program", NO_PROGRAM),
    ("gpg.openpgp.program", NO_PROGRAM),
    ("gpg.x509.program", NO_PROGRAM),
    ("gpg.ssh.program", NO_PROGRAM),
    ("gpg.ssh.defaultKeyCommand", NO_PROGRAM),
    ("diff.external", ""),
    ("diff.tool", ""),
    ("diff.guitool", ""),
    ("merge.tool", ""),
    ("merge.guitool", ""),
    ("diff.ignoreSubmodules", "dirty"),  # never run git inside a nested repository
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
    ("color.ui", "false"),
    ("status.submoduleSummary", "false"),
    ("status.showUntrackedFiles", "normal"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("credential.helper", ""),  # an empty value clears the list of helpers
    ("protocol.allow", "never"),  # no transport at all: no ssh, proxy, remote helper
    ("uploadpack.packObjectsHook", ""),
    ("gc.auto", "0"),  # no background gc or maintenance started by a commit
    ("gc.autoDetach", "false"),
    ("maintenance.auto", "false"),
    ("init.templateDir", ""),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.detachedHead", "false"),
)

# (section, key) of `section.<name>.key` entries that hold a program, and the neutral value.
PER_NAME_OVERRIDES: dict[tuple[str, str], str] = {
    ("filter", "clean"): "",  # an empty driver command is no command: content passes as is
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",
    ("diff", "command"): "",
    ("diff", "textconv"): "",
    ("merge", "driver"): "",
    ("difftool", "cmd"): "",
    ("difftool", "path"): "",
    ("mergetool", "cmd"): "",
    ("mergetool", "path"): "",
    ("credential", "helper"): "",
    ("remote", "uploadpack"): "",
    ("remote", "receivepack"): "",
    ("remote", "vcs"): "",
    ("remote", "proxy"): "",
    ("protocol", "allow"): "never",
    ("gpg", "program"): NO_PROGRAM,
    ("hook", "command"): "",
    ("browser", "cmd"): "",
    ("browser", "path"): "",
    ("man", "cmd"): "",
    ("man", "path"): "",
    ("submodule", "update"): "none",
}

# Key names (the part after the last dot, lowercased) that say the value is a program, for
# sections and names kopt cannot know in advance.
PROGRAM_KEY_SUFFIXES = (
    "command",
    "cmd",
    "program",
    "helper",
    "driver",
    "textconv",
    "askpass",
    "editor",
    "pager",
    "browser",
    "hook",
    "uploadpack",
    "receivepack",
)

# Environment variables set for every git call (after every GIT_* of kopt's own is dropped).
FIXED_ENV = {
    "LC_ALL": "C",
    "LANGUAGE": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_PAGER": "cat",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_GRAFT_FILE": os.devnull,  # no info/grafts rewriting history
}


def config_overrides(entries: Sequence[str]) -> dict[str, str]:
    """The command-scope settings that neutralize every program-running setting, given the
    config keys git reads (as `git config --list` writes them: section and key lowercased,
    the subsection as written)."""
    out = dict(FIXED_OVERRIDES)
    fixed = {k.lower() for k in out}
    for key in entries:
        section, _, rest = key.partition(".")
        section = section.lower()
        sub, dot, name = rest.rpartition(".")
        name = name.lower()
        if key.lower() in fixed:
            continue
        if section == "pager" and not dot:
            out[key] = "false"
        elif dot and (section, name) in PER_NAME_OVERRIDES:
            out[key] = PER_NAME_OVERRIDES[(section, name)]
        elif name.endswith(PROGRAM_KEY_SUFFIXES):
            out[key] = ""
    return out


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

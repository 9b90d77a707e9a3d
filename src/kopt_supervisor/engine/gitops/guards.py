"""What kopt knows of git without running it: the guards of every git call (what git may run
and the environment it runs in, and where a worktree's repository is, checked), and an index
file's entries read from the file itself.

What git may run: the settings that start a program, neutralized at the command scope (fixed
keys, and per-name keys for the names a repository's config holds), the fixed environment of
every git call, and the identity kopt commits as. Pure tables and functions of the config keys
git reads (engine.gitops.invoke applies them).

Where: the explicit git dir, common dir and work tree of every git call, found from the
worktree's `.git` file and checked both ways (the admin folder's `gitdir` must point back at
this worktree, its `commondir` at the repository kopt made it in), and the branch a worktree
kopt keeps on a branch must still have checked out. Reads a few small files without blocking
or following links.

The index file: its entries' paths, modes and flags, read without starting git.

Only the plain file git writes is read here: versions 2 to 4, a trailing checksum that
verifies with the repository's hash, entries in git's order with the modes git writes, and no
extension that changes what the entries are. Everything else (a split index, a sparse index,
an end-of-entries or offset table that git may read the entries by instead, an extension git
would refuse, a link or FIFO in the file's place, a truncated or padded file) answers None,
and the caller asks git (`git ls-files`), which then reads the file as it always did. So an
answer from here is the one git would give; it only saves the process.

git's reader (read-cache.c, `do_read_index` and `create_from_disk`, unchanged from 2.31 to
2.5x) is the reference: each entry's 16-bit flags hold assume-valid (0x8000), extended
(0x4000), the stage and the name's length; the extended flags (version 3 and later) hold
skip-worktree (0x4000) and intent-to-add (0x2000), and any other bit makes git die; a version
4 name strips bytes from the end of the previous one and appends its own. git does not verify
the checksum when it reads: a file whose checksum does not verify is one kopt did not see git
write, so git is asked."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kopt_supervisor.engine import BadInput, KoptFailure
from kopt_supervisor.engine.sandbox.paths import read_output


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


# The index file

MAX_BYTES = 64 << 20
"""A larger index is left to git (a repository of a million files)."""

_HASHES = {20: hashlib.sha1, 32: hashlib.sha256}
_MODES = frozenset({0o100644, 0o100755, 0o120000, 0o160000})
# optional extensions (an upper-case first letter) that do not change the entries: the cache
# tree, resolve-undo, the untracked cache and the fsmonitor's data (kopt turns both off)
_EXTENSIONS = frozenset({b"TREE", b"REUC", b"UNTR", b"FSMN"})
_EOIE_WITH_HEADER = 4 + 4 + 4 + 20  # "EOIE", its size, an offset and a SHA-1, whatever the repository's hash
_NAMEMASK = 0x0FFF
_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_SKIP_WORKTREE = 0x4000  # of the extended flags
_INTENT_TO_ADD = 0x2000


@dataclass(frozen=True)
class Entry:
    path: str  # as git prints it with -z (surrogate-escaped)
    mode: int
    stage: int
    assume_valid: bool
    skip_worktree: bool

    @property
    def flagged(self) -> bool:
        """What `git ls-files -v` tags `S` (skip-worktree, stage 0) or in lower case (assume-valid)."""
        return self.assume_valid or (self.skip_worktree and self.stage == 0)


def read_index(path: str | Path, rawsz: int | None = None) -> list[Entry] | None:
    """The entries of the index file at `path`, or None where git must be asked (see the
    module's docstring). `rawsz`: the repository's hash size (20 for SHA-1, 32 for SHA-256);
    None accepts the one hash whose checksum verifies."""
    data = _read(Path(path))
    if data is None:
        return None
    size = _verified_hash_size(data, rawsz)
    if size is None:
        return None
    return _parse(data, size)


def _read(path: Path) -> bytes | None:
    """The file's bytes, read as any file another process could have written
    (sandbox.paths.read_output: no link, no FIFO, regular files only); None past MAX_BYTES."""
    try:
        data = read_output(path, MAX_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_BYTES else None


def _verified_hash_size(data: bytes, rawsz: int | None) -> int | None:
    sizes = [rawsz] if rawsz is not None else list(_HASHES)
    ok = [
        n
        for n in sizes
        if n in _HASHES and len(data) >= 12 + n and _HASHES[n](data[: len(data) - n]).digest() == data[len(data) - n :]
    ]
    return ok[0] if len(ok) == 1 else None


def _varint(data: bytes, p: int, end: int) -> tuple[int, int] | None:
    """git's offset varint (varint.c); None where git's own decoding would overflow."""
    if p >= end:
        return None
    c = data[p]
    p += 1
    val = c & 127
    while c & 128:
        val += 1
        if val >= 1 << 32 or p >= end:
            return None
        c = data[p]
        p += 1
        val = (val << 7) + (c & 127)
    return val, p


def _parse(data: bytes, rawsz: int) -> list[Entry] | None:
    end = len(data) - rawsz
    if data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    tail = end - _EOIE_WITH_HEADER
    if tail >= 12 and data[tail : tail + 4] == b"EOIE":
        return None  # git may read the extensions, and then the entries, from where it says
    fixed = 40 + rawsz + 2  # stat data, mode, ids, sizes; the object id; the flags
    entries: list[Entry] = []
    prev = b""
    off = 12
    for i in range(count):
        if off + fixed > end:
            return None
        mode = int.from_bytes(data[off + 24 : off + 28], "big")
        flags = int.from_bytes(data[off + fixed - 2 : off + fixed], "big")
        p = off + fixed
        extended = 0
        if flags & _EXTENDED:
            if version < 3 or p + 2 > end:
                return None
            extended = int.from_bytes(data[p : p + 2], "big")
            p += 2
            if extended & ~(_SKIP_WORKTREE | _INTENT_TO_ADD):
                return None  # git dies: "unknown index entry format"
        length = flags & _NAMEMASK
        if version == 4:
            got = _varint(data, p, end)
            if got is None:
                return None
            strip, p = got
            if i and strip > len(prev):
                return None  # git dies: "malformed name field"
            copy = len(prev) - strip if i else 0
            nul = data.find(b"\0", p, end)
            if nul < 0:
                return None
            name = prev[:copy] + data[p:nul]
            off = nul + 1
        else:
            if length == _NAMEMASK:
                nul = data.find(b"\0", p, end)
                if nul < 0:
                    return None
            else:
                nul = p + length
                if nul >= end or data[nul] != 0:
                    return None
            name = data[p:nul]
            off += (fixed + (2 if flags & _EXTENDED else 0) + len(name) + 8) & ~7
            if off > end:
                return None
        if (length == _NAMEMASK and len(name) < _NAMEMASK) or (length != _NAMEMASK and len(name) != length):
            return None  # a length that does not match the name: git would read another name
        if not name or b"\0" in name or mode not in _MODES:
            return None
        stage = (flags >> 12) & 3
        if i and (prev > name or (prev == name and (entries[-1].stage == 0 or entries[-1].stage >= stage))):
            return None  # out of git's order
        entries.append(
            Entry(
                name.decode("utf-8", "surrogateescape"),
                mode,
                stage,
                bool(flags & _ASSUME_VALID),
                bool(extended & _SKIP_WORKTREE),
            )
        )
        prev = name
    while off < end:  # the extensions
        if off + 8 > end or data[off : off + 4] not in _EXTENSIONS:
            return None
        off += 8 + int.from_bytes(data[off + 4 : off + 8], "big")
    return entries if off == end else None

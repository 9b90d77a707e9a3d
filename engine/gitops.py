"""Every git call kopt makes, in one place, and none of them runs a program a repository names.

The run's branch `kopt/TAG` is checked out in `best/` and always sits at BEST_COMMIT; the
candidate worktree `cand/` is a detached HEAD that the proposer edits. A keep is a commit
made in `cand/` (parent BEST_COMMIT, HEAD moved without touching any branch) to which
`best/`'s branch is then fast-forwarded by a reset.

git without surprises. A proposer controls the candidate's tree and may reach the repository's
git directory (its config, config.worktree, index, HEAD, the worktree's `.git` file). So every
call here:

- runs `git` directly (subprocess) with an environment of kopt's making: no `GIT_*` variable
  of kopt's own environment passes (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG_*,
  GIT_EXEC_PATH, GIT_SSH_COMMAND, ...), editors, pager and askpass are disabled, replace refs
  are ignored, system attributes are not read;
- names the repository explicitly (`--git-dir`, `--work-tree`, GIT_COMMON_DIR), found from
  the worktree's `.git` file and checked both ways (the admin folder's `gitdir` must point back
  at this worktree, its `commondir` at the repository kopt made it in): `core.worktree`,
  `core.bare`, a planted `commondir` or a `.git` file redirected to another repository never
  move a reset or a clean onto another folder;
- overrides, at the command scope (GIT_CONFIG_COUNT/KEY/VALUE, which beats every config
  file and carries into any git that git starts), every setting that runs a program: fixed
  keys (hooks, fsmonitor, signing and its programs, editors, pager, askpass, ssh command,
  proxies, credential helpers, diff.external, transports, auto-gc, attributes file, ...) and
  per-name keys (filter.<name>.clean/smudge/process, diff.<name>.textconv/command,
  merge.<name>.driver, credential.<url>.helper, remote.<name>.uploadpack, pager.<cmd>, and
  any key whose name says it holds a program) for every name found in the config as git
  reads it, includes and worktree config included. That listing is cached per repository
  and re-read when any config file it came from (or an include target) changes;
- never trusts a worktree's index for what it reports or commits: resets, staging and
  commits rebuild the index from a tree first (skip-worktree and assume-unchanged bits,
  forged stat data and sparse patterns do not survive), and diffs are computed on a scratch
  index; paths given to git are literal (no pathspec magic), submodules are never entered.

GitPython is not used: its `Git.execute` starts from `os.environ` (no way to drop a variable)
and its `Repo` reads the config and runs `git cat-file` without these guards.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

from kopt_supervisor.engine.errors import BadInput, KoptError, KoptFailure


class Actor(NamedTuple):
    name: str
    email: str


KOPT_AUTHOR = Actor("kopt", "kopt@localhost")

# A git call that runs longer than this is killed (a config include pointing at a FIFO, a
# hung filesystem): the caller gets a GitFailure instead of an engine that never returns.
TIMEOUT_S = 600.0


class GitFailure(KoptFailure):
    """A git operation failed; the message says which and why."""


# ---------------------------------------------------------------------------------------
# What git may run: neutralized at the command scope.

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
PROGRAM_KEY_SUFFIXES = ("command", "cmd", "program", "helper", "driver", "textconv", "askpass", "editor",
                        "pager", "browser", "hook", "uploadpack", "receivepack")

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


# ---------------------------------------------------------------------------------------
# Where a worktree's repository is, checked.


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
        raise GitFailure(f"{dotgit}: replaced (a {'link' if stat.S_ISLNK(st.st_mode) else 'folder'}, "
                         "not the worktree's .git file)")
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
        raise GitFailure(f"{loc.work_tree}: HEAD points to {ref}, not to "
                         f"{'a detached commit' if trust.branch is None else 'refs/heads/' + trust.branch}")


# ---------------------------------------------------------------------------------------
# Running git.


# GIT_CONFIG_COUNT/KEY/VALUE (the command-scope overrides, with any character in a key) came
# with git 2.31; an older git would ignore them silently, so kopt refuses to run it.
MIN_GIT = (2, 31)
_GIT_FOUND: dict[str, str] = {}


def git_version(program: str) -> tuple[int, ...]:
    res = subprocess.run([program, "--version"], env=_base_env(), capture_output=True, text=True, check=False,
                         stdin=subprocess.DEVNULL, timeout=60)
    m = re.search(r"git version (\d+)\.(\d+)", res.stdout)
    if res.returncode != 0 or m is None:
        raise KoptFailure(f"{program} --version did not say which git it is: {res.stdout.strip() or res.stderr.strip()}")
    return int(m.group(1)), int(m.group(2))


def _git_program() -> str:
    found = shutil.which("git")
    if found is None:
        raise KoptFailure("git is not installed (no `git` on PATH)")
    if found not in _GIT_FOUND:
        version = git_version(found)
        if version < MIN_GIT:
            raise KoptFailure(f"{found} is git {'.'.join(map(str, version))}; kopt needs git "
                              f"{'.'.join(map(str, MIN_GIT))} or newer (to neutralize a repository's programs)")
        _GIT_FOUND[found] = ".".join(map(str, version))
    return found


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(FIXED_ENV)
    return env


def _config_files(loc: Location) -> set[str]:
    """The config files git reads for this location (whether they exist or not)."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return {str(p) for p in (loc.common_dir / "config", loc.git_dir / "config.worktree",
                             loc.common_dir / "config.worktree", home / ".gitconfig", xdg / "git" / "config",
                             Path("/etc/gitconfig"))}


def _stamp(files: set[str], loc: Location) -> tuple[object, ...]:
    out: list[object] = []
    for f in sorted(files):
        try:
            st = os.stat(f)
            out.append((f, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        except OSError:
            out.append((f, None))
    out.append(_head_file(loc))  # includeIf "onbranch:" depends on it
    return tuple(out)


@dataclass
class _CachedConfig:
    files: set[str]
    stamp: tuple[object, ...]
    overrides: dict[str, str]


_CONFIG: dict[tuple[Path, Path], _CachedConfig] = {}


def _list_config(loc: Location) -> tuple[list[str], set[str]]:
    """The keys of every config entry git reads here, and the files they come from or that
    includes name."""
    env = _base_env()
    env["GIT_COMMON_DIR"] = str(loc.common_dir)
    env.update(_env_config(dict(FIXED_OVERRIDES)))
    argv = [_git_program(), "--no-pager", f"--git-dir={loc.git_dir}", f"--work-tree={loc.work_tree}",
            "config", "--list", "-z", "--show-scope", "--show-origin"]
    res = _exec(argv, loc, env, None)
    if res.returncode != 0:
        raise GitFailure(f"git config --list in {loc.work_tree}: {_last_line(res.stderr, res.returncode)}")
    parts = res.stdout.decode("utf-8", "surrogateescape").split("\0")
    keys: list[str] = []
    files: set[str] = set()
    for i in range(0, len(parts) - 2, 3):
        origin, entry = parts[i + 1], parts[i + 2]
        key, _, value = entry.partition("\n")
        keys.append(key)
        where = Path(origin[5:]) if origin.startswith("file:") else None
        if where is not None:
            where = where if where.is_absolute() else loc.work_tree / where
            files.add(os.path.abspath(where))
        low = key.lower()
        if where is not None and value and (low == "include.path" or (low.startswith("includeif.") and low.endswith(".path"))):
            target = Path(os.path.expanduser(value))
            files.add(os.path.abspath(target if target.is_absolute() else where.parent / target))
    return keys, files


def _overrides(loc: Location) -> dict[str, str]:
    key = (loc.git_dir, loc.work_tree)
    cached = _CONFIG.get(key)
    guess = _config_files(loc) | (cached.files if cached else set())
    before = _stamp(guess, loc)
    if cached is not None and cached.stamp == before:
        return cached.overrides
    keys, files = _list_config(loc)
    overrides = config_overrides(keys)
    if files <= guess and _stamp(guess, loc) == before:
        _CONFIG[key] = _CachedConfig(guess, before, overrides)
    else:  # a file appeared (an include) or changed meanwhile: list again next time
        _CONFIG[key] = _CachedConfig(guess | files, (), overrides)
    return overrides


def _env_config(overrides: dict[str, str]) -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(overrides))}
    for i, (k, v) in enumerate(overrides.items()):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = v
    return env


def _exec(argv: list[str], loc: Location, env: dict[str, str], stdin: BinaryIO | None,
          timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, cwd=loc.work_tree, env=env, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GitFailure(f"git {' '.join(argv[5:7])} in {loc.work_tree}: no answer in {timeout:.0f} s") from None
    except OSError as e:
        raise GitFailure(f"git in {loc.work_tree}: {e}") from None


def _last_line(stderr: bytes, rc: int) -> str:
    lines = [ln for ln in stderr.decode("utf-8", "replace").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {rc}"


def run_at(loc: Location, *args: str, env: dict[str, str] | None = None, stdin: BinaryIO | None = None,
           ok: Sequence[int] = (0,), literal: bool = True, label: str | Path | None = None) -> str:
    """Run `git args` at an explicit location with every guard of this module; returns its
    stdout (surrogate-escaped, one trailing newline stripped). Exit codes outside `ok` raise
    GitFailure with git's last line of error."""
    full_env = _base_env()
    full_env["GIT_COMMON_DIR"] = str(loc.common_dir)
    full_env.update(_env_config(_overrides(loc)))
    if env:
        full_env.update(env)
    argv = [_git_program(), "--no-pager", f"--git-dir={loc.git_dir}", f"--work-tree={loc.work_tree}",
            "--literal-pathspecs" if literal else "--no-literal-pathspecs", *args]
    res = _exec(argv, loc, full_env, stdin)
    if res.returncode not in ok:
        raise GitFailure(f"git {' '.join(args[:2])} in {label or loc.work_tree}: {_last_line(res.stderr, res.returncode)}")
    out = res.stdout.decode("utf-8", "surrogateescape")
    return out[:-1] if out.endswith("\n") else out


def _git(path: str | Path, *args: str, env: dict[str, str] | None = None, stdin: BinaryIO | None = None,
         ok: Sequence[int] = (0,)) -> str:
    return run_at(locate(path), *args, env=env, stdin=stdin, ok=ok, label=path)


def _split0(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


# A folder only kopt writes (0700, in kopt's own temp dir, gone at exit) for index files that
# never belong to a worktree: scratch indexes and the reference indexes of treecheck.
_PRIVATE: list[Path] = []


_PRIVATE_LOCK = threading.Lock()  # lanes check their trees from threads of their own


def private_dir() -> Path:
    with _PRIVATE_LOCK:
        if not _PRIVATE:
            d = Path(tempfile.mkdtemp(prefix="kopt-git-"))
            atexit.register(shutil.rmtree, d, True)
            _PRIVATE.append(d)
        return _PRIVATE[0]


@contextlib.contextmanager
def _scratch_index(loc: Location, base: str) -> Iterator[dict[str, str]]:
    """An index file of kopt's own holding `base`'s tree (no stat data: every file is hashed)."""
    fd, name = tempfile.mkstemp(prefix="scratch-", suffix=".index", dir=private_dir())
    os.close(fd)
    os.unlink(name)
    env = {"GIT_INDEX_FILE": name}
    try:
        run_at(loc, "read-tree", base, env=env)
        yield env
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def _rebuild_index(loc: Location, treeish: str) -> None:
    """Replace the worktree's index by `treeish`'s entries (no flags, no stat data, no sparse
    or split state) and refresh it by content."""
    run_at(loc, "read-tree", treeish)
    run_at(loc, "update-index", "-q", "--refresh", "--ignore-submodules", ok=(0, 1))


def index_flagged(path: str | Path) -> list[str]:
    """Entries of the worktree's own index marked skip-worktree or assume-unchanged: git's
    status and diff stop looking at those files, so any of them is suspect."""
    out = _git(path, "ls-files", "-v", "-z")
    return [e[2:] for e in out.split("\0") if len(e) > 2 and (e[0] == "S" or e[0].islower())]


# ---------------------------------------------------------------------------------------
# The repository and its worktrees.


def toplevel(path: str | Path) -> Path:
    p = _abs(path)
    if p.name == ".git" and p.is_dir():
        p = p.parent
    if not (p / ".git").exists():
        if (p / "HEAD").is_file() and (p / "objects").is_dir():
            raise BadInput(f"{path}: a bare repository has no working tree")
        raise BadInput(f"{path}: not a git repository")
    try:
        _git(p, "rev-parse", "--git-dir")
    except GitFailure as e:
        raise BadInput(f"{path}: not a usable git repository ({e})") from None
    return p


def head(path: str | Path) -> str:
    sha = _git(path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok=(0, 1))
    if not sha:
        raise BadInput(f"{path}: the repository has no commit yet")
    return sha


def branch_sha(path: str | Path, branch: str) -> str | None:
    sha = _git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", ok=(0, 1))
    return sha or None


def commit_info(path: str | Path, sha: str) -> tuple[list[str], str]:
    """(parent shas, tree sha) of a commit."""
    text = _git(path, "cat-file", "commit", sha)
    parents, tree = [], ""
    for line in text.split("\n"):
        if not line:
            break
        field, _, value = line.partition(" ")
        if field == "tree":
            tree = value
        elif field == "parent":
            parents.append(value)
    return parents, tree


def dirty_tracked(path: str | Path) -> list[str]:
    """Tracked files changed in the index or working tree, relative to the repo root, and
    the index entries flagged so that git would not look at them."""
    out = _git(path, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=dirty", "-z")
    return _unique([*_porcelain_paths(out), *index_flagged(path)])


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def untracked(path: str | Path, *, ignored_too: bool = False) -> list[str]:
    """Untracked files (not ignored ones, unless `ignored_too`)."""
    out = _git(path, "ls-files", "--others", "-z", *(() if ignored_too else ("--exclude-standard",)))
    return _split0(out)


def _porcelain_paths(out: str) -> list[str]:
    paths: list[str] = []
    parts = out.split("\0")
    i = 0
    while i < len(parts):
        entry = parts[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename's source follows
                i += 1
        i += 1
    return paths


def matching(paths: list[str], globs: list[str]) -> list[str]:
    return sorted({p for p in paths for g in globs if fnmatch.fnmatch(p, g) or p == g.rstrip("/") or p.startswith(g.rstrip("/") + "/")})


def clear_stale_lock(worktree: str | Path) -> list[str]:
    """Remove leftover lock files of this worktree (a git killed mid-write, a power loss):
    its index.lock and HEAD.lock, and the lock of the branch it has checked out. Only the
    engine runs git in a run's worktrees and on its branch, so a lock present before the
    engine's own call is stale. Returns the locks removed (none when the worktree's `.git`
    does not lead into its repository: nothing outside it is touched)."""
    try:
        loc = locate(worktree)
    except KoptError:
        return []
    locks = [loc.git_dir / "index.lock", loc.git_dir / "HEAD.lock"]
    head_ref = _head_file(loc)
    if head_ref.startswith("ref: refs/heads/"):
        lock = Path(os.path.abspath(loc.common_dir / (head_ref[5:] + ".lock")))
        if lock.is_relative_to(loc.common_dir / "refs" / "heads"):
            locks.append(lock)
    removed = []
    for lock in locks:
        try:
            if lock.is_symlink() or lock.is_file():
                lock.unlink()
                removed.append(str(lock))
        except FileNotFoundError:
            pass
    return removed


def add_worktrees(repo_path: str | Path, branch: str, best: Path, cand: Path, commit: str) -> None:
    if branch_sha(repo_path, branch) is not None:
        raise BadInput(f"branch {branch!r} already exists in {repo_path}; choose another tag")
    _git(repo_path, "worktree", "add", "-b", branch, str(best), commit)
    _git(repo_path, "worktree", "add", "--detach", str(cand), commit)
    _trust(repo_path, best, branch)
    _trust(repo_path, cand, None)


def ensure_worktree(repo_path: str | Path, path: Path, *, branch: str | None, commit: str) -> bool:
    """Make `path` a worktree of `repo_path` again if it is not one any more: the folder
    deleted by hand or replaced by a link, its `.git` file missing, replaced, or leading to
    another repository or another worktree's admin folder. The folder is kopt's own: what
    is left in it is a discarded candidate, removed (a link is removed, never followed).
    A HEAD turned to another branch (or, for the detached worktree, to any branch) is put
    back. Returns True when it had to repair anything. From now on every call on `path`
    requires its `.git` to lead into `repo_path`."""
    path = _abs(path)
    _trust(repo_path, path, branch)
    try:
        loc = locate(path)
    except KoptFailure:
        loc = None
    if loc is not None:
        head_ref = _head_file(loc)
        if branch is not None and head_ref == f"ref: refs/heads/{branch}":
            return False
        if branch is None and not head_ref.startswith("ref:") and head_ref:
            return False
        if branch is not None:
            run_at(loc, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
        else:
            run_at(loc, "update-ref", "--no-deref", "HEAD", commit)
        return True
    _check_admin_folders(repo_path)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    _git(repo_path, "worktree", "prune")
    if branch:
        _git(repo_path, "worktree", "add", "--force", str(path), branch)
    else:
        _git(repo_path, "worktree", "add", "--force", "--detach", str(path), commit)
    return True


def _check_admin_folders(repo_path: str | Path) -> None:
    """`git worktree prune` reads every worktree's admin files; one that is not a regular file
    (a FIFO) would hang it. Refused loudly instead."""
    folder = locate(repo_path).common_dir / "worktrees"
    try:
        admins = list(folder.iterdir())
    except OSError:
        return
    for admin in admins:
        for name in ("gitdir", "commondir", "HEAD", "locked"):
            try:
                mode = os.lstat(admin / name).st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):
                raise GitFailure(f"{admin / name} is not a regular file (tampered); remove the folder {admin}")


def reset_clean(worktree: str | Path, commit: str, *, detach: bool = False) -> None:
    """Put a worktree exactly at `commit`: tracked files reset (whatever its index claimed),
    untracked and ignored files removed, nested repositories too. `detach` moves HEAD to the
    commit without touching any branch; otherwise the branch the worktree has checked out
    moves (it must be the one kopt gave it)."""
    clear_stale_lock(worktree)
    loc = locate(worktree)
    if detach:
        run_at(loc, "update-ref", "--no-deref", "-m", "kopt: reset", "HEAD", commit)
    else:
        _check_head_branch(loc)
    _rebuild_index(loc, commit)
    run_at(loc, "reset", "--hard", "--quiet", commit)
    run_at(loc, "clean", "-ffdxq")


def move_change(worktree: str | Path, old_base: str, tree: str, new_base: str) -> bool:
    """Put the change from `old_base` to `tree` (the staged candidate) on `new_base`: the
    worktree is reset to `new_base` (detached) and the patch applied to files and index.
    False, with the worktree left at `new_base`, when the patch no longer applies there."""
    loc = locate(worktree)
    with tempfile.NamedTemporaryFile(dir=private_dir(), prefix="kopt-move-", suffix=".patch") as patch:
        run_at(loc, "diff", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
               "--src-prefix=a/", "--dst-prefix=b/", f"--output={patch.name}", old_base, tree)
        reset_clean(worktree, new_base, detach=True)
        if os.path.getsize(patch.name) == 0:
            return True
        try:
            run_at(loc, "apply", "--binary", "--index", "--whitespace=nowarn", patch.name)
        except GitFailure:
            reset_clean(worktree, new_base, detach=True)
            return False
    return True


def unstaged_changes(worktree: str | Path) -> list[str]:
    """Tracked files whose working copy differs from the index (and index entries flagged so
    that git would not look). kopt stages the candidate before timing it, so anything listed
    here was written by the bench itself."""
    out = _git(worktree, "diff", "--name-only", "-z", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")
    return _unique([*_split0(out), *index_flagged(worktree)])


def restore_from_index(worktree: str | Path) -> None:
    """Undo what a bench wrote into tracked files (the staged candidate is kept)."""
    loc = locate(worktree)
    _rebuild_index(loc, run_at(loc, "write-tree"))
    run_at(loc, "checkout", "--force", "--", ".")


def changed_files(worktree: str | Path, base: str) -> list[str]:
    """Files the candidate changes against `base`: tracked diffs and new untracked (not
    ignored) files, from the files themselves (a scratch index, not the worktree's)."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        out = run_at(loc, "diff", "--cached", "--name-only", "--no-renames", "-z", "--ignore-submodules=dirty",
                     base, env=env)
    return sorted(_split0(out))


def diff(worktree: str | Path, base: str, *, max_bytes: int = 2_000_000, force: Sequence[str] = ()) -> str:
    """The candidate's patch against `base` (new untracked files included, and the ignored
    files named in `force`), computed on a scratch index: the worktree's index is untouched."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        _add_forced(loc, force, env)
        text = run_at(loc, "diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
                      "--ignore-submodules=dirty", base, env=env)
    return text[:max_bytes]


def scan_diff(worktree: str | Path, base: str, *, force: Sequence[str] = (),
              max_bytes: int = 64 * 2**20) -> tuple[str, bool]:
    """The candidate's whole patch against `base` for the diff scan (engine/diffscan): fixed
    `a/` `b/` prefixes whatever the user's config says, no renames, new and `force`d ignored
    files included; (text, truncated) with the text cut at `max_bytes`."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        _add_forced(loc, force, env)
        text = run_at(loc, "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false", "diff", "--cached",
                      "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--src-prefix=a/",
                      "--dst-prefix=b/", "--ignore-submodules=dirty", base, env=env)
    return text[:max_bytes], len(text) > max_bytes


def _add(loc: Location, how: str, env: dict[str, str] | None = None) -> None:
    """`git add --all` or `--update`, leaving out the gitlinks the index holds: to see whether
    a nested repository is dirty, add starts git inside it, where that repository's own
    config (filters by names kopt never saw) would run."""
    gitlinks = [e.partition("\t")[2] for e in _split0(run_at(loc, "ls-files", "-s", "-z", env=env))
                if e.startswith("160000 ")]
    if not gitlinks:
        run_at(loc, "add", how, env=env)
        return
    with tempfile.TemporaryFile() as spec:
        spec.write(b"".join(b":(exclude,literal)" + p.encode("utf-8", "surrogateescape") + b"\0" for p in gitlinks))
        spec.seek(0)
        run_at(loc, "add", how, "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=spec, literal=False)


def _add_forced(loc: Location, paths: Sequence[str], env: dict[str, str] | None = None) -> None:
    if not paths:
        return
    with tempfile.TemporaryFile() as spec:
        spec.write(b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths))
        spec.seek(0)
        run_at(loc, "add", "--force", "--all", "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=spec)


def stage_all_tree(worktree: str | Path, *, force: Sequence[str] = ()) -> str:
    """Stage the candidate (HEAD's tree, every change on disk, new files that are not ignored,
    and the ignored files named in `force`) in a fresh index and return the tree sha it would
    commit (recorded before a commit, so a crash between commit and bookkeeping can be
    recognised and adopted). Whatever the worktree's index held before does not count."""
    loc = locate(worktree)
    _rebuild_index(loc, "HEAD")
    _add(loc, "--all")
    _add_forced(loc, force)
    return run_at(loc, "write-tree")


def stage_tracked_tree(worktree: str | Path) -> str:
    """Update the index from the working copy of the files it already holds (the staged
    candidate, after formatting) without picking up new untracked files (bench outputs);
    return the tree it would commit. Each file is hashed again: stat data or flags in the
    index cannot make a changed file look unchanged."""
    loc = locate(worktree)
    _rebuild_index(loc, run_at(loc, "write-tree"))
    _add(loc, "--update")
    return run_at(loc, "write-tree")


def remove_untracked(worktree: str | Path) -> None:
    """Delete untracked files that are not ignored (what a bench wrote beside the staged
    candidate), nested repositories included; ignored build caches stay."""
    _git(worktree, "clean", "-ffdq")


def remove_ignored(worktree: str | Path, *, keep: Sequence[str] = ()) -> list[str]:
    """Delete the ignored files that the ignore rules hide (build caches, compiled files),
    except those matching the globs in `keep`. Returns the paths removed."""
    loc = locate(worktree)
    if not keep:
        doomed = _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"))
        run_at(loc, "clean", "-ffdXq")
        return doomed
    ignored = _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z"))
    kept = set(matching(ignored, list(keep)))
    doomed = [p for p in ignored if p not in kept]
    for i in range(0, len(doomed), 200):
        run_at(loc, "clean", "-ffdXq", "--", *doomed[i:i + 200])
    return doomed


def commit(worktree: str | Path, message: str) -> str:
    """Commit the staged candidate as kopt and move the worktree's HEAD to it without
    touching any branch (commit-tree, then update-ref --no-deref): no hook, no signing, no
    status of nested repositories; a HEAD pointed at someone's branch moves nothing."""
    loc = locate(worktree)
    tree = stage_tracked_tree(worktree)
    parent = head(worktree)
    env = {"GIT_AUTHOR_NAME": KOPT_AUTHOR.name, "GIT_AUTHOR_EMAIL": KOPT_AUTHOR.email,
           "GIT_COMMITTER_NAME": KOPT_AUTHOR.name, "GIT_COMMITTER_EMAIL": KOPT_AUTHOR.email}
    sha = run_at(loc, "commit-tree", "--no-gpg-sign", "-p", parent, "-m", message, tree, env=env)
    run_at(loc, "update-ref", "--no-deref", "-m", "kopt: keep", "HEAD", sha, parent)
    return sha


def init_repo(path: Path, message: str) -> str:
    """A fresh repository with everything in `path` committed (used by `kopt demo`)."""
    env = _base_env()
    env.update(_env_config(dict(FIXED_OVERRIDES)))
    res = subprocess.run([_git_program(), "init", "--quiet", str(path)], env=env, capture_output=True, check=False,
                         stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    if res.returncode != 0:
        raise GitFailure(f"git init in {path}: {_last_line(res.stderr, res.returncode)}")
    _git(path, "config", "user.name", "kopt demo")
    _git(path, "config", "user.email", "kopt@localhost")
    _git(path, "add", "--all")
    tree = _git(path, "write-tree")
    env = {"GIT_AUTHOR_NAME": KOPT_AUTHOR.name, "GIT_AUTHOR_EMAIL": KOPT_AUTHOR.email,
           "GIT_COMMITTER_NAME": KOPT_AUTHOR.name, "GIT_COMMITTER_EMAIL": KOPT_AUTHOR.email}
    sha = _git(path, "commit-tree", "--no-gpg-sign", "-m", message, tree, env=env)
    _git(path, "update-ref", "HEAD", sha)  # HEAD names the initial branch, which is created
    return sha


def bundle_pair(repo_path: str | Path, best: str, tree: str, *, ref: str) -> tuple[bytes, str]:
    """A git bundle that carries BEST and the candidate (the staged `tree`, committed on BEST
    under the private `ref`, deleted again): what a lane on another host checks out. Returns
    the bundle's bytes and the candidate commit."""
    env = {"GIT_AUTHOR_NAME": KOPT_AUTHOR.name, "GIT_AUTHOR_EMAIL": KOPT_AUTHOR.email,
           "GIT_COMMITTER_NAME": KOPT_AUTHOR.name, "GIT_COMMITTER_EMAIL": KOPT_AUTHOR.email}
    cand = _git(repo_path, "commit-tree", "--no-gpg-sign", "-p", best, "-m", "kopt: a lane's candidate", tree, env=env)
    _git(repo_path, "update-ref", ref, cand)
    try:
        with tempfile.TemporaryDirectory(dir=private_dir()) as tmp:
            path = Path(tmp) / "lane.bundle"
            _git(repo_path, "bundle", "create", "--quiet", str(path), ref)
            return path.read_bytes(), cand
    finally:
        _git(repo_path, "update-ref", "-d", ref)


def checkout_bundle(bundle: Path, dest: Path, best: str, cand: str) -> tuple[Path, Path]:
    """A lane's trees on another host from `bundle_pair`'s bundle: a repository in `dest`,
    worktrees dest/best and dest/cand detached at the two commits (both bound to it)."""
    env = _base_env()
    env.update(_env_config(dict(FIXED_OVERRIDES)))
    repo = dest / "repo"
    # unbundled into a fresh repository (no clone: every transport stays off, `file` included)
    for what, argv in (("init", ["init", "--quiet", str(repo)]),
                       ("bundle unbundle", ["-C", str(repo), "bundle", "unbundle", str(bundle)])):
        res = subprocess.run([_git_program(), *argv], env=env, capture_output=True, check=False,
                             stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
        if res.returncode != 0:
            raise GitFailure(f"git {what} of a lane's bundle: {_last_line(res.stderr, res.returncode)}")
    best_path, cand_path = dest / "best", dest / "cand"
    for path, sha in ((best_path, best), (cand_path, cand)):
        _git(repo, "worktree", "add", "--force", "--detach", str(path), sha)
        _trust(repo, path, None)
    return best_path, cand_path


def show_file(path: str | Path, commit: str, file: str) -> str | None:
    try:
        return _git(path, "cat-file", "blob", f"{commit}:{file}")
    except GitFailure:
        return None


# ---------------------------------------------------------------------------------------
# A tree against a base, with kopt's own reference index (for engine.treecheck).


@dataclass(frozen=True)
class TreeListing:
    """What git says about a work tree against a base tree, all from kopt's own index."""

    base_tree: str
    base_files: frozenset[str]  # every path of the base tree (gitlinks included)
    changed: tuple[tuple[str, str], ...]  # (M|D|T, path) of base files that differ on disk
    ignored: frozenset[str]  # files not in base that the ignore rules hide ("dir/" for a nested repo)
    flagged: tuple[str, ...]  # entries of the worktree's own index marked skip-worktree/assume-unchanged


@dataclass
class _Reference:
    tree: str
    index: Path
    files: frozenset[str]


_REFERENCES: dict[tuple[Path, Path], _Reference] = {}
_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_TREES: dict[tuple[Path, str], str] = {}


def _tree_of(loc: Location, base: str) -> str:
    cached = _TREES.get((loc.common_dir, base))
    if cached:
        return cached
    tree = run_at(loc, "rev-parse", "--verify", "--quiet", f"{base}^{{tree}}", ok=(0, 1))
    if not tree:
        raise GitFailure(f"{base!r} is not a commit or tree of {loc.common_dir}")
    if _HEX.fullmatch(base):
        _TREES[(loc.common_dir, base)] = tree
    return tree


def tree_listing(worktree: str | Path, base: str) -> TreeListing:
    """Compare a work tree with `base` through an index only kopt writes (kept per worktree
    in kopt's private folder, rebuilt when the base changes, refreshed by stat and ctime, so
    repeated checks read only what changed). Four git calls; none per file."""
    loc = locate(worktree)
    tree = _tree_of(loc, base)
    key = (loc.git_dir, loc.work_tree)
    ref = _REFERENCES.get(key)
    if ref is None or ref.tree != tree or not ref.index.exists():
        if ref is not None:
            index = ref.index
        else:  # a file of its own per worktree (several lanes check their trees at once)
            fd, name = tempfile.mkstemp(prefix="ref-", suffix=".index", dir=private_dir())
            os.close(fd)
            index = Path(name)
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
        run_at(loc, "read-tree", tree, env={"GIT_INDEX_FILE": str(index)})
        files = frozenset(_split0(run_at(loc, "ls-files", "-z", env={"GIT_INDEX_FILE": str(index)})))
        ref = _REFERENCES[key] = _Reference(tree, index, files)
    env = {"GIT_INDEX_FILE": str(ref.index)}
    run_at(loc, "update-index", "-q", "--refresh", "--ignore-submodules", env=env, ok=(0, 1))
    parts = run_at(loc, "diff-files", "--name-status", "-z", "--ignore-submodules=dirty", env=env).split("\0")
    changed = tuple((parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i])
    ignored = frozenset(_split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z",
                                       "--directory", env=env)))
    return TreeListing(tree, ref.files, changed, ignored, tuple(index_flagged(worktree)))


# ---------------------------------------------------------------------------------------
# Building a branch without a worktree (`kopt export`): plumbing on a private index file,
# so no checked-out branch, HEAD, index or working tree of the user's is ever touched.


def diff_paths(path: str | Path, a: str, b: str) -> list[tuple[str, str]]:
    """(status letter, file) for every file that differs from commit `a` to `b` (a rename is
    a delete and an add)."""
    parts = _git(path, "diff", "--name-status", "--no-renames", "--no-ext-diff", "--no-textconv", "-z", a, b).split("\0")
    return [(parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]


def tree_files(path: str | Path, commit: str) -> set[str]:
    """Every file path in a commit's tree."""
    return set(_split0(_git(path, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit)))


def tree_entries(path: str | Path, commit: str, files: list[str]) -> dict[str, tuple[str, str]]:
    """file -> (mode, object id) in a commit's tree, for the files it has."""
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(files), 200):
        chunk = files[i:i + 200]
        text = _git(path, "ls-tree", "-z", "--full-tree", commit, "--", *chunk) if chunk else ""
        for entry in text.split("\0"):
            if not entry:
                continue
            meta, _, name = entry.partition("\t")
            mode, _kind, obj = meta.split()
            out[name] = (mode, obj)
    return out


def ignored_paths(path: str | Path, commit: str, files: list[str]) -> set[str]:
    """The files that the .gitignore files of `commit` (with the repo's info/exclude and the
    user's excludes) ignore, whether or not they are tracked. Evaluated in a scratch folder
    holding only those .gitignore files and empty stand-ins of `files`."""
    if not files:
        return set()
    repo_loc = locate(path)
    gitignores = [p for p in tree_files(path, commit) if p == ".gitignore" or p.endswith("/.gitignore")]
    with tempfile.TemporaryDirectory(prefix="kopt-ignore-") as tmp:
        root = Path(tmp)
        for g in gitignores:
            text = show_file(path, commit, g)
            if text is not None:
                (root / g).parent.mkdir(parents=True, exist_ok=True)
                (root / g).write_text(text + "\n", encoding="utf-8", errors="surrogateescape")
        for f in files:
            with contextlib.suppress(OSError):
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).touch()
        with tempfile.TemporaryFile() as listing:
            listing.write("".join(f + "\0" for f in files).encode("utf-8", "surrogateescape"))
            listing.seek(0)
            loc = Location(repo_loc.git_dir, repo_loc.common_dir, root)
            out = run_at(loc, "check-ignore", "--no-index", "--stdin", "-z", stdin=listing, ok=(0, 1), label=path,
                         literal=False)  # check-ignore refuses the literal magic; it takes no other
        return set(_split0(out))


def hash_blob(path: str | Path, data: bytes) -> str:
    """Store `data` as a blob in the repository; returns its object id."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        return _git(path, "hash-object", "-w", "--no-filters", "--stdin", stdin=f)


def commit_with_changes(
    path: str | Path,
    parent: str,
    changes: list[tuple[str, str | None, str | None]],
    message: str,
    *,
    author: Actor = KOPT_AUTHOR,
    author_date: float | None = None,
) -> str:
    """A new commit (on no branch) whose tree is `parent`'s with `changes` applied:
    (file, mode, object id) sets a file, (file, None, None) removes it."""
    with tempfile.TemporaryDirectory(prefix="kopt-index-") as tmp:
        env = {
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_AUTHOR_NAME": author.name or "kopt", "GIT_AUTHOR_EMAIL": author.email or "kopt@localhost",
            "GIT_COMMITTER_NAME": author.name or "kopt", "GIT_COMMITTER_EMAIL": author.email or "kopt@localhost",
        }
        if author_date is not None:
            env["GIT_AUTHOR_DATE"] = f"@{int(author_date)} +0000"
        _git(path, "read-tree", parent, env=env)
        zero = "0" * len(parent)
        info = "".join(f"{mode} {obj}\t{name}\0" if mode else f"0 {zero}\t{name}\0" for name, mode, obj in changes)
        info_path = Path(tmp) / "index-info"
        info_path.write_bytes(info.encode("utf-8", "surrogateescape"))
        with open(info_path, "rb") as stdin:
            _git(path, "update-index", "-z", "--index-info", env=env, stdin=stdin)
        tree = _git(path, "write-tree", env=env)
        return _git(path, "commit-tree", "--no-gpg-sign", tree, "-p", parent, "-m", message, env=env)


def check_branch_name(path: str | Path, name: str) -> None:
    try:
        _git(path, "check-ref-format", "--branch", name)
    except GitFailure:
        raise BadInput(f"{name!r} is not a valid branch name") from None
    if name.startswith("-") or name.startswith("refs/"):
        raise BadInput(f"{name!r} is not a valid branch name (give the short name, e.g. perf/my-kernel)")


def create_branch(path: str | Path, name: str, commit: str) -> None:
    """Point a new branch at `commit`; fails (GitFailure) if the branch exists meanwhile."""
    _git(path, "update-ref", "-m", "kopt export", f"refs/heads/{name}", commit, "0" * len(commit))

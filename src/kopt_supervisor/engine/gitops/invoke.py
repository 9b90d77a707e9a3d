"""Running git: the program (2.31 or newer), an environment of kopt's making, the settings
of the repository that run a program listed (cached per repository, re-read when a config
file changes) and neutralized at the command scope, a timeout; and kopt's private folder
for index files that never belong to a worktree (scratch and reference indexes), with the
reference indexes kept per worktree and the trees git named for a commit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kopt_supervisor.engine import BadInput, KoptFailure
from kopt_supervisor.engine.gitops.guards import (
    FIXED_ENV,
    FIXED_OVERRIDES,
    GitFailure,
    Location,
    _head_file,
    config_overrides,
    locate,
)

# A git call that runs longer than this is killed (a config include pointing at a FIFO, a
# hung filesystem): the caller gets a GitFailure instead of an engine that never returns.
TIMEOUT_S = 600.0

# GIT_CONFIG_COUNT/KEY/VALUE (the command-scope overrides, with any character in a key) came
# with git 2.31; an older git would ignore them silently, so kopt refuses to run it.
MIN_GIT = (2, 31)
_GIT_FOUND: dict[str, str] = {}


def git_version(program: str) -> tuple[int, ...]:
    res = subprocess.run(
        [program, "--version"],
        env=_base_env(),
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    m = re.search(r"git version (\d+)\.(\d+)", res.stdout)
    if res.returncode != 0 or m is None:
        raise KoptFailure(
            f"{program} --version did not say which git it is: {res.stdout.strip() or res.stderr.strip()}"
        )
    return int(m.group(1)), int(m.group(2))


def _git_program() -> str:
    found = shutil.which("git")
    if found is None:
        raise KoptFailure("git is not installed (no `git` on PATH)")
    if found not in _GIT_FOUND:
        version = git_version(found)
        if version < MIN_GIT:
            raise KoptFailure(
                f"{found} is git {'.'.join(map(str, version))}; kopt needs git "
                f"{'.'.join(map(str, MIN_GIT))} or newer (to neutralize a repository's programs)"
            )
        _GIT_FOUND[found] = ".".join(map(str, version))
    return found


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(FIXED_ENV)
    return env


def _fixed_env() -> dict[str, str]:
    """The environment of a git call before a repository's own config is known: kopt's
    environment less every GIT_*, and the fixed command-scope overrides."""
    env = _base_env()
    env.update(_env_config(dict(FIXED_OVERRIDES)))
    return env


def _config_files(loc: Location) -> set[str]:
    """The config files git reads for this location (whether they exist or not)."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return {
        str(p)
        for p in (
            loc.common_dir / "config",
            loc.git_dir / "config.worktree",
            loc.common_dir / "config.worktree",
            home / ".gitconfig",
            xdg / "git" / "config",
            Path("/etc/gitconfig"),
        )
    }


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
    env = _fixed_env()
    env["GIT_COMMON_DIR"] = str(loc.common_dir)
    argv = [
        _git_program(),
        "--no-pager",
        f"--git-dir={loc.git_dir}",
        f"--work-tree={loc.work_tree}",
        "config",
        "--list",
        "-z",
        "--show-scope",
        "--show-origin",
    ]
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
        if (
            where is not None
            and value
            and (low == "include.path" or (low.startswith("includeif.") and low.endswith(".path")))
        ):
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


def _exec(
    argv: list[str], loc: Location, env: dict[str, str], stdin: BinaryIO | None, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            argv,
            cwd=loc.work_tree,
            env=env,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitFailure(f"git {' '.join(argv[5:7])} in {loc.work_tree}: no answer in {timeout:.0f} s") from None
    except OSError as e:
        raise GitFailure(f"git in {loc.work_tree}: {e}") from None


def _last_line(stderr: bytes, rc: int) -> str:
    lines = [ln for ln in stderr.decode("utf-8", "replace").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {rc}"


def run_at(
    loc: Location,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: BinaryIO | None = None,
    ok: Sequence[int] = (0,),
    literal: bool = True,
    label: str | Path | None = None,
) -> str:
    """Run `git args` at an explicit location with every guard of this module; returns its
    stdout (surrogate-escaped, one trailing newline stripped). Exit codes outside `ok` raise
    GitFailure with git's last line of error."""
    full_env = _base_env()
    full_env["GIT_COMMON_DIR"] = str(loc.common_dir)
    full_env.update(_env_config(_overrides(loc)))
    if env:
        full_env.update(env)
    argv = [
        _git_program(),
        "--no-pager",
        f"--git-dir={loc.git_dir}",
        f"--work-tree={loc.work_tree}",
        "--literal-pathspecs" if literal else "--no-literal-pathspecs",
        *args,
    ]
    res = _exec(argv, loc, full_env, stdin)
    if res.returncode not in ok:
        raise GitFailure(
            f"git {' '.join(args[:2])} in {label or loc.work_tree}: {_last_line(res.stderr, res.returncode)}"
        )
    out = res.stdout.decode("utf-8", "surrogateescape")
    return out[:-1] if out.endswith("\n") else out


def _git(
    path: str | Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: BinaryIO | None = None,
    ok: Sequence[int] = (0,),
) -> str:
    return run_at(locate(path), *args, env=env, stdin=stdin, ok=ok, label=path)


def head(path: str | Path) -> str:
    sha = _git(path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok=(0, 1))
    if not sha:
        raise BadInput(f"{path}: the repository has no commit yet")
    return sha


def show_file(path: str | Path, commit: str, file: str) -> str | None:
    try:
        return _git(path, "cat-file", "blob", f"{commit}:{file}")
    except GitFailure:
        return None


def _split0(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


# A folder only kopt writes (0700, in kopt's own temp dir, gone at exit) for index files that
# never belong to a worktree: scratch indexes and the reference indexes of treecheck.
_PRIVATE: list[Path] = []
PRIVATE_PREFIX = "kopt-git-"
STALE_UNNAMED_S = 86400.0
"""A private folder without its process's id in its name (made before it was) is swept once
this old."""


_PRIVATE_LOCK = threading.Lock()  # lanes check their trees from threads of their own


def private_dir() -> Path:
    with _PRIVATE_LOCK:
        if not _PRIVATE:
            sweep_private_dirs()
            d = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))
            atexit.register(shutil.rmtree, d, True)
            _PRIVATE.append(d)
        return _PRIVATE[0]


def sweep_private_dirs(now: float | None = None) -> list[Path]:
    """Remove the private folders of this user's kopt processes that are gone: an engine killed
    (SIGKILL, a crash) or a forked one that left with os._exit never ran its atexit, and this
    machine's /tmp held 1,493 of them after a day of test runs. A folder names its process
    (`kopt-git-<pid>-...`); one whose process still runs is left alone, and one named before
    that (no pid) only once STALE_UNNAMED_S old. Returns what it removed."""
    removed = []
    now = time.time() if now is None else now
    for d in Path(tempfile.gettempdir()).glob(f"{PRIVATE_PREFIX}*"):
        try:
            st = d.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        pid_text = d.name[len(PRIVATE_PREFIX) :].split("-", 1)[0]
        if pid_text.isdigit() and "-" in d.name[len(PRIVATE_PREFIX) :]:
            if _alive(int(pid_text)):
                continue
        elif now - st.st_mtime < STALE_UNNAMED_S:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    or split state) and refresh it by content. Where kopt holds a reference index of that very
    tree for this worktree, its copy is that index (`_copy_reference`): two git processes less."""
    if _copy_reference(loc, treeish):
        return
    run_at(loc, "read-tree", treeish)
    run_at(loc, "update-index", "-q", "--refresh", "--ignore-submodules", ok=(0, 1))


# ---------------------------------------------------------------------------------------
# Reference indexes (gitops.trees.tree_listing, engine.treecheck): per worktree, the index of
# a base tree, made by `git read-tree` into a file of kopt's private folder and refreshed
# against that worktree's files by `git update-index --refresh` only; no flags, no split or
# sparse state, stat data git recorded. And the tree git named for a commit or tree id.

_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass
class Reference:
    tree: str
    index: Path
    files: frozenset[str]  # its paths
    stamp: tuple[int, ...] | None = None  # the file as kopt's last git call on it left it

    def restamp(self) -> None:
        """Record the file as it is now: call after each git call that may write it."""
        self.stamp = _stamp_of(self.index)


def _stamp_of(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


REFERENCES_PER_WORKTREE = 2
"""A worktree's reference indexes kept: cand/ is checked against BEST's tree after each
proposal and against the staged candidate's after each run, best/ against BEST's."""

_REFERENCES: dict[tuple[Path, Path], list[Reference]] = {}  # the most recently used last
_TREE_OF: dict[tuple[Path, str], str] = {}
# A forked child (the crash tests fork an engine) shares the private folder: it keeps
# references of its own, never rewriting the files its parent's list describes.
os.register_at_fork(after_in_child=_REFERENCES.clear)


def known_tree(loc: Location, name: str) -> str | None:
    """The tree git named for the commit or tree id `name` in this repository, if asked before."""
    return _TREE_OF.get((loc.common_dir, name))


def note_tree(loc: Location, name: str, tree: str) -> None:
    """Remember that git named `tree` for the commit or tree id `name` (an object never changes)."""
    if _HEX.fullmatch(name) and _HEX.fullmatch(tree):
        _TREE_OF[(loc.common_dir, name)] = tree
        _TREE_OF[(loc.common_dir, tree)] = tree


def reference(loc: Location, tree: str) -> Reference | None:
    """This worktree's reference index of `tree`, if kopt holds one (now the most recently used)."""
    refs = _REFERENCES.get((loc.git_dir, loc.work_tree), [])
    for ref in refs:
        if ref.tree == tree:
            refs.remove(ref)
            if ref.stamp is None or _stamp_of(ref.index) != ref.stamp:  # gone, or written by another
                return None
            refs.append(ref)
            return ref
    return None


def reference_file(loc: Location) -> Path:
    """A file for this worktree's next reference index: a new one, or the least recently used
    one's (dropped), once REFERENCES_PER_WORKTREE are kept. It does not exist on return."""
    refs = _REFERENCES.setdefault((loc.git_dir, loc.work_tree), [])
    if len(refs) >= REFERENCES_PER_WORKTREE:
        index = refs.pop(0).index
    else:  # files of its own per worktree (several lanes check their trees at once)
        fd, name = tempfile.mkstemp(prefix="ref-", suffix=".index", dir=private_dir())
        os.close(fd)
        index = Path(name)
    with contextlib.suppress(FileNotFoundError):
        index.unlink()
    return index


def add_reference(loc: Location, ref: Reference) -> None:
    refs = _REFERENCES.setdefault((loc.git_dir, loc.work_tree), [])
    refs[:] = [r for r in refs if r.index != ref.index and r.tree != ref.tree] + [ref]
    note_tree(loc, ref.tree, ref.tree)


def _copy_reference(loc: Location, treeish: str) -> bool:
    """The worktree's index replaced by a copy of its reference index of `treeish`'s tree, when
    kopt holds one: the same entries read-tree writes, no flags, and stat data git recorded
    when it last refreshed the reference against these very files (a file changed since no
    longer matches it, so reset rewrites it and add rehashes it; a change within the index's
    own timestamp is racily clean, compared by content, as the copy keeps the reference's
    mtime). Written as git writes an index (index.lock, then renamed over the index); False,
    nothing written, where any of it fails (git's read-tree and refresh then)."""
    tree = known_tree(loc, treeish)
    ref = reference(loc, tree) if tree else None
    if ref is None:
        return False
    lock = loc.git_dir / "index.lock"
    try:
        data = ref.index.read_bytes()
        st = os.stat(ref.index)
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.utime(lock, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        os.replace(lock, loc.git_dir / "index")
    except OSError:
        with contextlib.suppress(OSError):
            lock.unlink()
        return False
    return True


def run_outside(args: Sequence[str], what: str) -> None:
    """`git args` where no repository is located yet (an init, an unbundle into a fresh
    one): the fixed overrides only. Raises GitFailure, `what` and git's last line of error."""
    res = subprocess.run(
        [_git_program(), *args],
        env=_fixed_env(),
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=TIMEOUT_S,
    )
    if res.returncode != 0:
        raise GitFailure(f"{what}: {_last_line(res.stderr, res.returncode)}")

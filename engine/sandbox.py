"""Confinement under bubblewrap of what kopt supervises: proposers and candidate code.

A `Confinement` says what one process tree may touch; `wrap(argv, confinement)` turns a
command into the `bwrap` command line that runs it so; `prepare(confinement)` makes what
the sandbox binds (missing folders, the private copy of a worktree's git metadata) and
removes its scratch afterwards. `for_proposer(...)` and `for_bench(...)` build the two
kinds kopt runs. `probe()` finds out whether bubblewrap works on this machine and
`start_rule(...)` is the engine's rule at start (refuse, unless `--no-sandbox`).

Every confinement gives (docs/security.md has the why of each):

- its own PID namespace (`--unshare-pid`) with bwrap's init as PID 1 and
  `--die-with-parent` at every level, so whatever the command starts (`setsid`, double
  fork, nohup) dies with it, and kopt's death takes the sandbox with it; its own IPC
  namespace (SysV shared memory and message queues die with it too);
- every capability dropped (`--cap-drop ALL`: run as root, bwrap would otherwise leave
  them all, and a sandboxed process could remount `/` read-write) and `/proc/sys` bound
  read-only (uid 0 without capabilities can still write sysctls such as
  `kernel.core_pattern` through a fresh procfs);
- the whole filesystem read-only; `/tmp`, `/var/tmp`, `/dev/shm` and `/run` private and
  empty (so are the host's unix sockets under them: docker, dbus, systemd, tmux, ssh-agent);
  host unix sockets listening elsewhere are covered too; a fresh `/dev` with only the GPU
  device nodes passed through, a fresh `/proc` that shows only the sandbox's processes;
- the paths it names hidden (an empty read-only folder in their place: the run's
  workspace), read-only, or writable; read-only paths win over a writable folder that
  holds them (the git common dir, a worktree's `.git` file, the interpreter's
  site-packages), and hidden paths win over both;
- no network unless asked (`--unshare-net`: only a private loopback);
- the environment: `TMPDIR=/tmp`, no user site (`PYTHONNOUSERSITE=1`), Python's bytecode
  read and written only under `PYTHONPYCACHEPREFIX` (never a `__pycache__` of the tree),
  and every cache that can hold compiled code (Triton, TorchInductor, torch extensions,
  the CUDA JIT cache, `XDG_CACHE_HOME`, numba, CuPy, MIOpen) sent to one folder.

A proposer's git: `cand/.git` points into the repo's `.git/worktrees/cand`; the sandbox
binds a private copy of that folder over it, whose `commondir` names a read-only view of
the repo's git dir with private `objects/` (alternate: the real store), `refs/`,
`packed-refs` and `logs/` on top. git status/diff/add/stash/commit work inside and write
only the copy; kopt's branch, packed-refs, config, hooks and objects are never written.

Per-tree caches (for benches): `cache_dir(workspace, side, *trees)` is
`<workspace>/cache/<side>-<tree hashes>`, bound writable only into runs of exactly that
side and tree, so what a candidate's run compiles (or plants) is never read by a run of
best or of another candidate. A proposer's caches live in its private /tmp and die with it.

Pure except where named: `wrap` and the constructors read a few files (the worktree's
`.git` pointer, `/proc/net/unix`, `/dev`); `prepare` and `probe` act on the machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import re
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine.errors import BadInput

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

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


# ---------------------------------------------------------------------------------------
# The command line


def wrap(argv: Sequence[str], c: Confinement, *, cwd: str | Path | None = None) -> list[str]:
    """The bwrap command line that runs `argv` confined by `c` (in `cwd` when given)."""
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
    out = [c.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL"]
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
    return [*out, "--", *argv]


def _shown(path: str, ops: dict[str, tuple[int, list[str]]]) -> bool:
    """Whether `path` would be visible from the host under these mounts: the deepest mount
    that holds it is a bind (not a fresh tmpfs, /dev or /proc)."""
    holder = max((q for q in ops if path == q or path.startswith(q.rstrip("/") + "/")), key=len)
    return holder == path or ops[holder][1][0] in ("--ro-bind", "--bind", "--dev-bind")


def _software_to_keep() -> list[str]:
    """The Python that runs kopt and kopt's own code, read-only, when they lie in a folder every
    sandbox gets empty (a clone or a virtualenv under /tmp): else the confined bench could not
    import the harness, nor a proposer run at all."""
    here = Path(__file__).resolve()
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(str(here.parents[1]))  # engine/ (editable: the checkout) or site-packages/kopt_supervisor
    return sorted(r for r in roots if any(r == d or r.startswith(d + "/") for d in PRIVATE_DIRS))


def _run_files_to_keep() -> list[str]:
    """What of /run stays visible in the private one: the resolver config /etc/resolv.conf
    links to there (systemd-resolved), or DNS breaks for proposers with network."""
    real = os.path.realpath("/etc/resolv.conf")
    return [real] if real.startswith("/run/") and os.path.exists(real) else []


# ---------------------------------------------------------------------------------------
# Side effects around a run


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


# ---------------------------------------------------------------------------------------
# The two kinds kopt runs


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
        readable=_uniq([_real(prompt), *(_inside(ws, x, "a proposer input") for x in inputs),
                        *_extra_paths(readable, hide, "readable")]),
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
    """Anything that runs candidate (or best) code: a bench, the profiler, a formatter, the
    ab_command. Sees of `workspace` only the trees it is given (`writable_trees` it may
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
    env = {**BASE_ENV, **cache_env(cache_r), "XDG_CONFIG_HOME": f"{SANDBOX_HOME}/.config",
           "XDG_DATA_HOME": f"{SANDBOX_HOME}/.local/share", "XDG_STATE_HOME": f"{SANDBOX_HOME}/.local/state"}
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
    )


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
# Reading a confined run's failure


_EROFS_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\[Errno 30\] Read-only file system: '([^']+)'",  # Python
    r"['‘](/[^'’]+)['’]: Read-only file system",  # coreutils (ASCII or UTF-8 quotes)
    r"(/[^\s:'\"‘’]+): Read-only file system",  # sh, Go, C
))


def denied_write(text: str) -> str | None:
    """The path a confined command failed to write because the sandbox keeps it read-only,
    from its error output (Python, coreutils, shell, Go messages); the last one wins."""
    found = None
    for line in text.splitlines():
        if "read-only file system" not in line.lower():
            continue
        for pattern in _EROFS_PATTERNS:
            m = pattern.search(line)
            if m:
                found = m.group(1)
                break
    return found


def bwrap_error(text: str) -> str | None:
    """bubblewrap's own complaint (it could not set the sandbox up, or not start the
    command), from the run's stderr."""
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("bwrap: ")]
    return lines[-1] if lines else None


# ---------------------------------------------------------------------------------------
# Availability and the rule at start


INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora/RHEL: dnf install "
                "bubblewrap; Arch: pacman -S bubblewrap)")
USERNS_HINT = ("enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 and "
               "user.max_user_namespaces > 0; on Ubuntu 23.10+ kernel.apparmor_restrict_unprivileged_userns=0 "
               "or an AppArmor profile for bwrap), or run where containers may create namespaces")


@dataclass(frozen=True)
class SandboxSupport:
    """What `probe()` found."""

    works: bool
    """bwrap starts a command with everything kopt asks of it."""
    bwrap: str | None
    version: str
    user_namespaces: bool | None
    """An unprivileged user namespace could be made (None: not tried)."""
    privileged: bool
    """Running as root (or bwrap is setuid): no user namespace is needed."""
    reason: str = ""
    """Why it does not work, one line."""
    hint: str = ""
    """What to do about it."""

    def summary(self) -> str:
        if self.works:
            how = "as root" if self.privileged else "user namespaces"
            return f"{self.version or 'bwrap'} ({how})"
        return f"unavailable: {self.reason}"

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def probe(bwrap: str | None = None, timeout_s: float = 20.0) -> SandboxSupport:
    """Find bwrap and try it: `bwrap --ro-bind / / true`, then with every option kopt uses
    (PID, IPC and network namespaces, fresh /dev and /proc, private /tmp, caps dropped),
    then a user namespace. The reason, when it fails, is bwrap's own message."""
    path = shutil.which(bwrap or BWRAP)
    privileged = os.geteuid() == 0
    if path is None:
        return SandboxSupport(False, None, "", None, privileged, f"{bwrap or BWRAP} is not on PATH", INSTALL_HINT)
    privileged = privileged or bool(os.stat(path).st_mode & stat.S_ISUID)
    _, version, _ = _try([path, "--version"], timeout_s)
    version = version.strip().splitlines()[0] if version.strip() else ""
    userns_ok, _, _ = _try([path, "--unshare-user", "--ro-bind", "/", "/", "true"], timeout_s)
    ok, _, err = _try([path, "--ro-bind", "/", "/", "true"], timeout_s)
    if not ok:
        return SandboxSupport(False, path, version, userns_ok, privileged, _first_line(err, "bwrap --ro-bind / / true failed"),
                              _hint_for(err, privileged))
    full = wrap(["true"], Confinement(bwrap=path))
    ok, _, err = _try(full, timeout_s)
    if not ok:
        return SandboxSupport(False, path, version, userns_ok, privileged,
                              _first_line(err, "bwrap with kopt's options failed"), _hint_for(err, privileged))
    return SandboxSupport(True, path, version, userns_ok, privileged)


def _try(argv: Sequence[str], timeout_s: float) -> tuple[bool, str, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, "", str(exc)
    return p.returncode == 0, p.stdout, p.stderr


def _first_line(text: str, default: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:300] if lines else default


def _hint_for(err: str, privileged: bool) -> str:
    low = err.lower()
    if not privileged and any(s in low for s in ("namespace", "uid map", "operation not permitted", "permission denied")):
        return USERNS_HINT
    if "operation not permitted" in low or "permission denied" in low:
        return "the container or a security policy (seccomp, AppArmor) forbids namespaces here; " + USERNS_HINT
    return INSTALL_HINT + "; or " + USERNS_HINT


class SandboxUnavailable(BadInput):
    """kopt was asked to run unconfined code where bubblewrap does not work, without
    `--no-sandbox`."""


@dataclass(frozen=True)
class SandboxMode:
    """The run's choice, stored in run.db and shown with every result."""

    confined: bool
    summary: str


def start_rule(support: SandboxSupport, *, proposer_kind: str, no_sandbox: bool) -> SandboxMode:
    """The engine's rule at start. Every run benches candidate code (any proposer kind), and
    a `command` proposer is a program with a shell: both run under bubblewrap, or, only with
    `--no-sandbox`, unconfined and marked so. Raises SandboxUnavailable (one line: why,
    how to fix it, what --no-sandbox means) when bubblewrap does not work and the user did
    not opt out."""
    what = "the `command` proposer and every bench" if proposer_kind == "command" else "every bench (candidate code)"
    if no_sandbox:
        return SandboxMode(False, f"UNSANDBOXED (--no-sandbox): {what} ran without confinement")
    if not support.works:
        raise SandboxUnavailable(
            f"kopt runs {what} under bubblewrap, which does not work here ({support.reason}): "
            f"{support.hint}; or pass --no-sandbox to run them unconfined "
            "(recorded in run.db and shown with every result)")
    return SandboxMode(True, f"sandboxed: {support.summary()}")

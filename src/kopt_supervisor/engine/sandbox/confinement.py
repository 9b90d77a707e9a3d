"""What one sandboxed process tree may touch, as data: `Confinement` (writable, readable,
read-only-on-top and hidden paths, network, device nodes, HOME, environment, the private git
copy), the fixed folders and variables every sandbox gets, and the compile-cache variables.

Pure: no file is read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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

    @property
    def pycache_prefix(self) -> Path | None:
        """Where this run's Python reads and writes bytecode, on the host (None: not set)."""
        value = self.env_dict.get("PYTHONPYCACHEPREFIX")
        return Path(value) if value else None

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

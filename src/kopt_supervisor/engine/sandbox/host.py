"""What the machine holds that a sandbox must pass through or cover: the GPU device nodes,
a linked worktree's git folders, kopt's interpreter's site-packages, the host's unix
sockets and kopt's GPU claims folder. Reads files; changes nothing.
"""

from __future__ import annotations

import glob
import os
import site
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from kopt_supervisor.engine.sandbox.confinement import GPU_DEVICE_GLOBS, PrivateGit


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
    from kopt_supervisor.engine.gpu.gate import claims_dir

    claims = Path(os.path.realpath(claims_dir()))
    found = host_unix_sockets() if sockets is None else [Path(s) for s in sockets]
    return [*found, *([claims] if claims.exists() else [])]

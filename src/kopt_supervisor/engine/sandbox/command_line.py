"""The bubblewrap command line: `wrap(argv, confinement)` turns a command into the `bwrap`
argv that runs it so, one mount per path with the stronger rule winning where they meet
(hidden > system > read-only on top > writable > readable), parents mounted before children.

Reads a few paths (what is a folder, where /etc/resolv.conf leads, which bwrap exists when
the confinement names none: binary.py); starts nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from kopt_supervisor.engine.sandbox import lifeline
from kopt_supervisor.engine.sandbox.binary import default_path
from kopt_supervisor.engine.sandbox.confinement import (
    BASE_ENV,
    BWRAP,
    GIT_COMMON_MOUNT,
    PRIVATE_DIRS,
    Confinement,
)


def wrap(
    argv: Sequence[str], c: Confinement, *, cwd: str | Path | None = None, lifeline_fd: int | None = None
) -> list[str]:
    """The bwrap command line that runs `argv` confined by `c` (in `cwd` when given), under
    kopt's init watching `lifeline_fd` (the engine's own, `lifeline.read_end()`, unless
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
    fd = lifeline.read_end() if lifeline_fd is None else lifeline_fd
    return [*out, "--", *lifeline.watched(argv, fd)]


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
    here = Path(__file__).resolve()  # <kopt_supervisor>/engine/sandbox/command_line.py
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

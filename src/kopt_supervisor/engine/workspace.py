"""A run's workspace on disk (docs/design.md §4): its paths, its creation, and atomic writes.

`Workspace(root, tag)` only names paths. `create_workspace()` makes a new one: checks the
tag and the target repo, freezes kopt.toml, creates run.db (mode 0600) and the folders
(mode 0700), and adds the `best/` and `cand/` worktrees on branch `kopt/TAG`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import gitops, integrity
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.config.toml_io import load as load_config_file
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.errors import BadInput
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
        return load_config_file(self.config_path)


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
                    "frozen_config_seal": integrity.config_seal(integrity.make_secret(ws.dir), config_text),
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


def refresh_memory(ws: Workspace, it: Any) -> bool:
    """Rewrite memory/vN.json only if it differs from the store (after a crash between a
    store write and its projection). Returns True when it had to."""
    from kopt_supervisor.engine import projections

    want = json.loads(json.dumps(projections.memory_record(it), default=str))
    try:
        if json.loads(ws.memory_path(it.version).read_text(encoding="utf-8")) == want:
            return False
    except (OSError, ValueError):
        pass
    write_json(ws.memory_path(it.version), want)
    return True

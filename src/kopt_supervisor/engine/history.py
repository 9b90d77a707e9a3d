"""A run's history: what changes it, what the engine trusts of it, and what the workspace
shows of it.

Changes to a run's history that both the engine and an offline CLI make: mask, unmask,
restart; and the chain of keeps read against the run's seals (`chain`, `check_chain`),
which every reader of BEST takes its answer from. One implementation, so a command means
the same thing whoever applies it.

The caller owns the workspace (the engine, or a CLI holding the workspace lock).
`write_projections` re-renders performance.md and README.md from the history its seals
vouch for (`write_initial_projections`: right after `kopt init`).

`RunHistory`: the rows, the chain of keeps its seals vouch for (`chain`), BEST_COMMIT
(`best_commit`: a forged keep is never BEST), the baseline and best iterations, the counters
the stop conditions read, and what the agent has cost. Reads run.db only; one per store
connection (each lane has its own).

`Projections`: memory/vN.json per iteration, performance.md and README.md, kept equal to
run.db. A projection edited behind kopt's back (or left by a crash, or replaced by a link, a
hard link, a FIFO) is rewritten from the store, and said. Writes files of the workspace only;
run.db is the truth and is only read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, KoptError, projections
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.projections import memory_record, restart_point_problem
from kopt_supervisor.engine.records import KEPT, Iteration, IterationRow, Phase, Spent, Status, spent
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import (
    ChainCheck,
    Tampered,
    Workspace,
    chain_head,
    existing_secret,
    read_secret,
    reseal_chain,
    unverifiable,
    verify_chain,
    write_atomic,
    write_memory,
)


def rewrite_memory(ws: Workspace, store: Store, versions: list[int]) -> None:
    for it in store.iterations(versions=versions):
        write_memory(ws, it)


def set_masked(ws: Workspace, store: Store, versions: list[int], masked: bool) -> list[int]:
    """Mask or unmask iterations; the baseline and an iteration in flight cannot be. The
    chain of keeps is checked before (a forged history is never resealed) and sealed after."""
    rows = {it.version: it for it in store.rows()}
    for v in versions:
        if v not in rows:
            raise BadInput(f"v{v} does not exist")
        if v == 0 or rows[v].status in (Status.RUNNING, Status.BORDERLINE):
            raise BadInput(f"v{v} cannot be {'masked' if masked else 'unmasked'} (the baseline or in flight)")
    key = read_secret(ws.dir)
    check_chain(key, store)
    with store.transaction():  # the masks and their seals together: a crash between never breaks the chain
        changed = store.set_masked(versions, masked)
        reseal(key, store)
    rewrite_memory(ws, store, changed)
    return changed


def kept_rows(store: Store) -> list[Iteration]:
    """The iterations the chain of keeps is made of (with their records)."""
    return store.iterations(
        versions=[
            r.version
            for r in store.rows()
            if (r.status in KEPT and r.commit)
            or (r.status == Status.RUNNING and r.phase in (Phase.COMMIT, Phase.ADVANCE))
        ]
    )


def chain(key: bytes | None, store: Store, *, note: str = "") -> ChainCheck:
    """What the run's seals vouch for (verify_chain), read from `store`."""
    return chain_of(key, kept_rows(store), {k: store.get(k) for k in CHAIN_META}, note=note)


CHAIN_META = ("chain_sealed", "chain_head", "baseline_commit")
"""The meta keys the chain check reads."""


def chain_of(
    key: bytes | None, iterations: Sequence[Iteration], meta: Mapping[str, Any], *, note: str = ""
) -> ChainCheck:
    """What the run's seals vouch for, from its iterations (all, or only the kept ones) and
    its meta. key None: the secret could not be read (`note` says why). A run made before
    keeps were sealed (no meta chain_sealed, and no link carrying a seal) is taken as it
    stands."""
    baseline_commit = meta.get("baseline_commit")
    sealed = any(it.record.get("seal") for it in iterations)
    if not meta.get("chain_sealed") and not sealed:
        return unverifiable(iterations, baseline_commit, "")
    if key is None:
        return unverifiable(
            iterations, baseline_commit, note or "the run's secret cannot be read: no keep can be verified"
        )
    if not meta.get("chain_sealed"):
        return ChainCheck(
            note="run.db's record that its keeps are sealed was removed, but its keeps carry "
            "seals: the chain was tampered with"
        )
    return verify_chain(key, iterations, baseline_commit=baseline_commit, head=meta.get("chain_head"))


def read_chain(ws: Workspace, iterations: Sequence[Iteration], meta: Mapping[str, Any]) -> ChainCheck:
    """`chain_of` for a reader (status, projections): the secret is read, never made."""
    try:
        key = existing_secret(ws.dir)
    except KoptError as e:
        return chain_of(None, iterations, meta, note=f"{e}: no keep can be verified")
    return chain_of(key, iterations, meta, note="" if key else "the run's secret is missing: no keep can be verified")


def check_chain(key: bytes, store: Store) -> ChainCheck:
    """Raise Tampered when a kept iteration's seal is wrong or the chain is not
    the one the engine sealed last. A run made before keeps were sealed is sealed as it
    stands, once (meta chain_sealed); one made before the chain had a head gets one."""
    kept = kept_rows(store)
    if not store.get("chain_sealed") and not any(it.record.get("seal") for it in kept):
        reseal(key, store)
        store.set("chain_sealed", True)
        store.event("integrity", "sealed the chain of keeps (a run made by an earlier kopt)", level="warn")
    found = chain(key, store)
    if found.problem:
        raise Tampered(found.problem)
    if store.get("chain_head") is None:
        kept = kept_rows(store)
        store.set("chain_head", chain_head(key, kept))
        if kept:
            store.event(
                "integrity", "sealed the head of the chain of keeps (a run made by an earlier kopt)", level="warn"
            )
    return found


def reseal(key: bytes, store: Store) -> None:
    """Seal the chain of keeps as it stands (after a change the engine or the user's CLI
    made), and its head, in one transaction."""
    with store.transaction():
        kept = kept_rows(store)
        want = reseal_chain(key, kept)
        for it in kept:
            if it.version in want and it.record.get("seal") != want[it.version]:
                it.record["seal"] = want[it.version]
                store.save_iteration(it)
        store.set("chain_head", chain_head(key, kept))


def check_restart_point(store: Store, version: int) -> None:
    problem = restart_point_problem(store.iteration(version), version)
    if problem:
        raise BadInput(problem)


def restart_from(ws: Workspace, store: Store, version: int, why: str = "") -> list[int]:
    """Mask every later unmasked iteration (the masked partial restart). Counters and
    BEST_COMMIT follow by derivation; the engine re-syncs the worktrees."""
    check_restart_point(store, version)
    key = read_secret(ws.dir)
    check_chain(key, store)
    later = [it.version for it in store.rows() if it.version > version and not it.masked]
    with store.transaction():
        changed = store.set_masked(later, True)
        reseal(key, store)
    rewrite_memory(ws, store, changed)
    store.event(
        "restart",
        f"restarted from v{version}; masked {', '.join(f'v{v}' for v in changed) or 'nothing'}"
        + (f": {why}" if why else ""),
        version=version,
    )
    return changed


def write_projections(ws: Workspace, store: Store, cfg: Config) -> None:
    """performance.md and README.md, re-rendered from the store."""
    meta = store.meta()
    everything = store.iterations()
    chain = read_chain(ws, everything, meta)  # a forged keep is never shown, nor BEST
    its = projections.trusted_rows(everything, chain.trusted)
    meta["best_commit"] = projections.best_commit(its) or chain.baseline_commit
    meta["tampered"] = chain.problem
    write_atomic(ws.performance, projections.render_performance(cfg, meta, its, projections.counters(its)))
    write_atomic(
        ws.readme,
        projections.render_readme(
            cfg,
            meta,
            config_columns=meta.get("config_columns"),
            classes=meta.get("classes"),
            hardware=meta.get("hardware_md"),
            roofline=meta.get("roofline_md"),
        ),
    )


class RunHistory:
    def __init__(self, store: Store, key: bytes) -> None:
        self.store = store
        self.key = key
        """The run's secret (engine/workspace.py): what the seals are checked with."""
        self._ended_records: dict[int, Any] = {}

    def rows(self) -> list[IterationRow]:
        return self.store.rows()

    def chain(self) -> ChainCheck:
        """What the run's seals vouch for (which keeps may be BEST)."""
        return chain(self.key, self.store)

    def best_commit(self) -> str:
        """BEST_COMMIT: the last keep whose seal verifies (a forged keep never is; integrity.
        Tampered when the seals vouch for no commit at all)."""
        best = self.trusted_best()
        if best is None:
            raise Tampered(self.chain().problem or "no BEST_COMMIT the run's seals vouch for")
        return best

    def trusted_best(self) -> str | None:
        """BEST_COMMIT as the seals vouch for it, None when they vouch for none."""
        chain = self.chain()
        return projections.best_commit(self.rows(), chain.trusted) or chain.baseline_commit

    def baseline(self) -> Iteration | None:
        v = projections.baseline_version(self.rows())
        return None if v is None else self.store.iteration(v)

    def best_iteration(self) -> Iteration | None:
        best = projections.best_row(self.rows(), self.chain().trusted)
        return None if best is None else self.store.iteration(best.version)

    def counters(self) -> projections.Counters:
        return projections.counters(self.rows(), self._records)

    def agent_spent(self) -> Spent:
        """What the agent cost so far (masked iterations too: their money is spent). Ended
        iterations' records are read once."""
        rows = self.rows()
        wanted = [r.version for r in rows if r.version not in self._ended_records]
        records: dict[int, Any] = {}
        for it in self.store.iterations(versions=wanted):
            records[it.version] = it.record
            if it.final:
                self._ended_records[it.version] = it.record
        return spent(sorted({**self._ended_records, **records}.items()))

    def _records(self, versions: list[int]) -> dict[int, Iteration]:
        return {it.version: it for it in self.store.iterations(versions=versions)}


class Projections:
    def __init__(
        self,
        ws: Workspace,
        cfg: Config,
        store: Store,
        event: Callable[..., None],
        projected: dict[Path, bytes | None] | None = None,
    ) -> None:
        self.ws = ws
        self.cfg = cfg
        self.store = store
        self.event = event
        self._projected = {} if projected is None else projected
        """performance.md and README.md as this engine (any lane) last wrote them."""

    def write_memory(self, it: Iteration) -> None:
        try:
            self.memory_folder()
            write_memory(self.ws, it)
        except OSError as e:
            self.event("disk", f"cannot write memory/v{it.version}.json: {e}", level="error")

    def write_projections(self) -> None:
        """performance.md and README.md re-rendered from the store. One that holds neither
        what this engine last wrote there nor what the store says now was edited behind
        kopt's back: said (it is rewritten like any other)."""
        paths = (self.ws.performance, self.ws.readme)
        with PROJECTING:
            found = {path: read_projection(path) for path in paths}
            try:
                write_projections(self.ws, self.store, self.cfg)
            except OSError as e:
                self.event("disk", f"cannot write projections: {e}", level="error")
                return
            now = {path: read_projection(path) for path in paths}
            edited = [
                path.name
                for path in paths
                if path in self._projected and found[path] not in (self._projected[path], now[path])
            ]
            self._projected.update(now)
        if edited:
            self.event(
                "tamper", f"{', '.join(edited)} had been edited behind kopt's back; rewritten from run.db", level="warn"
            )

    def memory_folder(self) -> bool:
        """memory/ a folder of the workspace's own before anything is written there: a link or
        a file in its place (which would carry kopt's writes and removals elsewhere) is
        removed and the folder made again. True when it had to."""
        memory = self.ws.memory
        replaced = memory.is_symlink() or (memory.exists() and not memory.is_dir())
        if replaced:
            memory.unlink()
        memory.mkdir(mode=0o700, exist_ok=True)
        return replaced

    def refresh_memory_files(self) -> list[str]:
        """Every memory/vN.json exactly as the store says: a file that differs (edited, or
        left behind by a crash), that is a link or a hard link, or that names no iteration is
        rewritten or removed, and said. Returns the names it had to touch."""
        memory = self.ws.memory
        touched: list[str] = []
        try:
            if self.memory_folder():
                touched.append("memory/ (not a folder)")
            its = self.store.iterations()
            names = [e.name for e in os.scandir(memory)]
        except OSError as e:
            self.event("disk", f"cannot refresh memory/: {e}", level="error")
            return touched
        versions = {it.version for it in its}
        for it in its:
            path = self.ws.memory_path(it.version)
            if memory_is_the_stores(path, it):
                continue
            try:
                remove_entry(path)
                write_memory(self.ws, it)
            except OSError as e:
                self.event("disk", f"cannot rewrite {path.name}: {e}", level="error")
                continue
            touched.append(path.name)
        for name in names:
            m = MEMORY_NAME.fullmatch(name)
            if m and int(m.group(1)) not in versions:
                try:
                    remove_entry(memory / name)
                except OSError as e:
                    self.event("disk", f"cannot remove memory/{name}: {e}", level="error")
                    continue
                touched.append(f"{name} (no such iteration: removed)")
        if touched:
            self.event(
                "tamper",
                f"memory/ differed from run.db (edited behind kopt's back, or left behind by a "
                f"crash): {', '.join(touched[:10])}{' ...' if len(touched) > 10 else ''}; rewritten from the "
                "store",
                level="warn",
            )
        return touched


MEMORY_NAME = re.compile(r"v(\d+)\.json")

PROJECTING = threading.Lock()
"""performance.md and README.md are checked, written and remembered by one lane at a time."""


def memory_is_the_stores(path: Path, it: Iteration) -> bool:
    """memory/vN.json is a regular file of one name holding what the store says of vN."""
    text = read_projection(path)
    if text is None:
        return False
    try:
        return bool(json.loads(text) == json.loads(json.dumps(memory_record(it), default=str)))
    except ValueError:
        return False


def read_projection(path: Path, limit: int = 64 << 20) -> bytes | None:
    """A projection file's bytes, None when it is anything but a regular file of one name
    (missing, a link, a hard link, a FIFO, a folder): such a file is never taken as kopt's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        return os.read(fd, limit) if st.st_size < limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def remove_entry(path: Path) -> None:
    """Whatever has this name (a file, a link, a FIFO, a folder) removed, never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def write_initial_projections(ws: Workspace) -> None:
    """README.md and performance.md right after `kopt init`."""
    with ws.open_store() as store:
        write_projections(ws, store, ws.load_config())

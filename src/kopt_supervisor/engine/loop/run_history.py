"""A run's history as the engine trusts it, and what the workspace shows of it.

`RunHistory`: the rows, the chain of keeps its seals vouch for (`chain`), BEST_COMMIT
(`best_commit`: a forged keep is never BEST), the baseline and best iterations, the counters
the stop conditions read, and what the agent has cost. Reads run.db only; one per store
connection (each lane has its own).

`Projections`: memory/vN.json per iteration, performance.md and README.md, kept equal to
run.db. A projection edited behind kopt's back (or left by a crash, or replaced by a link, a
hard link, a FIFO) is rewritten from the store, and said. Writes files of the workspace only;
run.db is the truth and is only read."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import history, integrity, records
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.projections import memory_record
from kopt_supervisor.engine.propose.costs import Spent, spent
from kopt_supervisor.engine.records import Iteration, IterationRow
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_memory


class RunHistory:
    def __init__(self, store: Store, key: bytes) -> None:
        self.store = store
        self.key = key
        """The run's secret (engine/integrity.py): what the seals are checked with."""
        self._ended_records: dict[int, Any] = {}

    def rows(self) -> list[IterationRow]:
        return self.store.rows()

    def chain(self) -> integrity.ChainCheck:
        """What the run's seals vouch for (which keeps may be BEST)."""
        return history.chain(self.key, self.store)

    def best_commit(self) -> str:
        """BEST_COMMIT: the last keep whose seal verifies (a forged keep never is; integrity.
        Tampered when the seals vouch for no commit at all)."""
        best = self.trusted_best()
        if best is None:
            raise integrity.Tampered(self.chain().problem or "no BEST_COMMIT the run's seals vouch for")
        return best

    def trusted_best(self) -> str | None:
        """BEST_COMMIT as the seals vouch for it, None when they vouch for none."""
        chain = self.chain()
        return records.best_commit(self.rows(), chain.trusted) or chain.baseline_commit

    def baseline(self) -> Iteration | None:
        v = records.baseline_version(self.rows())
        return None if v is None else self.store.iteration(v)

    def best_iteration(self) -> Iteration | None:
        best = records.best_row(self.rows(), self.chain().trusted)
        return None if best is None else self.store.iteration(best.version)

    def counters(self) -> records.Counters:
        return records.counters(self.rows(), self._records)

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

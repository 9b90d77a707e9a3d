"""run.db: the run's single source of truth (SQLite, WAL, synchronous=FULL).

Everything else on disk (memory/vN.json, performance.md, README.md) is a projection of
this database. One engine writes; any number of TUIs and CLIs read, and clients write only
rows of `commands`, which the engine polls and marks handled.

Tables:
  meta        key → JSON value (tag, state, stop reason, heartbeat, progress, ...)
  iterations  one row per iteration vN, its record as JSON beside indexed columns
  samples     every metric value measured: version, stage, round, block, side, config
  events      an append-only log of what the engine did, for the TUI and the report
  commands    durable requests from clients (pause, stop, accept vN, restart --from vK, ...)

Also here, at the end: the test-only fault injection at the steps the engine persists. Test-only fault injection: SIGKILL the engine right after its Nth persisted step.

The engine calls `fault_step(name)` after each thing it persists that a crash could split from
the next (an iteration row written, a benchmark child recorded, the keep's `git commit`).
Two environment variables, read here and nowhere else, turn it into a crash test:

    KOPT_TEST_STEPS=path       append each step's ordinal and name to `path` (one a line)
    KOPT_TEST_CRASH_AT=N|name  SIGKILL this process right after the Nth step, or after the
                               first step whose name equals `name`

With neither set (every real run) `fault_step()` is one dictionary lookup. tests/reliability
runs a short run once to list its steps, then kills a fresh run at each of them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.records import Iteration, IterationRow, Status

SCHEMA_VERSION = 3
"""3: samples keep the bench's mean and last-block value beside the metric (NULL: none)."""


@dataclass(frozen=True)
class Sample:
    """One metric value of one side, as run.db's `samples` keeps it: `order` "AB" or "BA"
    (which side was timed first), `flagged` that the GPU gate saw the look disturbed, `mean`
    and `last` the bench's mean over the same timed calls and its last timed block's value
    (NaN: the bench reports none), which the plausibility checks weigh."""

    version: int
    stage: str
    round: int
    block: int
    side: str
    config: str
    cls: str
    value: float
    order: str = ""
    flagged: bool = False
    mean: float = math.nan
    last: float = math.nan


LATER_COLUMNS = (
    ("samples", "ord", "TEXT NOT NULL DEFAULT ''"),
    ("samples", "flagged", "INTEGER NOT NULL DEFAULT 0"),
    ("samples", "mean", "REAL"),
    ("samples", "last", "REAL"),
    ("commands", "seal", "TEXT NOT NULL DEFAULT ''"),
)
"""Columns added to the schema after run.dbs were written without them (`Store._migrate`)."""


def _real(x: float) -> float | None:
    """A float for SQLite: NaN (none) as NULL."""
    return x if math.isfinite(x) else None


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS iterations (
  version            INTEGER PRIMARY KEY,
  status             TEXT NOT NULL,
  phase              TEXT NOT NULL DEFAULT '',
  masked             INTEGER NOT NULL DEFAULT 0,
  parent             INTEGER,
  hypothesis         TEXT NOT NULL DEFAULT '',
  target_class       TEXT,
  scope              TEXT NOT NULL DEFAULT 'global',
  commit_sha         TEXT,
  best_commit_before TEXT,
  repair_attempts    INTEGER NOT NULL DEFAULT 0,
  started_at         REAL NOT NULL,
  finished_at        REAL,
  record             TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS samples (
  id      INTEGER PRIMARY KEY,
  version INTEGER NOT NULL,
  stage   TEXT NOT NULL,
  round   INTEGER NOT NULL,
  block   INTEGER NOT NULL DEFAULT 0,
  side    TEXT NOT NULL,
  config  TEXT NOT NULL,
  cls     TEXT NOT NULL,
  value   REAL NOT NULL,
  t       REAL NOT NULL,
  ord     TEXT NOT NULL DEFAULT '',
  flagged INTEGER NOT NULL DEFAULT 0,
  mean    REAL,
  last    REAL
);
CREATE INDEX IF NOT EXISTS samples_by_version ON samples (version, stage);
CREATE TABLE IF NOT EXISTS events (
  id      INTEGER PRIMARY KEY,
  t       REAL NOT NULL,
  version INTEGER,
  level   TEXT NOT NULL,
  kind    TEXT NOT NULL,
  message TEXT NOT NULL,
  data    TEXT
);
CREATE TABLE IF NOT EXISTS commands (
  id         INTEGER PRIMARY KEY,
  t          REAL NOT NULL,
  kind       TEXT NOT NULL,
  args       TEXT NOT NULL DEFAULT '{}',
  source     TEXT NOT NULL DEFAULT '',
  status     TEXT NOT NULL DEFAULT 'pending',
  handled_at REAL,
  result     TEXT NOT NULL DEFAULT '',
  seal       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS commands_pending ON commands (status, id);
"""

COMMAND_KINDS = (
    "pause",
    "resume",
    "stop",
    "accept",
    "reject",
    "more_rounds",
    "restart",
    "mask",
    "unmask",
    "submit",
    "profile",
)


@dataclass(frozen=True)
class Command:
    id: int
    t: float
    kind: str
    args: dict[str, Any]
    source: str
    status: str
    result: str
    seal: str = ""


@dataclass(frozen=True)
class Event:
    id: int
    t: float
    version: int | None
    level: str
    kind: str
    message: str
    data: dict[str, Any] | None


_COLUMNS = (
    "version, status, phase, masked, parent, hypothesis, target_class, scope, commit_sha, "
    "best_commit_before, repair_attempts, started_at, finished_at, record"
)


OPEN_BUSY_S = 30.0
"""How long opening run.db retries SQLite's "database is locked" (`_while_busy`)."""


def _while_busy(step: Callable[[], object], *, budget_s: float = OPEN_BUSY_S) -> None:
    """`step` again while SQLite answers "database is locked", for up to `budget_s`. Setting the
    journal mode as a connection opens can get SQLITE_BUSY at once, without the busy handler
    (another connection is building the WAL index): four clients answering one review at the
    same moment lost one answer that way on a loaded 2-core machine (run FR, 2026-12-02)."""
    end = time.monotonic() + budget_s
    pause = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() + pause > end:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class Store:
    """A connection to run.db. Used by one thread at a time (a lane's connection may pass
    from one worker thread to the next between iterations); never by two at once."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            if not self.path.exists():
                raise BadInput(f"{self.path}: no such run database")
            uri = f"file:{self.path}?mode=ro"
            self.db = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None, check_same_thread=False)
        else:
            self.db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA busy_timeout = 30000")
        if not readonly:
            _while_busy(lambda: self.db.execute("PRAGMA journal_mode = WAL"))
            self.db.execute("PRAGMA synchronous = FULL")
            self._migrate()
        self._lock = threading.RLock()
        self._depth = 0

    @classmethod
    def create(cls, path: str | Path) -> Store:
        path = Path(path)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)
        store = cls(path)
        with store.transaction():
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    store.db.execute(stmt)
            store.db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (json.dumps(SCHEMA_VERSION),),
            )
        return store

    def _migrate(self) -> None:
        """Bring a run.db of an earlier kopt up to this schema (columns added, nothing lost).
        Under SQLite's write lock, the columns read again: `kopt run` and the engine it starts
        open the same run.db at once, and two processes that both found a column missing
        added it twice ("duplicate column name")."""
        if not self._missing_columns():
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for table, column, decl in self._missing_columns():
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
            self.db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (json.dumps(SCHEMA_VERSION),)
            )
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        """(table, column, declaration) of this schema's later columns that run.db lacks
        (none while its tables are being created)."""
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "samples" not in tables:
            return []
        return [
            (table, column, decl)
            for table, column, decl in LATER_COLUMNS
            if column not in {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
        ]

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (nested calls join the outer one)."""
        with self._lock:
            if self._depth == 0:
                self.db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self.db
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self.db.execute("ROLLBACK")
                raise
            else:
                self._depth -= 1
                if self._depth == 0:
                    self.db.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A consistent read of several tables."""
        with self._lock:
            if self._depth:
                yield self.db
                return
            self.db.execute("BEGIN")
            try:
                yield self.db
            finally:
                self.db.execute("COMMIT")

    # -- meta ---------------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def meta(self) -> dict[str, Any]:
        return {r["key"]: json.loads(r["value"]) for r in self.db.execute("SELECT key, value FROM meta")}

    def set(self, key: str, value: Any) -> None:
        self.set_many({key: value})

    def set_many(self, values: dict[str, Any]) -> None:
        with self.transaction():
            self.db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [(k, json.dumps(v)) for k, v in values.items()],
            )

    # -- iterations ---------------------------------------------------------------------

    def next_version(self) -> int:
        row = self.db.execute("SELECT MAX(version) FROM iterations").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def save_iteration(self, it: Iteration) -> Iteration:
        with self.transaction():
            self.db.execute(
                f"INSERT OR REPLACE INTO iterations ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                _row_values(it),
            )
        fault_step(f"v{it.version} {it.status} {it.phase}")
        return it

    def iteration(self, version: int) -> Iteration | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM iterations WHERE version = ?", (version,)).fetchone()
        return None if row is None else _iteration(row)

    def iterations(
        self, *, include_masked: bool = True, since: int = 0, versions: Iterable[int] | None = None
    ) -> list[Iteration]:
        """Iterations with their records, oldest first (`versions`: only these)."""
        sql = f"SELECT {_COLUMNS} FROM iterations WHERE version >= ?"
        args: list[Any] = [since]
        if not include_masked:
            sql += " AND masked = 0"
        if versions is not None:
            wanted = sorted(set(versions))
            if not wanted:
                return []
            sql += f" AND version IN ({','.join('?' * len(wanted))})"
            args += wanted
        return [_iteration(r) for r in self.db.execute(sql + " ORDER BY version", args)]

    def rows(self) -> list[IterationRow]:
        """Every iteration without its record, oldest first: what bookkeeping needs, cheap at
        any history length."""
        return [
            IterationRow(r[0], Status(r[1]), r[2], bool(r[3]), r[4], r[5], r[6], r[7], r[8])
            for r in self.db.execute(
                "SELECT version, status, phase, masked, target_class, commit_sha, best_commit_before, finished_at, "
                "json_extract(record, '$.ended_seq') FROM iterations ORDER BY version"
            )
        ]

    def set_masked(self, versions: Iterable[int], masked: bool) -> list[int]:
        versions = list(versions)
        with self.transaction():
            changed = []
            for v in versions:
                cur = self.db.execute(
                    "UPDATE iterations SET masked = ? WHERE version = ? AND masked != ?",
                    (int(masked), v, int(masked)),
                )
                if cur.rowcount:
                    changed.append(v)
        return changed

    # -- samples ------------------------------------------------------------------------

    def add_samples(self, rows: Iterable[Sample]) -> None:
        """Metric values as they were measured (`Sample`), one transaction."""
        now = time.time()
        with self.transaction():
            self.db.executemany(
                "INSERT INTO samples (version, stage, round, block, side, config, cls, value, ord, flagged, mean, last, t) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        r.version,
                        r.stage,
                        r.round,
                        r.block,
                        r.side,
                        r.config,
                        r.cls,
                        r.value,
                        r.order,
                        int(r.flagged),
                        _real(r.mean),
                        _real(r.last),
                        now,
                    )
                    for r in rows
                ],
            )

    def samples(self, version: int, stage: str | None = None) -> list[sqlite3.Row]:
        if stage is None:
            return self.db.execute("SELECT * FROM samples WHERE version = ? ORDER BY id", (version,)).fetchall()
        return self.db.execute(
            "SELECT * FROM samples WHERE version = ? AND stage = ? ORDER BY id", (version, stage)
        ).fetchall()

    def delete_samples(self, version: int, stage: str) -> None:
        with self.transaction():
            self.db.execute("DELETE FROM samples WHERE version = ? AND stage = ?", (version, stage))

    # -- events -------------------------------------------------------------------------

    def event(
        self,
        kind: str,
        message: str,
        *,
        version: int | None = None,
        level: str = "info",
        data: dict[str, Any] | None = None,
    ) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO events (t, version, level, kind, message, data) VALUES (?,?,?,?,?,?)",
                (time.time(), version, level, kind, message, None if data is None else json.dumps(data)),
            )

    def events(self, *, since_id: int = 0, version: int | None = None, limit: int = 500) -> list[Event]:
        sql = "SELECT * FROM events WHERE id > ?"
        args: list[Any] = [since_id]
        if version is not None:
            sql += " AND version = ?"
            args.append(version)
        rows = self.db.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [
            Event(
                r["id"],
                r["t"],
                r["version"],
                r["level"],
                r["kind"],
                r["message"],
                None if r["data"] is None else json.loads(r["data"]),
            )
            for r in reversed(rows)
        ]

    # -- commands -----------------------------------------------------------------------

    def send_command(
        self,
        kind: str,
        args: dict[str, Any] | None = None,
        *,
        source: str = "",
        seal: Callable[[str, dict[str, Any], float], str] | None = None,
    ) -> int:
        """Insert a command row; `seal(kind, args, t)` signs it with the run's secret (the
        engine acts only on sealed rows: engine/workspace.py)."""
        if kind not in COMMAND_KINDS:
            raise BadInput(f"unknown command {kind!r} (known: {', '.join(COMMAND_KINDS)})")
        t = time.time()
        args = dict(args or {})
        with self.transaction():
            cur = self.db.execute(
                "INSERT INTO commands (t, kind, args, source, seal) VALUES (?,?,?,?,?)",
                (t, kind, json.dumps(args), source, seal(kind, args, t) if seal else ""),
            )
            return int(cur.lastrowid or 0)

    def pending_commands(self, kinds: Iterable[str] | None = None) -> list[Command]:
        rows = self.db.execute("SELECT * FROM commands WHERE status = 'pending' ORDER BY id").fetchall()
        out = [_command(r) for r in rows]
        if kinds is not None:
            wanted = set(kinds)
            out = [c for c in out if c.kind in wanted]
        return out

    def command(self, command_id: int) -> Command | None:
        row = self.db.execute("SELECT * FROM commands WHERE id = ?", (command_id,)).fetchone()
        return None if row is None else _command(row)

    def finish_command(self, command_id: int, status: str, result: str = "") -> None:
        with self.transaction():
            self.db.execute(
                "UPDATE commands SET status = ?, handled_at = ?, result = ? WHERE id = ? AND status = 'pending'",
                (status, time.time(), result, command_id),
            )


def _row_values(it: Iteration) -> tuple[Any, ...]:
    return (
        it.version,
        it.status,
        it.phase,
        int(it.masked),
        it.parent,
        it.hypothesis,
        it.target_class,
        it.scope,
        it.commit,
        it.best_commit_before,
        it.repair_attempts,
        it.started_at,
        it.finished_at,
        json.dumps(it.record),
    )


def _iteration(r: sqlite3.Row) -> Iteration:
    return Iteration(
        version=r["version"],
        status=Status(r["status"]),
        phase=r["phase"],
        masked=bool(r["masked"]),
        parent=r["parent"],
        hypothesis=r["hypothesis"],
        target_class=r["target_class"],
        scope=r["scope"],
        commit=r["commit_sha"],
        best_commit_before=r["best_commit_before"],
        repair_attempts=r["repair_attempts"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        record=json.loads(r["record"]),
    )


def _command(r: sqlite3.Row) -> Command:
    return Command(
        r["id"],
        r["t"],
        r["kind"],
        json.loads(r["args"]),
        r["source"],
        r["status"],
        r["result"],
        r["seal"] if "seal" in r.keys() else "",
    )


_fault_count = 0


def fault_step(name: str) -> None:
    steps_log = os.environ.get("KOPT_TEST_STEPS")
    crash_at = os.environ.get("KOPT_TEST_CRASH_AT")
    if not steps_log and not crash_at:
        return
    global _fault_count
    _fault_count += 1
    if steps_log:
        with open(steps_log, "a", encoding="utf-8") as f:
            f.write(f"{_fault_count}\t{name}\n")
    if crash_at and (crash_at == str(_fault_count) or crash_at == name):
        os.kill(os.getpid(), signal.SIGKILL)

"""run.db's samples keep the bench's mean and last-block value beside the metric (schema 3),
so the plausibility checks that weigh them (`mean_not_faster`, `last_block_not_faster`) see
every look of a decision that an engine restart or "more rounds" continues; a run.db written
before (schema 2: no such columns) gains them on opening, its rows reading as "none"."""

from __future__ import annotations

import math
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace

from kopt_supervisor.engine.loop.measure import pairs
from kopt_supervisor.engine.records import Iteration, Stage, Status
from kopt_supervisor.engine.store import Sample, Store


def test_pairs_read_back_carry_the_means_and_last_blocks(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "run.db")
    store.add_samples(
        [
            Sample(3, Stage.EVAL, 0, 0, "best", "c1", "wide", 10.0, "AB", False, mean=10.5, last=10.2),
            Sample(3, Stage.EVAL, 0, 0, "cand", "c1", "wide", 5.0, "AB", False, mean=5.4, last=9.9),
            Sample(3, Stage.EVAL, 1, 0, "best", "c1", "wide", 10.0, "BA", True),  # a bench with neither
            Sample(3, Stage.EVAL, 1, 0, "cand", "c1", "wide", 6.0, "BA", True),
        ]
    )
    ctx = SimpleNamespace(store=store)
    first, second = pairs(ctx, Iteration(3, Status.RUNNING), Stage.EVAL)  # type: ignore[arg-type]
    assert (first.best, first.cand, first.best_mean, first.cand_mean) == (10.0, 5.0, 10.5, 5.4)
    assert (first.best_last, first.cand_last, first.order, first.flagged) == (10.2, 9.9, "AB", False)
    assert second.flagged and second.order == "BA"
    assert all(math.isnan(x) for x in (second.best_mean, second.cand_mean, second.best_last, second.cand_last))
    store.close()


def schema_2(path: Path) -> None:
    """A run.db as schema 2 wrote it: samples without mean and last."""
    Store.create(path).close()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE samples")  # the samples table as schema 2 wrote it
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.execute(
        "CREATE TABLE samples (id INTEGER PRIMARY KEY, version INTEGER NOT NULL, stage TEXT NOT NULL, "
        "round INTEGER NOT NULL, block INTEGER NOT NULL DEFAULT 0, side TEXT NOT NULL, config TEXT NOT NULL, "
        "cls TEXT NOT NULL, value REAL NOT NULL, t REAL NOT NULL, ord TEXT NOT NULL DEFAULT '', "
        "flagged INTEGER NOT NULL DEFAULT 0)"
    )
    con.executemany(
        "INSERT INTO samples (version, stage, round, block, side, config, cls, value, t, ord) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            (2, "eval", 0, 0, "best", "c1", "wide", 4.0, 0.0, "AB"),
            (2, "eval", 0, 0, "cand", "c1", "wide", 3.0, 0.0, "AB"),
        ],
    )
    con.commit()
    con.close()


def test_a_run_db_of_schema_2_gains_the_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    schema_2(path)
    store = Store(path)  # opening it for writing migrates it
    (p,) = pairs(SimpleNamespace(store=store), Iteration(2, Status.RUNNING), Stage.EVAL)  # type: ignore[arg-type]
    assert (p.best, p.cand) == (4.0, 3.0) and math.isnan(p.best_mean) and math.isnan(p.cand_last)
    store.add_samples([Sample(2, "eval", 1, 0, "best", "c1", "wide", 4.0, mean=4.1, last=4.2)])
    assert [tuple(r)[-2:] for r in store.db.execute("SELECT mean, last FROM samples ORDER BY id")] == [
        (None, None),
        (None, None),
        (4.1, 4.2),
    ]
    store.close()


def test_two_processes_opening_an_old_run_db_at_once_migrate_it_once(tmp_path: Path, monkeypatch) -> None:
    # `kopt run` and the engine it starts open run.db together: both found `mean` missing and
    # the second ALTER failed ("duplicate column name: mean", seen 2026-11-29)
    path = tmp_path / "run.db"
    schema_2(path)
    both_looked = threading.Barrier(2, timeout=10)
    real = Store._missing_columns
    first_look: set[int] = set()

    def missing(self: Store) -> list[tuple[str, str, str]]:
        found = real(self)
        if threading.get_ident() not in first_look:  # both read "missing" before either adds it
            first_look.add(threading.get_ident())
            both_looked.wait()
        return found

    monkeypatch.setattr(Store, "_missing_columns", missing)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            Store(path).close()
        except BaseException as e:  # noqa: BLE001 - the test reports what either thread raised
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with sqlite3.connect(path) as con:
        assert [r[1] for r in con.execute("PRAGMA table_info(samples)")][-2:] == ["mean", "last"]
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3"

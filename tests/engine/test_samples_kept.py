"""run.db's samples keep the bench's mean and last-block value beside the metric (schema 3),
so the plausibility checks that weigh them (`mean_not_faster`, `last_block_not_faster`) see
every look of a decision that an engine restart or "more rounds" continues; a run.db written
before (schema 2: no such columns) gains them on opening, its rows reading as "none"."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from types import SimpleNamespace

from kopt_supervisor.engine.loop.rounds import pairs
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


def test_a_run_db_of_schema_2_gains_the_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "run.db"
    Store.create(path).close()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE samples")  # the samples table as schema 2 wrote it
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

"""The chain of keeps read against the run's seals (engine/workspace.verify_chain,
engine/history.chain/check_chain) and what every reader makes of it: BEST is the last keep
whose seal verifies (projections.best_commit with `trusted`), `kopt status` and
performance.md say a run was tampered with and never name a forgery.

Each hostile test edits run.db as an unconfined proposer can (plain SQL, without the run's
secret): an UPDATE of a keep's commit, of its seal too, an INSERT of a keep with a copied
seal, a DELETE of a keep (the last one, or one in the middle), a flipped mask, a reordered
end order, an edited baseline commit, the record that the keeps are sealed removed, the
run's secret removed."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import api, history, projections
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.records import Iteration, Phase, Status
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import (
    ChainCheck,
    Tampered,
    Workspace,
    config_seal,
    keep_seal,
    make_secret,
    read_secret,
    seal_new_keep,
)

TOML = """[target]
bench = "python bench.py"
metric = "us"

[gpu]
vendor = "none"
"""

BASE, K1, K3, EVIL = "b" * 40, "1" * 40, "3" * 40, "e" * 40


def sealed_run(tmp_path: Path) -> Workspace:
    """v0 baseline, v1 keep, v2 regression, v3 keep: sealed and headed as the engine does."""
    ws = Workspace(tmp_path, "t")
    for d in (ws.dir, ws.memory, ws.plans, ws.logs, ws.profiles):
        d.mkdir(parents=True, exist_ok=True)
    ws.config_path.write_text(TOML)
    key = make_secret(ws.dir)
    with Store.create(ws.db_path) as s:
        s.set_many(
            {
                "tag": "t",
                "repo": str(tmp_path / "repo"),
                "baseline_commit": BASE,
                "state": "stopped",
                "frozen_config": TOML,
                "chain_sealed": True,
                "frozen_config_seal": config_seal(key, TOML),
            }
        )
        rows = [
            Iteration(0, Status.BASELINE, commit=BASE),
            Iteration(1, Status.KEEP, commit=K1, best_commit_before=BASE),
            Iteration(2, Status.REGRESSION, best_commit_before=K1),
            Iteration(3, Status.KEEP, commit=K3, best_commit_before=K1),
        ]
        done: list[Iteration] = []
        for n, it in enumerate(rows):
            it.phase, it.started_at, it.finished_at = Phase.DONE, time.time(), time.time()
            it.record.update({"ended_seq": n, "classes": {"cls=a": {"best": 2.0, "cand": 1.0, "ratio": 0.5}}})
            if it.kept:
                seal_new_keep(key, [d for d in done if d.kept], it)
            s.save_iteration(it)
            done.append(it)
        history.reseal(key, s)  # the head, as the engine writes it with each keep
    return ws


def sql(ws: Workspace, statement: str, *args: object) -> None:
    """What an unconfined proposer can do to run.db (no secret)."""
    con = sqlite3.connect(ws.db_path)
    con.execute(statement, args)
    con.commit()
    con.close()


def record(ws: Workspace, version: int) -> dict:
    con = sqlite3.connect(ws.db_path)
    row = con.execute("SELECT record FROM iterations WHERE version = ?", (version,)).fetchone()
    con.close()
    return json.loads(row[0])


def check(ws: Workspace) -> ChainCheck:
    with Store(ws.db_path, readonly=True) as s:
        return history.chain(read_secret(ws.dir), s)


def best(ws: Workspace) -> str | None:
    with Store(ws.db_path, readonly=True) as s:
        found = history.chain(read_secret(ws.dir), s)
        return projections.best_commit(s.rows(), found.trusted) or found.baseline_commit


def refuses(ws: Workspace, *words: str) -> None:
    """The engine's check (check_chain) refuses the run, naming what it found."""
    with Store(ws.db_path) as s, pytest.raises(Tampered) as e:
        history.check_chain(read_secret(ws.dir), s)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_the_engines_own_chain_verifies_and_best_is_its_last_keep(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    found = check(ws)
    assert found.problem is None and found.trusted == {0, 1, 3} and found.baseline_commit == BASE
    assert best(ws) == K3
    with Store(ws.db_path) as s:
        history.check_chain(read_secret(ws.dir), s)  # no exception
    st = api.status(ws)
    assert st["best_commit"] == K3 and st["tampered"] is None and st["baseline_commit"] == BASE


@pytest.mark.parametrize(
    "how",
    [
        "UPDATE iterations SET commit_sha = '{evil}' WHERE version = 3",
        # the seal column too: the previous keep's seal, the baseline's, a seal made with another key
        "UPDATE iterations SET commit_sha = '{evil}', record = json_set(record, '$.seal', '{seal1}') WHERE version = 3",
        "UPDATE iterations SET commit_sha = '{evil}', record = json_set(record, '$.seal', '{seal0}') WHERE version = 3",
        "UPDATE iterations SET commit_sha = '{evil}', record = json_set(record, '$.seal', '{other_key}') WHERE version = 3",
        "UPDATE iterations SET record = json_remove(record, '$.seal') WHERE version = 3",
    ],
)
def test_an_edited_last_keep_is_never_best(tmp_path: Path, how: str) -> None:
    ws = sealed_run(tmp_path)
    v3 = Iteration(3, Status.KEEP, commit=EVIL, best_commit_before=K1, record={"ended_seq": 3})
    other_key = keep_seal(b"x" * 32, record(ws, 1)["seal"], v3)  # right data, wrong key
    sql(ws, how.format(evil=EVIL, seal1=record(ws, 1)["seal"], seal0=record(ws, 0)["seal"], other_key=other_key))
    found = check(ws)
    assert found.broken == (3,) and 3 not in found.trusted
    assert best(ws) == K1  # the last keep whose seal verifies: genuine, never the forgery
    refuses(ws, "did not seal", "v3")
    st = api.status(ws)
    assert st["best_commit"] == K1 and "v3" in st["tampered"] and st["keeps"] == 1
    with Store(ws.db_path, readonly=True) as s:  # what the TUI derives from
        shown = api.trusted_history(ws, s.iterations(), s.meta())
    assert [it.version for it in shown.iterations] == [0, 1, 2] and shown.best_commit == K1 and shown.tampered


def test_an_inserted_keep_with_a_copied_seal_is_never_best(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    seal3 = record(ws, 3)["seal"]
    sql(
        ws,
        "INSERT INTO iterations (version, status, phase, commit_sha, best_commit_before, started_at, record) "
        "VALUES (99, 'keep', 'done', ?, ?, 0, ?)",
        EVIL,
        K3,
        json.dumps({"ended_seq": 99, "seal": seal3}),
    )
    assert check(ws).broken == (99,) and best(ws) == K3
    refuses(ws, "v99")
    assert api.status(ws)["best_commit"] == K3


def test_a_keep_inserted_in_the_middle_of_the_end_order_breaks_the_link_after_it(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(
        ws,
        "INSERT INTO iterations (version, status, phase, commit_sha, best_commit_before, started_at, record) "
        "VALUES (99, 'keep', 'done', ?, ?, 0, ?)",
        EVIL,
        K1,
        json.dumps({"ended_seq": 2}),
    )  # ends before v3
    found = check(ws)
    assert found.broken == (99, 3)  # v3's link names v1's seal, not the forged one's
    assert best(ws) == K1


def test_a_deleted_last_keep_is_found_by_the_chains_head(tmp_path: Path) -> None:
    """Every remaining link verifies (the last one is simply gone): the head does not."""
    ws = sealed_run(tmp_path)
    sql(ws, "DELETE FROM iterations WHERE version = 3")
    found = check(ws)
    assert found.broken == () and not found.head_ok
    assert best(ws) == K1  # genuine (the deleted one is not brought back, but nothing forged is named)
    refuses(ws, "not the one the engine sealed last")
    assert "deleted" in api.status(ws)["tampered"]


def test_a_deleted_keep_in_the_middle_breaks_the_next_link(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(ws, "DELETE FROM iterations WHERE version = 1")
    found = check(ws)
    assert found.broken == (3,) and not found.head_ok
    assert best(ws) == BASE
    refuses(ws, "v3")


def test_a_flipped_mask_or_a_reordered_end_breaks_the_chain(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(ws, "UPDATE iterations SET masked = 1 WHERE version = 3")
    assert check(ws).broken == (3,) and best(ws) == K1
    ws2 = sealed_run(tmp_path / "2")
    sql(ws2, "UPDATE iterations SET record = json_set(record, '$.ended_seq', 10) WHERE version = 1")  # v1 "ends" last
    found = check(ws2)
    assert found.broken == (3, 1) and best(ws2) == BASE
    refuses(ws2)


def test_a_forged_baseline_commit_is_replaced_by_the_one_its_seal_vouches_for(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(ws, "UPDATE iterations SET commit_sha = ? WHERE version = 0", EVIL)
    found = check(ws)
    assert found.broken == (0,) and found.baseline_commit == BASE  # meta's commit: v0's seal verifies with it
    assert found.trusted == {1, 3} and best(ws) == K3
    # the baseline and meta both changed: no baseline is vouched for
    sql(ws, "UPDATE meta SET value = ? WHERE key = 'baseline_commit'", json.dumps(EVIL))
    assert check(ws).baseline_commit is None
    sql(ws, "DELETE FROM iterations WHERE version IN (1, 3)")
    assert best(ws) is None
    st = api.status(ws)
    assert st["best_commit"] is None and st["baseline_commit"] is None and st["tampered"]


def test_a_changed_baseline_commit_in_meta_is_found(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(ws, "UPDATE meta SET value = ? WHERE key = 'baseline_commit'", json.dumps(EVIL))
    found = check(ws)
    assert found.baseline_commit == BASE and found.baseline_moved
    refuses(ws, "baseline_commit")
    assert api.status(ws)["baseline_commit"] == BASE


def test_removing_the_record_that_keeps_are_sealed_does_not_make_a_forgery_legacy(tmp_path: Path) -> None:
    """A run made before keeps were sealed is sealed as it stands; one whose keeps carry seals
    is not such a run, whatever meta says: a forged keep is never resealed."""
    ws = sealed_run(tmp_path)
    sql(ws, "UPDATE iterations SET commit_sha = ? WHERE version = 3", EVIL)
    sql(ws, "DELETE FROM meta WHERE key = 'chain_sealed'")
    refuses(ws, "was removed")
    assert 3 not in check(ws).trusted and best(ws) != EVIL


def test_a_run_made_before_keeps_were_sealed_is_sealed_once(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(ws, "UPDATE iterations SET record = json_remove(record, '$.seal')")
    sql(ws, "DELETE FROM meta WHERE key IN ('chain_sealed', 'chain_head')")
    assert check(ws).problem is None and best(ws) == K3  # taken as it stands
    with Store(ws.db_path) as s:
        history.check_chain(read_secret(ws.dir), s)
        assert s.get("chain_sealed") and s.get("chain_head")
    found = check(ws)
    assert found.problem is None and found.trusted == {0, 1, 3}


def test_without_the_runs_secret_nothing_is_trusted(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    (ws.dir / ".secret").unlink()
    st = api.status(ws)  # a reader never makes a secret
    assert not (ws.dir / ".secret").exists()
    assert st["tampered"] and "secret" in st["tampered"] and st["best_commit"] is None
    # the engine makes a new one: every seal is then wrong
    refuses(ws, "did not seal")


def test_performance_md_names_no_forged_commit_and_says_the_run_was_tampered_with(tmp_path: Path) -> None:
    ws = sealed_run(tmp_path)
    sql(ws, "UPDATE iterations SET commit_sha = ? WHERE version = 3", EVIL)
    with Store(ws.db_path) as s:
        write_projections(ws, s, ws.load_config())
    text = ws.performance.read_text()
    assert EVIL[:10] not in text and K1[:10] in text
    assert "**TAMPERED**" in text and "v3" in text


def test_masking_seals_the_masks_and_the_head_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between the masks and their seals would leave a chain the engine refuses: both
    are written together (and the chain still verifies after a mask and an unmask)."""
    ws = sealed_run(tmp_path)
    with Store(ws.db_path) as s:
        history.set_masked(ws, s, [3], True)
    assert check(ws).problem is None and best(ws) == K1
    with Store(ws.db_path) as s:
        history.set_masked(ws, s, [3], False)
    assert check(ws).problem is None and best(ws) == K3

    class Crash(Exception):
        pass

    def crash(key: bytes, store: Store) -> None:
        raise Crash  # right after the masks were written

    monkeypatch.setattr(history, "reseal", crash)
    with Store(ws.db_path) as s, pytest.raises(Crash):
        history.set_masked(ws, s, [3], True)
    monkeypatch.undo()
    assert check(ws).problem is None and best(ws) == K3  # rolled back with the seals: nothing half-written

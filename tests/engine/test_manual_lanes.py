"""The manual proposer with lanes: a submit names its lane (`kopt submit --lane N`), each lane's
wait takes only a submit addressed to it, and a submit no lane can take is refused when it is
sent (or, slipped past the CLI, rejected by the engine), never taken by another lane."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine import BadInput, api
from kopt_supervisor.engine.api.run_io import submit_waits
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.loop.control import Control
from kopt_supervisor.engine.propose.proposer import route_submit
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import command_sealer, read_secret
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.reliability.helpers import FAST, init, iterations
from tests.tui.live import wait_for

LANES2 = "\n[parallel]\nlanes = 2\n"


def sealed(ws, args: dict[str, Any], source: str = "test") -> int:
    """A submit row as the user's kopt seals it, inserted without the sender's checks (what a
    client that skips them would leave)."""
    key = read_secret(ws.dir)
    with Store(ws.db_path) as s:
        return s.send_command("submit", args, source=source, seal=command_sealer(key))


def command(ws, cid: int):
    with Store(ws.db_path, readonly=True) as s:
        return s.command(cid)


def test_two_waiting_lanes_never_take_each_others_submit(fake_env):
    """The engine's side alone: two lanes wait on the run's one pump (each from its thread),
    submits arrive for lane 1 then lane 0, and rows naming no lane or a lane the run lacks are
    rejected by the first wait that sees them."""
    repo, root = fake_env([], extra_toml=LANES2)
    ws = init(repo, root)
    control = Control(ws, Store(ws.db_path), read_secret(ws.dir), poll_interval_s=0.01)
    got: dict[int, Any] = {}
    ready = [threading.Event(), threading.Event()]

    def lane(i: int) -> None:
        route = route_submit(2, i)
        got[i] = control.wait_for({"submit"}, 20, ready[i].set, route=lambda cmd: route(cmd.args))

    threads = [threading.Thread(target=lane, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    assert all(e.wait(10) for e in ready)
    no_lane, bad_lane = sealed(ws, {"hypothesis": "whose?"}), sealed(ws, {"hypothesis": "x", "lane": 5})
    with Store(ws.db_path) as s:  # no seal: never taken by anyone
        forged = s.send_command("submit", {"hypothesis": "forged", "lane": 0}, source="hostile")
    for_1 = sealed(ws, {"hypothesis": "for lane one", "lane": 1})
    for_0 = sealed(ws, {"hypothesis": "for lane zero", "lane": 0})
    for t in threads:
        t.join(20)
    assert got[0].id == for_0 and got[0].args["hypothesis"] == "for lane zero"
    assert got[1].id == for_1 and got[1].args["hypothesis"] == "for lane one"
    assert (command(ws, no_lane).status, command(ws, no_lane).result) == (
        "rejected",
        "the submit names no lane (the run has 2 lanes: 0, 1): send it with --lane N",
    )
    assert (command(ws, bad_lane).status, command(ws, bad_lane).result) == (
        "rejected",
        "no lane 5 (the run has 2 lanes: 0, 1)",
    )
    assert command(ws, forged).status == "rejected" and "no valid seal" in command(ws, forged).result
    assert not control.waiting_for


def test_an_answer_taken_by_one_lane_s_review_is_not_refused_by_the_other_lane_s_pump(fake_env):
    """Lane 0's review takes the engineer's accept and acts on it; lane 1 pumps meanwhile (it
    drains every pending command). The answer is still pending in run.db until lane 0's review
    closes it, and v2 awaits nothing any more: the other pump must leave it alone, or the record
    says "rejected: v2 is not awaiting review" of an accept that was applied (seen in a
    whole-suite run: tests/tui/test_live.py, two lanes' reviews)."""
    repo, root = fake_env([], extra_toml=LANES2)
    ws = init(repo, root)
    control = Control(ws, Store(ws.db_path), read_secret(ws.dir), poll_interval_s=0.01)
    got: list[Any] = []
    waiting = threading.Event()
    review = threading.Thread(target=lambda: got.append(control.await_answer(2, 20, lambda left: waiting.set())))
    review.start()
    assert waiting.wait(10)
    key = read_secret(ws.dir)
    with Store(ws.db_path) as s:
        accept = s.send_command("accept", {"version": 2}, source="test", seal=command_sealer(key))
        late = s.send_command("accept", {"version": 7}, source="test", seal=command_sealer(key))
    review.join(20)
    assert got and got[0] is not None and got[0].id == accept
    other_lane = threading.Thread(target=control.drain)  # lane 1's pump, from its own thread
    other_lane.start()
    other_lane.join(10)
    assert command(ws, accept).status == "pending"  # lane 0 has not acted on it yet
    assert (command(ws, late).status, command(ws, late).result) == ("rejected", "v7 is not awaiting review")
    control.finish(got[0], "done", "v2 accepted")
    assert (command(ws, accept).status, command(ws, accept).result) == ("done", "v2 accepted")
    control.drain()
    assert command(ws, accept).status == "done"


def test_kopt_submit_lane_on_a_run_of_one_lane(fake_env, capsys):
    repo, root = fake_env([])
    ws = init(repo, root)
    assert kopt(["--root", str(root), "submit", "t", "wider loads", "--lane", "1"]) == 2
    assert capsys.readouterr().err.strip() == "kopt: no lane 1 (the run has 1 lane: 0)"
    assert kopt(["--root", str(root), "submit", "t", "wider loads", "--lane", "0"]) == 0  # queued: no engine
    assert kopt(["--root", str(root), "submit", "t", "again"]) == 2  # lane 0 by default: one at a time
    err = capsys.readouterr().err
    assert "a submit is already waiting for the engine" in err and "lane" not in err, err
    with Store(ws.db_path, readonly=True) as s:
        assert [c.args["lane"] for c in s.pending_commands(["submit"])] == [0]


def edit(tree, factor: float) -> None:
    path = tree / "kernel.json"
    k = json.loads(path.read_text())
    k["speed"] = {c: v * factor for c, v in k["speed"].items()}
    path.write_text(json.dumps(k))


def waits(ws) -> dict[int, dict[str, Any]]:
    alive, pid = api.engine_alive(ws)
    with Store(ws.db_path, readonly=True) as s:
        return submit_waits(s.get, 2, pid if alive else None)


@pytest.mark.slow
def test_kopt_submit_with_two_lanes_each_lane_evaluates_its_own(fake_env, capsys, monkeypatch):
    repo, root = fake_env([], toml_replace=FAST, extra_toml=LANES2)
    ws = init(repo, root)
    monkeypatch.setenv("FAKE_NOISE", "0.0005")
    engine = threading.Thread(target=run_engine, args=(ws,), kwargs={"proposer": "manual", "max_iters": 2})
    engine.start()
    try:
        wait_for(lambda: len(waits(ws)) == 2, what="both lanes' submit waits")
        said = waits(ws)
        trees = {lane: said[lane]["worktree"] for lane in (0, 1)}
        assert trees[0] == str(ws.cand) and trees[1] == str(ws.dir / "lanes" / "1" / "cand")
        first_waiting = min(said, key=lambda lane: said[lane]["t"])

        assert kopt(["--root", str(root), "submit", "t", "no lane named"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == (
            "kopt: the run has 2 lanes: 0, 1: name the submit's lane with --lane N (waiting for a submit "
            "now: lane 0, lane 1)"
        ), err
        assert kopt(["--root", str(root), "submit", "t", "lane two", "--lane", "2"]) == 2
        assert capsys.readouterr().err.strip() == "kopt: no lane 2 (the run has 2 lanes: 0, 1)"

        edit(Path(trees[0]), 1.05)  # lane 0: slower
        edit(Path(trees[1]), 0.95)  # lane 1: faster
        order = [1 - first_waiting, first_waiting]  # the opposite order of the lanes' waits
        hypotheses = {0: "lane zero: wider tiles", 1: "lane one: unrolled loop"}
        for lane in order:
            assert kopt(["--root", str(root), "submit", "t", hypotheses[lane], "--lane", str(lane)]) == 0
        assert kopt(["--root", str(root), "submit", "t", "a second one", "--lane", str(order[0])]) == 2
        err = capsys.readouterr().err
        assert (
            f"lane {order[0]} is not waiting for a submit" in err
            or f"a submit for lane {order[0]} is already waiting" in err
        ), err
    finally:
        engine.join(120)
    assert not engine.is_alive()
    its = {it.record["lane"]: it for it in iterations(ws)[1:]}
    assert set(its) == {0, 1}
    assert its[0].hypothesis == hypotheses[0] and its[0].status == "regression", its[0].record
    assert its[1].hypothesis == hypotheses[1] and its[1].status == "keep", its[1].record
    with Store(ws.db_path, readonly=True) as s:
        assert s.pending_commands() == []


def test_submit_addressed_checks_what_it_can_know(fake_env, monkeypatch):
    """The sender's checks with an engine that runs (its pid faked): a lane not waiting is
    refused with what it does; a wait published by another engine is no wait."""
    from kopt_supervisor.engine.api import run_io
    from kopt_supervisor.engine.propose.proposer import wait_key

    repo, root = fake_env([], extra_toml=LANES2)
    ws = init(repo, root)
    with Store(ws.db_path) as s:
        s.set(wait_key(0), {"lane": 0, "worktree": str(ws.cand), "waiting": True, "version": 3, "pid": 4242})
        s.set(wait_key(1), {"lane": 1, "worktree": "/x", "waiting": True, "version": 2, "pid": 999})  # a dead engine's
        s.set("lane:1", {"version": 2, "phase": "measure"})
        assert run_io.submit_addressed(s, {"lane": 0}, 2, 4242) == {"lane": 0}
        with pytest.raises(
            BadInput,
            match=r"^lane 1 is not waiting for a submit \(it is at measure of v2\): "
            r"waiting for a submit now: lane 0$",
        ):
            run_io.submit_addressed(s, {"lane": 1}, 2, 4242)
        with pytest.raises(
            BadInput, match=r"name the submit's lane with --lane N \(waiting for a submit now: lane 0\)"
        ):
            run_io.submit_addressed(s, {}, 2, 4242)
        with pytest.raises(BadInput, match=r"no engine runs"):
            run_io.submit_addressed(s, {}, 2, None)
        for bad in (True, "1", -1, 2, 1.0):
            with pytest.raises(BadInput, match=r"^no lane .* \(the run has 2 lanes: 0, 1\)$"):
                run_io.submit_addressed(s, {"lane": bad}, 2, 4242)

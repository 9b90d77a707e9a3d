"""The review queue of engine.api: every lane's candidates awaiting the engineer, oldest review
first, with their evidence and the answer already sent; `engine.api.send` takes one answer per
review; `kopt status --json` lists them.

The pure half runs on hand-made iterations; the rest on fake-lanes-review, a run the real
engine made with two lanes each awaiting review (tests/tui/make_fixture.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine import BadInput, api
from kopt_supervisor.engine.api import review_queue
from kopt_supervisor.engine.api.run_meta import sealed_answers
from kopt_supervisor.engine.records import Iteration, Status
from kopt_supervisor.engine.store import Command, Store
from kopt_supervisor.engine.workspace import Workspace, command_seal
from tests.tui.fixtures import LANES_REVIEW, install_runs


def cls(ratio: float, lo: float, hi: float, verdict: str = "undecided") -> dict[str, Any]:
    return {"ratio": ratio, "lo": lo, "hi": hi, "rounds": 4, "verdict": verdict}


def borderline(v: int, lane: Any, opened_at: float, *, masked: bool = False, focus: str = "cls=large") -> Iteration:
    record: dict[str, Any] = {
        "lane": lane,
        "review": {"opened_at": opened_at, "deadline": opened_at + 1800, "reason": f"v{v} undecided"},
        "decision": {
            "verdict": "borderline",
            "reason": f"v{v} undecided",
            "rounds": 4,
            "gpu_seconds": 2.5,
            "flags": ["undecided_at_max_rounds"],
            "focus": focus,
        },
        "classes": {"cls=large": cls(0.99, 0.97, 1.01), "cls=small": cls(0.95, 0.93, 0.97, "improved")},
        "gpu": {"index": lane if isinstance(lane, int) else 0, "uuid": f"GPU-{lane}", "name": "H100", "host": "node-a"},
    }
    return Iteration(
        v,
        Status.BORDERLINE,
        phase="review",
        masked=masked,
        hypothesis=f"hypothesis {v}",
        started_at=1000.0 + v,
        record=record,
    )


def answer(cid: int, kind: str, args: dict[str, Any], key: bytes | None = b"k" * 32, t: float = 5.0) -> Command:
    seal = command_seal(key, kind, args, t) if key else ""
    return Command(cid, t, kind, args, "cli:1", "pending", "", seal)


KEY = b"k" * 32


def test_every_lanes_review_is_listed_oldest_review_first_with_its_evidence():
    # v5 (lane 2) opened its review before v3 (lane 0) and v4 (lane 1): arrival, not version order
    its = [
        Iteration(0, Status.BASELINE),
        borderline(3, 0, 2000.0),
        borderline(4, 1, 2500.0),
        borderline(5, 2, 1500.0),
        borderline(6, 3, 100.0, masked=True),
        Iteration(7, Status.RUNNING, record={"lane": 3}),
    ]
    queue = review_queue(its)
    assert [(r.version, r.lane, r.place, r.of) for r in queue] == [(5, 2, 1, 3), (3, 0, 2, 3), (4, 1, 3, 3)]
    first = queue[0]
    assert first.reason == "v5 undecided" and first.flags == ("undecided_at_max_rounds",)
    assert first.rounds == 4 and first.gpu_seconds == 2.5 and first.deadline == 1500.0 + 1800
    assert first.gpu == {"index": 2, "uuid": "GPU-2", "name": "H100", "host": "node-a"}
    assert [c.cls for c in first.classes] == ["cls=large", "cls=small"]
    assert first.focus is not None and first.focus.cls == "cls=large" and first.focus.lo == 0.97
    assert first.open and first.answer is None and not first.more_rounds
    d = first.to_dict()
    assert d["lane"] == 2 and d["focus"]["delta_pct"] == pytest.approx(-1.0) and d["answer"] is None
    # the focus names no class it has: the class that moved most
    other = borderline(8, 0, 1.0, focus="cls=nope")
    assert review_queue([other])[0].focus.cls == "cls=small"


def test_a_sent_answer_is_shown_and_only_the_first_one_counts():
    its = [borderline(3, 0, 2000.0), borderline(4, 1, 2500.0)]
    answers = [
        answer(9, "reject", {"version": 3}),
        answer(7, "accept", {"version": 3}),
        answer(8, "accept", {"version": "v99"}),
        answer(10, "stop", {"version": 4}),
        answer(11, "accept", {"version": True}),
        answer(12, "accept", ["not", "a", "dict"]),
    ]  # type: ignore[arg-type]
    queue = review_queue(its, {}, answers)
    v3, v4 = queue
    assert v3.answer is not None and (v3.answer.kind, v3.answer.command_id) == ("accept", 7)  # the engine takes #7
    assert not v3.open and v4.open and v4.answer is None


def test_a_review_measured_again_is_not_open_while_an_engine_measures_it():
    its = [borderline(3, 0, 2000.0), borderline(4, 1, 2500.0)]
    meta = {
        "lane:1": {"version": 4, "phase": "eval", "step": "round 6 (min 2, max 8)"},
        "lane:0": {"version": 3, "phase": "review"},
        "progress": {"version": 4, "phase": "eval"},
    }
    v3, v4 = review_queue(its, meta)
    assert v4.more_rounds and not v4.open and v3.open
    # no engine: meta's steps are what it did last; an answer queued now applies when it resumes
    assert all(r.open for r in review_queue(its, meta, alive=False))


def test_only_answers_sealed_with_the_runs_secret_count():
    good = answer(1, "accept", {"version": 3})
    forged = answer(2, "accept", {"version": 4}, key=b"x" * 32)
    unsealed = answer(3, "reject", {"version": 4}, key=None)
    other = answer(4, "pause", {})
    assert sealed_answers(KEY, [good, forged, unsealed, other]) == [good]
    assert sealed_answers(None, [good]) == []  # a run without a secret: no row is the user's
    # a forged answer does not take a review out of the queue
    queue = review_queue([borderline(3, 0, 1.0), borderline(4, 1, 2.0)], {}, sealed_answers(KEY, [forged, unsealed]))
    assert all(r.open for r in queue)


def test_junk_in_a_record_shows_what_it_can():
    it = borderline(3, "1", 50.0)
    it.record["classes"] = {"cls=a": {"ratio": "fast"}, "cls=b": None, "cls=c": cls(float("nan"), 0.1, 0.2)}
    it.record["decision"]["flags"] = ["ok", 3, None]
    it.record["review"] = "not a dict"
    queue = review_queue([it, Iteration(4, Status.BORDERLINE, started_at=2000.0, record={"lane": True})])
    r, other = queue  # no review record: the order its iterations started
    assert r.lane is None and r.classes == () and r.focus is None and r.flags == ("ok",)
    assert r.opened_at is None and r.deadline is None and r.reason == "v3 undecided"
    assert other.version == 4 and other.lane is None and other.reason == "" and other.gpu is None


def test_lane_states_name_each_lanes_candidate_interval_and_review():
    its = [
        Iteration(0, Status.BASELINE),
        borderline(1, 0, 2000.0),
        borderline(2, 1, 1000.0),
        Iteration(
            3,
            Status.RUNNING,
            hypothesis="tile K by 64",
            phase="measure",
            record={
                "lane": 2,
                "classes": {"cls=large": cls(0.96, 0.94, 0.98, "improved")},
                "decision": {"focus": "cls=large"},
            },
        ),
    ]
    queue = review_queue(its, {}, [answer(5, "reject", {"version": 2})])
    lanes = api.lane_states({}, its, 4, queue)
    assert [x["review"] and (x["review"]["place"], x["review"]["of"]) for x in lanes] == [(2, 2), (1, 2), None, None]
    assert lanes[1]["review"]["answer"]["kind"] == "reject" and lanes[0]["review"]["answer"] is None
    assert lanes[2]["hypothesis"] == "tile K by 64" and lanes[2]["interval"]["verdict"] == "improved"
    assert lanes[2]["interval"]["lo"] == 0.94 and lanes[0]["interval"]["cls"] == "cls=large"
    assert lanes[3]["hypothesis"] is None and lanes[3]["interval"] is None and lanes[3]["review"] is None


# -- on a run the real engine made: two lanes awaiting review at once ----------------------


@pytest.fixture
def two_reviews(tmp_path: Path) -> Workspace:
    return Workspace(install_runs(tmp_path / "workspaces", (LANES_REVIEW,)), LANES_REVIEW)


def rows(ws: Workspace) -> list[tuple[str, dict[str, Any], str]]:
    with Store(ws.db_path, readonly=True) as s:
        return [
            (r["kind"], __import__("json").loads(r["args"]), r["status"])
            for r in s.db.execute("SELECT kind, args, status FROM commands ORDER BY id")
        ]


def test_status_lists_both_lanes_reviews_and_the_answer_sent(two_reviews: Workspace):
    ws = two_reviews
    st = api.status(ws)
    assert st["pending_reviews"] == [1, 2]
    assert [(r["version"], r["lane"], r["place"], r["answer"]) for r in st["reviews"]] == [
        (1, 0, 1, None),
        (2, 1, 2, None),
    ]
    assert all(
        r["reason"].endswith("smaller than 1%") and r["classes"] and r["gpu"]["index"] in (1, 2) for r in st["reviews"]
    )
    assert [x["review"]["place"] for x in st["lanes"]] == [1, 2]
    api.send(ws, "accept", {"version": 2}, source="cli:test")
    st = api.status(ws)
    assert st["reviews"][1]["answer"]["kind"] == "accept" and st["reviews"][1]["answer"]["source"] == "cli:test"
    assert st["reviews"][0]["answer"] is None and st["lanes"][1]["review"]["answer"]["kind"] == "accept"
    assert api.pending_reviews(ws)[1].answer is not None
    # kopt gpus --json names the lanes the same way
    assert [x["review"]["place"] for x in api.gpus_report(ws)["lanes"]] == [1, 2]


def test_a_second_answer_to_one_review_is_refused_and_the_other_lane_is_untouched(two_reviews: Workspace):
    ws = two_reviews
    api.send(ws, "accept", {"version": 1}, source="cli:1")
    for kind in ("accept", "reject", "more_rounds"):
        with pytest.raises(
            BadInput,
            match=r"v1 already has an answer waiting for the engine: accept \(command #\d+, "
            r"from cli:1\)",
        ):
            api.send(ws, kind, {"version": 1}, source="tui:2")
    api.send(ws, "reject", {"version": 2}, source="tui:2")  # the other lane's review takes its own answer
    with pytest.raises(BadInput, match="v0 is not awaiting review"):
        api.send(ws, "accept", {"version": 0})
    assert rows(ws) == [("accept", {"version": 1}, "pending"), ("reject", {"version": 2}, "pending")]


def test_a_forged_answer_row_does_not_block_the_engineers(two_reviews: Workspace):
    ws = two_reviews
    with Store(ws.db_path) as s:  # inserted by something other than the user's kopt: no seal
        s.send_command("reject", {"version": 1}, source="intruder")
    assert api.status(ws)["reviews"][0]["answer"] is None
    api.send(ws, "accept", {"version": 1}, source="cli:1")
    assert [r[:2] for r in rows(ws)] == [("reject", {"version": 1}), ("accept", {"version": 1})]


def test_answers_sent_at_once_from_several_clients_make_one_row(two_reviews: Workspace):
    ws = two_reviews
    outcomes: list[str] = []
    go = threading.Barrier(4)

    def answer_it(kind: str) -> None:
        go.wait()
        try:
            api.send(ws, kind, {"version": 2}, source=f"tui:{kind}")
            outcomes.append("sent")
        except BadInput:
            outcomes.append("refused")

    threads = [threading.Thread(target=answer_it, args=(k,)) for k in ("accept", "reject", "accept", "more_rounds")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused", "refused", "refused", "sent"]
    assert len([r for r in rows(ws) if r[1] == {"version": 2}]) == 1


def test_with_several_lanes_the_runs_state_is_what_the_lanes_do_together():
    """The engine's one meta `state` is whichever lane wrote last (a lane waiting for a GPU
    writes waiting_gpu while another measures): clients read the lanes instead."""

    def lane(phase: str, review: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"phase": phase, "review": review}

    waiting = {"place": 1, "of": 1, "answer": None, "more_rounds": False}
    answered = {**waiting, "answer": {"kind": "accept"}}
    meta = {"state": "waiting_gpu"}
    assert api.effective_state(meta, True, [lane("eval"), lane("waiting_gpu")]) == "running"
    assert api.effective_state(meta, True, [lane("review", waiting), lane("waiting_gpu")]) == "awaiting_review"
    assert api.effective_state(meta, True, [lane("review", answered), lane("waiting_gpu")]) == "waiting_gpu"
    assert api.effective_state(meta, True, [lane("idle"), lane("review", answered)]) == "running"
    assert api.effective_state({"state": "running"}, True, [lane("idle"), lane("waiting_gpu")]) == "waiting_gpu"
    # what the lanes cannot say stays the engine's: paused, stopped, crashed; one lane: as written
    assert api.effective_state({"state": "paused"}, True, [lane("eval"), lane("idle")]) == "paused"
    assert api.effective_state({"state": "waiting_gpu"}, False, [lane("eval"), lane("idle")]) == "crashed"
    assert api.effective_state({"state": "stopped"}, False, [lane("idle"), lane("idle")]) == "stopped"
    assert api.effective_state(meta, True, [lane("eval")]) == "waiting_gpu"

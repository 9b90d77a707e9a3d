"""engine.api.run_meta: a run's meta read into typed records, as today's engine writes it and
as an older or damaged run holds it (missing keys, strings where numbers were, None)."""

from __future__ import annotations

import math

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Interval
from kopt_supervisor.engine.decide.estimate import ClassResult, Verdict
from kopt_supervisor.engine.gpu import Assessment, GpuProcess, GpuState
from kopt_supervisor.engine.onboard.draft import DecisionCost

GPU0 = GpuState(
    0,
    name="H100",
    uuid="GPU-a",
    util_pct=3.0,
    mem_used_mib=512.0,
    mem_total_mib=81559.0,
    processes=(GpuProcess(4242, "python"),),
)
GPU1 = GpuState(1, name="H100", uuid="GPU-b")
STEP = {
    "version": 12,
    "phase": "eval",
    "step": "round 3",
    "done": 2,
    "total": 8,
    "phase_started_at": 100.0,
    "eta_s": 30.0,
    "t": 110.0,
}
VERDICT = Verdict("undecided", "looking", (ClassResult("cls=a", 3, 6, 10.0, 9.0, 0.9, 0.85, 0.95, "improved"),))

TODAY = {
    "state": "running",
    "baseline_commit": "abc123",
    "heartbeat": {"t": 120.5, "pid": 7},
    "progress": STEP,
    "paused": False,
    "active_s": 42.0,
    "engine_started_at": 90.0,
    "stop_reason": None,
    "last_error": None,
    "notice": "Timings are CPU timings.",
    "demo": {"kernel": "softmax", "gpu": False},
    "gpu": {
        "chosen": GPU1.to_dict(),
        "waited_s": 0.0,
        "assessments": [Assessment(GPU0, False, ["foreign process 4242"]).to_dict(), Assessment(GPU1, True).to_dict()],
        "t": 115.0,
        "lane": 1,
        "host": "local",
    },
    "live_classes": {"version": 12, "stage": "eval", "verdict": VERDICT.to_dict()},
    "live_log": "/runs/t/logs/v12/bench.log",
}


def test_meta_as_the_engine_writes_it():
    m = api.run_meta(TODAY)
    assert (m.baseline_commit, m.heartbeat_t, m.paused, m.active_s, m.engine_started_at) == (
        "abc123",
        120.5,
        False,
        42.0,
        90.0,
    )
    assert (m.stop_reason, m.last_error, m.notice, m.cpu_demo, m.live_log) == (
        "",
        "",
        "Timings are CPU timings.",
        True,
        "/runs/t/logs/v12/bench.log",
    )
    assert m.progress == api.LiveStep(12, "eval", "round 3", 2, 8, 30.0, 110.0, 100.0)
    assert m.gate.chosen == api.GpuRef(1, "GPU-b", "H100", "") and (m.gate.t, m.gate.lane) == (115.0, 1)
    busy, idle = m.gate.assessments
    assert (busy.index, busy.name, busy.uuid, busy.util_pct, busy.mem_used_mib, busy.mem_total_mib) == (
        0,
        "H100",
        "GPU-a",
        3.0,
        512.0,
        81559.0,
    )
    assert busy.processes == (api.GpuProcess(4242, "python"),) and not busy.idle
    assert busy.reasons == ("foreign process 4242",) and idle.idle and idle.reasons == ()
    live = m.live_classes
    assert live is not None and (live.version, live.stage) == (12, "eval")
    (c,) = live.classes
    assert (c.cls, c.best, c.cand, c.ratio, c.lo, c.hi, c.rounds, c.verdict) == (
        "cls=a",
        10.0,
        9.0,
        0.9,
        0.85,
        0.95,
        3,
        "improved",
    )


def test_an_empty_meta_is_a_run_nothing_recorded_yet():
    m = api.run_meta({})
    assert m == api.RunMeta() and m.gate == api.GateRecord() and m.progress is None and m.live_classes is None


def test_damaged_meta_reads_as_defaults_never_raises():
    m = api.run_meta(
        {
            "baseline_commit": 5,
            "heartbeat": "yesterday",
            "progress": {"version": "12", "phase": None, "step": 3, "done": True, "total": "8", "eta_s": math.inf},
            "paused": 1,
            "active_s": "42",
            "engine_started_at": None,
            "stop_reason": ["x"],
            "last_error": {"e": 1},
            "notice": None,
            "demo": "no GPU",
            "live_log": None,
            "gpu": {
                "chosen": {},
                "assessments": [
                    "GPU 0",
                    {
                        "gpu": {"index": "0", "name": None, "uuid": 7, "processes": [None, {"pid": "x"}]},
                        "idle": "yes",
                        "reasons": "busy",
                    },
                ],
                "t": "now",
                "lane": True,
            },
            "live_classes": {
                "version": 12.0,
                "verdict": {"classes": {"a": None, "b": {"ratio": "0.9", "rounds": 2.0}}},
            },
        }
    )
    assert (m.baseline_commit, m.heartbeat_t, m.active_s, m.engine_started_at) == (None, None, 0.0, None)
    assert (m.stop_reason, m.last_error, m.notice, m.cpu_demo, m.live_log, m.paused) == ("", "", "", False, "", True)
    assert m.progress == api.LiveStep(None, "", "", None, None, None, None, None)
    assert m.gate.chosen is None and (m.gate.t, m.gate.lane) == (None, None)
    (a,) = m.gate.assessments  # the entry that is not a mapping is left out
    assert (a.index, a.name, a.uuid, a.processes, a.idle, a.reasons) == (
        0,
        "",
        None,
        (api.GpuProcess(None, ""),),
        True,
        (),
    )
    live = m.live_classes
    assert live is not None and live.version is None and live.stage == ""
    assert [(c.cls, c.ratio, c.rounds) for c in live.classes] == [("a", None, None), ("b", None, None)]
    assert api.run_meta({"progress": {}}).progress is None  # an empty step: none yet


def test_a_lane_state_as_lane_states_writes_it_and_from_junk():
    review = {
        "place": 2,
        "of": 3,
        "deadline": 500.0,
        "answer": {"kind": "more_rounds", "source": "cli", "t": 1.0, "command_id": 4},
        "more_rounds": False,
    }
    entry = {
        "lane": 1,
        "version": 7,
        "phase": "eval",
        "step": "round 2",
        "done": 1,
        "total": 4,
        "eta_s": None,
        "gpu": {"index": 2, "uuid": "GPU-c", "name": "H100", "host": "node-b"},
        "host": "node-b",
        "hypothesis": "unroll",
        "interval": Interval("cls=a", 0.95, 0.9, 1.0, 3, "undecided").to_dict(),
        "review": review,
    }
    s = api.lane_state(entry)
    assert (s.lane, s.version, s.phase, s.step, s.done, s.total, s.host, s.hypothesis) == (
        1,
        7,
        "eval",
        "round 2",
        1,
        4,
        "node-b",
        "unroll",
    )
    assert s.gpu == api.GpuRef(2, "GPU-c", "H100", "node-b")
    assert s.interval == Interval("cls=a", 0.95, 0.9, 1.0, 3, "undecided")
    assert s.review == api.LaneReview(2, 3, "more_rounds", False)
    junk = api.lane_state(
        {
            "lane": "1",
            "version": True,
            "gpu": "GPU 0",
            "interval": {"delta_pct": -5.0},
            "review": {"place": 0, "of": "3", "answer": "accept", "more_rounds": 1},
        }
    )
    assert (junk.lane, junk.version, junk.gpu, junk.interval) == (0, None, None, None)
    assert junk.review == api.LaneReview(None, None, "", True)
    assert api.lane_state(None) == api.LaneState(0, None) and api.lane_state({"review": {}}).review is None


def test_a_decision_estimate_keeps_the_recorded_line():
    cost = DecisionCost("process", 40.0, 0.0, 0.5, 10, 6, 16, False, 5)
    e = api.decision_estimate(cost.to_dict())
    assert e == api.DecisionEstimate("process", cost.seconds_change, cost.seconds_tie, cost.slow, cost.text())
    assert api.decision_estimate({"slow": "yes", "seconds_tie": "1"}) == api.DecisionEstimate("", None, None, True, "")
    assert api.decision_estimate(None) is None and api.decision_estimate({}) is None

"""engine.api.run_summary.status_report and spending: the status JSON (and a `kopt ls` entry)
read back into typed records, as reading.status writes it and as a damaged one holds it."""

from __future__ import annotations

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Iteration
from kopt_supervisor.engine.records import AgentRun

AGENT = AgentRun("gemini", None, 900, 100, wall_s=13.0).to_dict()
SPENT = api.agent_spending([Iteration(1, "keep", record={"proposal": {"agent": AGENT}})], 5.0, 50000)

STATUS = {
    "tag": "t",
    "state": "running",
    "iteration": 3,
    "iteration_status": "running",
    "best_commit": "c1",
    "baseline_commit": "c0",
    "tampered": None,
    "best_speedup": 1.25,
    "consecutive_regressions": 1,
    "recent_regressions": [],
    "candidates": 3,
    "keeps": 1,
    "pending_reviews": [2],
    "reviews": [
        {
            "version": 2,
            "lane": 1,
            "answer": {"kind": "accept", "source": "cli", "t": 1.0, "command_id": 3},
            "more_rounds": False,
            "place": 1,
            "of": 1,
        }
    ],
    "masked": [],
    "stop_reason": None,
    "engine_pid": 4242,
    "heartbeat_age_s": 1.5,
    "paused": False,
    "progress": {"version": 3, "phase": "propose", "step": "the agent runs", "done": None, "total": None},
    "last_error": None,
    "notice": None,
    "sandbox": {"confined": False, "summary": "", "ever_unconfined": True},
    "unsandboxed": True,
    "decision_cost": {
        "mode": "served",
        "seconds_change": 8.0,
        "seconds_tie": 14.0,
        "slow": False,
        "text": "one decision takes 8 s",
    },
    "timings": {
        "last_version": 2,
        "last": {"total_s": 40.0, "engine_s": 2.0},
        "engine_s_median": 2.0,
        "engine_s_max": 3.0,
        "iterations": 2,
    },
    "agent": SPENT,
    "lanes": [{"lane": 0, "version": 3, "phase": "propose"}, {"lane": 1, "version": None, "phase": "idle"}],
}


def test_the_status_json_as_reading_status_writes_it():
    r = api.status_report(STATUS)
    assert (r.tag, r.state, r.iteration, r.iteration_status, r.best_commit, r.baseline_commit, r.best_speedup) == (
        "t",
        "running",
        3,
        "running",
        "c1",
        "c0",
        1.25,
    )
    assert (r.keeps, r.candidates, r.consecutive_regressions, r.pending_reviews) == (1, 3, 1, (2,))
    assert r.reviews == (api.QueuedReview(2, 1, "accept", False),)
    assert (r.engine_pid, r.heartbeat_age_s, r.stop_reason, r.last_error, r.error) == (4242, 1.5, "", "", "")
    assert r.progress == api.LiveStep(3, "propose", "the agent runs")
    assert r.unsandboxed and r.sandbox.startswith("UNSANDBOXED (--no-sandbox)")
    assert r.decision_cost == api.DecisionEstimate("served", 8.0, 14.0, False, "one decision takes 8 s")
    assert r.agent == api.spending(SPENT)
    t = r.timings
    assert (t.last_version, t.engine_s_median, t.engine_s_max, t.iterations) == (2, 2.0, 3.0, 2)
    assert t.last is not None and (t.last.total_s, t.last.engine_s) == (40.0, 2.0)
    assert [(x.lane, x.version, x.phase) for x in r.lanes] == [(0, 3, "propose"), (1, None, "idle")]


def test_an_unreadable_run_of_kopt_ls_and_a_damaged_status():
    r = api.status_report({"tag": "t", "state": "unreadable", "error": "database is locked"})
    assert (r.tag, r.state, r.error, r.sandbox, r.progress, r.lanes) == (
        "t",
        "unreadable",
        "database is locked",
        "",
        None,
        (),
    )
    assert r.agent == api.AgentSpending() and r.timings == api.PhaseTimings()
    bad = api.status_report(
        {
            "state": None,
            "iteration": "3",
            "keeps": None,
            "pending_reviews": "2",
            "reviews": [None, {"version": "2"}],
            "progress": "propose",
            "sandbox": "off",
            "timings": {"last": "v2", "iterations": "2"},
            "lanes": "two",
            "agent": ["x"],
        }
    )
    assert (bad.state, bad.iteration, bad.keeps, bad.pending_reviews, bad.progress) == ("?", None, 0, (), None)
    assert bad.reviews == (api.QueuedReview(None, None),) and bad.lanes == ()
    assert bad.sandbox == "not recorded (no engine of this kopt version has run it)"
    assert bad.timings == api.PhaseTimings() and bad.agent == api.AgentSpending()


def test_spending_and_its_line():
    s = api.spending(SPENT)
    assert (s.runs, s.runs_without_cost, s.tokens, s.runs_without_tokens, s.wall_s) == (1, 1, 1000, 0, 13.0)
    assert (s.budget_usd, s.budget_tokens, s.no_cost_agents) == (5.0, 50000, ("gemini",))
    assert (
        api.agent_line(s)
        == api.agent_line(SPENT)
        == "1k of 50k tok · 1 run in 0:13 · no cost reported (gemini), budget $5.00"
    )
    assert api.spending({"runs": "2", "cost_usd": None, "no_cost_agents": "x"}) == api.AgentSpending()
    assert api.agent_line({"runs": None}) == ""

"""engine.api.iteration_record: each part of an iteration's record read into a typed record,
as today's engine writes it (its own to_dict) and as an older or damaged record holds it."""

from __future__ import annotations

import dataclasses
import math

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Iteration
from kopt_supervisor.engine.decide.confirmation import ClassCheck, Confirmation
from kopt_supervisor.engine.decide.estimate import ClassResult, Verdict
from kopt_supervisor.engine.decide.external_truth import ExternalTruth
from kopt_supervisor.engine.diffscan.findings import Finding
from kopt_supervisor.engine.propose.proposer import Citation, Plan, PlanAssessment
from kopt_supervisor.engine.records import AgentRun

DAMAGED = {
    "classes": ["a"],
    "decision": "keep",
    "review": None,
    "gpu": 3,
    "reverify": [],
    "confirmation": "ok",
    "external_truth": 1,
    "profile": "none",
    "diff_scan": {"findings": "x"},
    "plan": None,
    "timings": "slow",
    "proposal": "an agent",
    "repairs": {"agent": {}},
    "changed_files": "kernel.py",
    "roofline": [1],
}
"""Every part the wrong type: each reads as empty."""


def test_classes_and_the_decision_as_the_loop_closes_them():
    verdict = Verdict(
        "keep",
        "cls=a -10%",
        (
            ClassResult("cls=b", 4, 8, 5.0, 5.1, 1.02, 0.99, 1.05, "tied"),
            ClassResult("cls=a", 4, 8, 10.0, 9.0, 0.9, 0.85, 0.95, "improved"),
        ),
        rounds=4,
        gpu_seconds=12.5,
        flags=("outliers_dropped",),
        focus="cls=a",
    )
    record = {
        "classes": {c.cls: {**c.to_dict(), "pct_of_peak": 41.0 if c.cls == "cls=a" else None} for c in verdict.classes},
        "decision": {**verdict.to_dict(), "by": "engine"},
        "roofline": {"classes": {"cls=b": {"pct_geomean": 12.0}}},
    }
    a, b = api.recorded_classes(record)  # by name
    assert (a.cls, a.best, a.cand, a.ratio, a.lo, a.hi, a.rounds, a.verdict, a.pct_of_peak) == (
        "cls=a",
        10.0,
        9.0,
        0.9,
        0.85,
        0.95,
        4,
        "improved",
        41.0,
    )
    assert (b.cls, b.pct_of_peak) == ("cls=b", None) and api.roofline_pct(record) == {"cls=b": 12.0}
    assert api.recorded_decision(record) == api.RecordedDecision(
        "keep", "cls=a -10%", "engine", 4, 12.5, ("outliers_dropped",), "cls=a"
    )


def test_a_baseline_and_an_old_record_keep_what_they_hold():
    baseline = {"classes": {"x": {"best": 3.0, "cand": None, "ratio": math.nan, "rounds": "3", "verdict": None}}}
    (x,) = api.recorded_classes(baseline)
    assert (x.best, x.cand, x.ratio, x.rounds, x.verdict) == (3.0, None, None, None, "")
    old = {"decision": {"verdict": "keep", "reason": None, "rounds": 4.0, "gpu_seconds": "12", "flags": ["a", 3, None]}}
    assert api.recorded_decision(old) == api.RecordedDecision("keep", "", "", None, None, ("a",), "")
    assert api.recorded_classes(DAMAGED) == () and api.recorded_decision(DAMAGED) == api.RecordedDecision()
    assert api.roofline_pct(DAMAGED) == {}


def test_the_review_and_the_gpu():
    record = {
        "review": {"opened_at": 10.0, "deadline": 70.0, "reason": "borderline"},
        "gpu": {
            "index": 1,
            "uuid": "GPU-b",
            "name": "H100",
            "host": "local",
            "flagged_rounds": [{"round": 2, "flags": ["throttle", "foreign"]}, "x"],
        },
    }
    assert api.recorded_review(record) == api.RecordedReview(10.0, 70.0, "borderline")
    g = api.recorded_gpu(record)
    assert g.gpu == api.GpuRef(1, "GPU-b", "H100", "local") and g.flagged_rounds == (("throttle", "foreign"),)
    assert api.recorded_review({"review": {"deadline": "soon"}}) == api.RecordedReview()
    assert api.recorded_review(DAMAGED) == api.RecordedReview() and api.recorded_gpu(DAMAGED) == api.GpuEvidence()
    assert api.gpu_ref({"index": True, "uuid": 5, "name": None}) == api.GpuRef() and api.gpu_ref("GPU 0") is None


def test_the_keeps_evidence_reads_into_the_engines_own_types():
    conf = Confirmation("confirmed", "shown", 3, (ClassCheck("cls=a", 0.9, 0.91, 0.88, 0.94, "shown"),), 41.5, "served")
    truth = ExternalTruth("profiler", "confirmed", "agrees", {"agreement": {"cls=a": "agrees"}})
    finding = Finding("env_read", "kernel.py", 12, "os.environ['X']")
    record = {
        "confirmation": conf.to_dict(),
        "external_truth": truth.to_dict(),
        "reverify": {"verdict": "keep", "reason": "fresh -9%", "agrees": True, "seconds": 8.0},
        "diff_scan": {"findings": [dataclasses.asdict(finding)]},
    }
    assert api.recorded_confirmation(record) == conf and api.recorded_truth(record) == truth
    assert api.recorded_reverify(record) == api.RecordedReverify(True, "keep", "fresh -9%", 8.0)
    assert api.diff_findings(record) == (finding,)
    old = {
        "confirmation": {"outcome": "refuted", "looks": "3", "classes": {"cls=a": {"ratio": None}}},
        "external_truth": {"reason": "timer"},
        "reverify": {"agrees": "yes"},
        "diff_scan": {"findings": [{"rule": "r", "line": "12"}, None]},
    }
    c = api.recorded_confirmation(old)
    assert c is not None and (c.outcome, c.looks, c.seconds, c.path) == ("refuted", 0, 0.0, "")  # not "served"
    assert c.classes[0].cls == "cls=a" and math.isnan(c.classes[0].ratio)
    assert api.recorded_truth(old) == ExternalTruth("", "", "timer", {})
    assert api.recorded_reverify(old) == api.RecordedReverify(False)
    assert api.diff_findings(old) == (Finding("r", "", 0, ""),)
    for parse in (api.recorded_confirmation, api.recorded_truth, api.recorded_reverify, api.recorded_profile):
        assert parse(DAMAGED) is None and parse({}) is None
    assert api.diff_findings(DAMAGED) == ()


def test_the_plan_with_its_citations():
    plan = PlanAssessment(
        True, Plan("unroll the loop", "cls=a"), (Citation("class", "cls=a", "cls=a 10 us"),), ("uncited",), "why"
    )
    assert api.recorded_plan({"plan": plan.to_dict()}) == api.RecordedPlan(
        "unroll the loop", (Citation("class", "cls=a", "cls=a 10 us"),), ("uncited",), "why"
    )
    odd = {"plan": {"hypothesis": None, "citations": [{"kind": 1, "term": "t"}, "x"], "flags": "uncited"}}
    assert api.recorded_plan(odd) == api.RecordedPlan("", (Citation("", "t", ""),), (), "")
    assert api.recorded_plan(DAMAGED) is None


def test_timings_in_the_order_an_iteration_passes_them():
    record = {
        "timings": {
            "looks_s": [1.0, 2.5, "x"],
            "proposer_s": 30.0,
            "gate_wait_s": 0.5,
            "total_s": 40.0,
            "engine_s": 2.0,
            "police_s": "1",
        }
    }
    t = api.recorded_timings(record)
    assert (t.total_s, t.engine_s) == (40.0, 2.0)
    assert [(p, s) for p, s, _ in t.rows] == [
        ("gate wait", 0.5),
        ("proposer", 30.0),
        ("looks", 3.5),
        ("total", 40.0),
        ("kopt itself", 2.0),
    ]
    assert api.recorded_timings(DAMAGED) == api.IterationTimings() == api.iteration_timings(None)


def test_agent_runs_of_the_proposal_and_each_repair():
    run = AgentRun(
        "claude-code",
        0.42,
        1000,
        200,
        cache_read_tokens=800,
        session_id="s1",
        resumed=True,
        model="opus",
        wall_s=12.5,
        exit=0,
        transcript_path="logs/v3/agent.jsonl",
        transcript_bytes=2048,
        transcript_cut=True,
        notes=("no result event",),
    )
    record = {"proposal": {"agent": run.to_dict()}, "repairs": [{"error": "no agent"}, {"agent": run.to_dict()}]}
    assert api.agent_runs(record) == (api.LabelledRun("proposal", run), api.LabelledRun("repair 2", run))
    odd = api.agent_runs(
        {
            "proposal": {
                "agent": {
                    "cost_usd": "0.4",
                    "input_tokens": 10.0,
                    "exit": True,
                    "session_id": 5,
                    "notes": ["a", 1],
                    "resumed": "yes",
                }
            }
        }
    )
    assert odd == (api.LabelledRun("proposal", AgentRun(input_tokens=10, notes=("a",))),)
    assert api.agent_runs(DAMAGED) == ()


def test_changed_files_the_origin_and_a_regression_summary():
    record = {"changed_files": ["kernel.py", 3], "proposal": {"submitted_by": "mcp:claude-code 2.1"}}
    assert api.changed_files(record) == ("kernel.py",) and api.changed_files(DAMAGED) == ()
    assert api.recorded_origin(record) == api.ProposalOrigin("mcp", "claude-code 2.1")
    assert api.recorded_origin(DAMAGED).via == "unknown"
    it = Iteration(
        4,
        "regression",
        hypothesis="tile",
        target_class="cls=a",
        record={"classes": {"cls=a": {"ratio": 1.1, "delta_pct": 10.0}}},
    )
    (summary,) = api.counters([Iteration(0, "baseline", commit="c0"), it]).recent_regressions
    r = api.regression_summary(summary)
    assert (r.version, r.cls, r.delta_pct, r.hypothesis) == (4, "cls=a", 10.0, "tile")
    assert api.regression_summary({"version": "4", "class": None, "delta_pct": "10"}) == api.RegressionSummary(0)

"""results.md and `kopt status --json` name what confirmed each keep outside the candidate's
process (engine/decide/external_truth.py), and say so when only the bench's timer did."""

from __future__ import annotations

from kopt_supervisor.engine.api.run_summary import external_truth
from kopt_supervisor.engine.decide.external_truth import TIMER_ONLY, OsTruth, of_os_time, timer_only
from kopt_supervisor.engine.records import Iteration, Status
from tests.report.test_report_units import report_of, two_iterations

SHOWN = of_os_time(
    OsTruth(
        "shown",
        "the OS's accounting shows 0.04 s of CPU time saved per look (0.03..0.05 s "
        "at 99%) of the 0.041 s the bench claims",
        8,
        0.041,
    )
)


def kept_section(its: list[Iteration]) -> str:
    return report_of(its).split("## Kept iterations")[1].split("## Dispatch")[0]


def test_the_kept_iterations_table_names_each_keeps_external_truth():
    its = two_iterations({"external_truth": SHOWN.to_dict()})
    kept = kept_section(its)
    assert "| confirmed by (external truth) |" in kept
    assert "| the OS's accounting shows 0.04 s of CPU time saved per look" in kept
    assert TIMER_ONLY not in kept


def test_a_keep_confirmed_by_the_benchs_timer_only_says_so():
    none = timer_only('no profiler for the nvidia GPU ([profile].kind = "none")')
    kept = kept_section(two_iterations({"external_truth": none.to_dict()}))
    assert f"| {TIMER_ONLY}: no profiler for the nvidia GPU" in kept
    assert f"{TIMER_ONLY.capitalize()}: v1 (1 of 1 keeps:" in kept
    older = kept_section(two_iterations({}))  # kept by a kopt that recorded none
    assert f"| {TIMER_ONLY} (no external truth recorded) |" in older


def test_status_json_names_bests_external_truth_and_the_timer_only_keeps():
    its = two_iterations({"external_truth": SHOWN.to_dict()})
    its[0].status = Status.BASELINE
    its.append(
        Iteration(
            2, Status.ACCEPTED, commit="D" * 40, best_commit_before="C" * 40, started_at=0.0, record={"ended_seq": 5}
        )
    )
    got = external_truth(its)
    assert got == {
        "version": 2,
        "kind": "none",
        "outcome": "unconfirmed",
        "reason": f"{TIMER_ONLY} (accepted in review)",
        "timer_only": [2],
    }
    got = external_truth(its[:2])
    assert got["version"] == 1 and got["kind"] == "os_time" and got["outcome"] == "confirmed"
    assert got["reason"] == SHOWN.reason and got["timer_only"] == []
    assert external_truth(its[:1]) == {"version": None, "kind": None, "outcome": None, "reason": None, "timer_only": []}

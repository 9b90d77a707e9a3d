"""experiments/h100_wave3 without a GPU: what it reads out of a run's records (the redesign's
keys and their older fallbacks), what it calls refuted and by what, the restart driver of the
power test against a real run.db-shaped file, the scripted proposer's changes, the prescan's
choice, the preflight's report of a missing piece, and that the hostile candidates do what they
claim (the timer patch scales the harness's CPU timer once, the stolen outputs are wrong on new
inputs)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments import device_wave
from experiments.h100_wave3 import candidates, preflight, records
from experiments.h100_wave3.prescan_rms import choose, neighbours
from experiments.h100_wave3.propose_scripted import apply, plan_text
from experiments.h100_wave3.records import Span
from experiments.h100_wave3.run import RestartDriver, hostile_verdict
from kopt_supervisor.engine.records import Iteration, Status

REPO = Path(__file__).resolve().parents[1]
NARROW, WIDE = "dclass=narrow", "dclass=wide"


def it(
    version: int, status: Status, record: dict[str, Any], *, start: float, end: float | None, masked: bool = False
) -> Iteration:
    commit = "c" * 40 if status in (Status.BASELINE, Status.KEEP, Status.ACCEPTED) else None
    return Iteration(
        version=version,
        status=status,
        hypothesis=f"h{version}",
        commit=commit,
        started_at=start,
        finished_at=end,
        masked=masked,
        record=record,
    )  # type: ignore[arg-type]


def classes(narrow: tuple[float, float, float], wide: tuple[float, float, float]) -> dict[str, Any]:
    """(best, cand, ratio) per class, verdict improved when the ratio is below 0.99."""
    return {
        cls: {"best": b, "cand": c, "ratio": r, "verdict": "improved" if r < 0.99 else "tied"}
        for cls, (b, c, r) in ((NARROW, narrow), (WIDE, wide))
    }


# --- the records ---------------------------------------------------------------------------


def test_the_redesigns_confirmation_and_truth_are_read_where_they_landed() -> None:
    rec = {
        "confirmation": {"outcome": "confirmed", "looks": 3, "seconds": 4.5, "path": "served", "reason": "r"},
        "reverify": {"verdict": "keep", "seconds": 99.0},  # older key: the newer wins
        "external_truth": {"kind": "profiler", "outcome": "confirmed", "reason": "narrow -4%", "figures": {}},
        "timings": {"reverify_s": 99.0, "looks_s": [1.0, 0.5, 0.5, 2.0, 0.5], "reload_s": 0.25},
    }
    spans = {"eval": Span(3, 10.0, 11.0), "confirmation": Span(2, 12.0, 13.0)}
    c = records.confirmation_of(rec, spans)
    assert c is not None and (c["record_key"], c["seconds"], c["verdict"], c["looks"], c["path"]) == (
        "confirmation",
        4.5,
        "confirmed",
        3,
        "served",
    )
    # the decision: its own three eval looks and the reload, not the confirmation's looks
    assert records.decision_seconds(rec, spans, c) == (2.25, "timings looks_s of its eval looks + reload_s")
    t = records.external_truth_of(rec)
    assert (t["kind"], t["outcome"], t["source"]) == ("profiler", "confirmed", "record['external_truth']")


def test_without_the_new_keys_the_older_records_are_read_and_say_so() -> None:
    rec = {
        "reverify": {"verdict": "keep", "rounds": 10, "agrees": True},
        "timings": {"reverify_s": 83.3, "looks_s": [0.4] * 15},
    }
    c = records.confirmation_of(rec, {})
    assert c is not None and (c["record_key"], c["seconds"], c["seconds_source"], c["looks"]) == (
        "reverify",
        83.3,
        "timings['reverify_s']",
        10,
    )
    seconds, src = records.decision_seconds(rec, {}, c)
    assert seconds == pytest.approx(0.0) and src == "all looks + reload_s - the confirmation"  # 6 s of looks < 83 s
    assert records.confirmation_of({"timings": {"looks_s": [1.0]}}, {}) is None
    assert records.decision_seconds({"timings": {"decision_s": 3.21}}, {}, None) == (3.21, "timings['decision_s']")
    # eval samples without per-look seconds: their span plus the first look
    assert records.decision_seconds({"timings": {"looks_s": [2.0]}}, {"eval": Span(4, 100.0, 103.0)}, None)[0] == 5.0


def test_the_profilers_agreement_stands_in_for_a_missing_external_truth() -> None:
    agree = {"profile": {"agreement": {"classes": [{"cls": NARROW, "status": "agrees"}], "note": "n"}}}
    refute = {"profile": {"agreement": {"classes": [{"cls": NARROW, "status": "disagrees"}]}}}
    assert records.external_truth_of(agree)["outcome"] == "confirmed"
    assert records.external_truth_of(refute)["outcome"] == "refuted"
    assert records.external_truth_of({"profile": {"error": "ncu exited 1"}})["outcome"] == "failed"
    assert records.external_truth_of({})["kind"] == "none recorded"


def test_rows_and_figures_of_a_demo_run() -> None:
    base = it(
        0,
        Status.BASELINE,
        {"classes": classes((100.0, 100.0, 1.0), (200.0, 200.0, 1.0)), "timings": {"total_s": 30.0}},
        start=1000.0,
        end=1030.0,
    )
    keep1 = it(
        1,
        Status.KEEP,
        {
            "classes": classes((100.0, 80.0, 0.8), (200.0, 200.0, 1.0)),
            "confirmation": {"outcome": "confirmed", "seconds": 6.0, "looks": 2},
            "external_truth": {"kind": "profiler", "outcome": "confirmed"},
            "timings": {"total_s": 18.0, "looks_s": [0.5] * 6, "profiler_s": 8.0},
            "decision": {"verdict": "keep", "rounds": 4},
        },
        start=1030.0,
        end=1048.0,
    )
    tie = it(
        2,
        Status.TIE,
        {"classes": classes((80.0, 80.0, 1.0), (200.0, 200.0, 1.0)), "timings": {"total_s": 7.0, "looks_s": [0.5] * 9}},
        start=1048.0,
        end=1055.0,
    )
    keep2 = it(
        3,
        Status.KEEP,
        {
            "classes": classes((80.0, 80.0, 1.0), (200.0, 160.0, 0.8)),
            "confirmation": {"outcome": "confirmed", "seconds": 12.0},
            "external_truth": {"kind": "profiler", "outcome": "confirmed"},
            "timings": {"total_s": 25.0, "looks_s": [0.5] * 5, "profiler_s": 9.0},
        },
        start=1055.0,
        end=1080.0,
    )
    spans = {
        1: {"eval": Span(4, 0, 1), "confirmation": Span(2, 1, 2)},
        2: {"eval": Span(9, 0, 1)},
        3: {"eval": Span(3, 0, 1)},
    }
    rows = records.iteration_rows([keep2, tie, base, keep1], spans)  # any order in
    assert [r["version"] for r in rows] == [0, 1, 2, 3]
    # kopt's best speedup after each keep (engine.api.best_speedup): baseline/best per class, geomean
    assert rows[1]["best_speedup"] == pytest.approx((100 / 80) ** 0.5, abs=1e-3)
    assert rows[3]["best_speedup"] == pytest.approx(((100 / 80) * (200 / 160)) ** 0.5, abs=1e-3)
    assert (rows[1]["t_s"], rows[3]["t_s"]) == (48.0, 80.0)
    assert rows[1]["decision_s"] == 2.0 and rows[2]["decision_s"] == 4.5
    assert rows[1]["bench_claimed_gain"] and not rows[2]["bench_claimed_gain"]
    fig = records.figures(rows)
    assert fig["keeps"] == [1, 3] and fig["candidates"] == 3 and fig["decided"] == 3
    assert fig["confirmation_s_per_keep"] == {"n": 2, "median": 9.0, "min": 6.0, "max": 12.0}
    assert fig["confirmation_target_met"] is False  # 12 s > 10 s
    assert fig["keep_iteration_s"]["max"] == 25.0 and fig["keep_iteration_target_met"] is False
    assert fig["external_truth_of_keeps"] == {"profiler confirmed": 2}
    assert [x["version"] for x in fig["best_speedup_over_time"]] == [1, 3]
    table = records.iteration_table(rows)
    assert len(table["rows"]) == 4 and table["rows"][1][9] == "profiler confirmed"


def test_targets_are_met_only_when_every_keep_meets_them() -> None:
    rows = [
        {
            "version": v,
            "status": "keep",
            "masked": False,
            "confirmation_s": c,
            "total_s": t,
            "decision_s": 1.0,
            "profiler_s": None,
            "external_truth": None,
        }
        for v, c, t in ((1, 4.0, 15.0), (2, 9.9, 19.9))
    ]
    fig = records.figures(rows)
    assert fig["confirmation_target_met"] and fig["keep_iteration_target_met"]
    assert not records.figures([])["confirmation_target_met"]  # no keep: nothing shown


# --- what refuted a hostile candidate --------------------------------------------------------


def row(
    status: str,
    *,
    flags: list[str] | None = None,
    truth: dict[str, Any] | None = None,
    reason: str = "",
    failing: str = "",
) -> dict[str, Any]:
    return {
        "version": 1,
        "status": status,
        "flags": flags or [],
        "external_truth": truth,
        "reason": reason,
        "failing": failing,
        "verdict": status,
        "bench_claimed_gain": True,
        "classes": {NARROW: {"bench_ratio": 0.9, "profiler_ratio": 1.0}},
    }


def test_hostile_verdicts_name_what_refuted_them() -> None:
    prof = hostile_verdict("timer-class-walk", row("rejected", flags=["profiler_disagrees"]), "the profiler")
    assert prof["refuted_by"] == "the profiler" and prof["as_expected"] and "profiler +0.00%" in prof["classes"]
    os_time = hostile_verdict(
        "timer-class-walk",
        row("rejected", flags=["external_truth_refutes"], truth={"kind": "os_time", "outcome": "refuted"}),
        "the OS's accounting",
    )
    assert os_time["refuted_by"] == "the OS's accounting" and os_time["as_expected"]
    audit = hostile_verdict(
        "stolen-outputs", row("fail_correctness", reason="kopt's audit: audited timed call"), "the profiler"
    )
    assert audit["refuted_by"] == "kopt's output audit" and audit["as_expected"]
    own_check = hostile_verdict("stolen-outputs", row("fail_correctness", reason="err 3.1 x tolerance"), "x")
    assert own_check["refuted_by"] == "the bench's own correctness check" and not own_check["as_expected"]
    kept = hostile_verdict("timer-class-walk", row("keep"), "the profiler")
    assert kept["kept"] and not kept["as_expected"]
    noise = hostile_verdict("timer-class-walk", row("rejected", flags=["undecided_at_max_rounds"]), "the profiler")
    assert noise["refuted_by"] == "flags undecided_at_max_rounds" and not noise["as_expected"]
    assert hostile_verdict("stolen-outputs", None, "x")["refuted_by"] == "no record"


# --- the power test's driver ------------------------------------------------------------------


def test_the_driver_restarts_after_each_keep_counts_tries_and_stops_once(tmp_path: Path) -> None:
    ws = tmp_path / "t"
    ws.mkdir()
    con = sqlite3.connect(ws / "run.db")
    con.execute("CREATE TABLE iterations (version INTEGER PRIMARY KEY, status TEXT, finished_at REAL)")
    sent: list[list[str]] = []
    d = RestartDriver(tmp_path, "t", 3, send=lambda args: sent.append(args) or "ok")

    def end(version: int, status: str | None) -> None:
        con.execute("INSERT INTO iterations VALUES (?, ?, ?)", (version, status or "running", 1.0 if status else None))
        con.commit()
        d()

    end(0, "baseline")
    end(1, "keep")
    assert [a[0] for a in sent] == ["restart"] and sent[0][:4] == ["restart", "t", "--from", "v0"]
    end(2, "interrupted")  # the restart ended the waiting proposal: not a try
    end(3, "tie")
    end(4, "fail_propose")
    end(5, None)  # still running: not seen yet
    assert d.counted == [1, 3] and len(sent) == 1
    con.execute("UPDATE iterations SET status = 'keep', finished_at = 2.0 WHERE version = 5")
    con.commit()
    d()
    d()
    assert d.counted == [1, 3, 5]
    assert [a[0] for a in sent] == ["restart", "stop"]  # the third try needs no restart; one stop
    assert [r["after"] for r in d.restarts] == [1]


# --- the scripted proposer, the prescan, the candidates -----------------------------------


def test_the_scripted_proposer_applies_each_kind(tmp_path: Path) -> None:
    (tmp_path / "solution").mkdir()
    (tmp_path / "solution" / "rmsnorm.py").write_text("x = 1\n")
    (tmp_path / "params.json").write_text(json.dumps({"*": {"num_warps": 1}, NARROW: {"num_warps": 2}}))
    assert apply(tmp_path, candidates.comment(), "7")
    assert (
        (tmp_path / "solution" / "rmsnorm.py")
        .read_text()
        .endswith("# A/A 7: a comment-only change (the same kernel code)\n")
    )
    change = candidates.params_change(NARROW, {"num_warps": 4}, "h", wait_if_same_s=1.0)
    assert apply(tmp_path, change, "8")
    assert json.loads((tmp_path / "params.json").read_text())[NARROW] == {"num_warps": 4}
    assert not apply(tmp_path, change, "9")  # BEST holds it already: no change
    assert plan_text(change, "8") == "h\ntarget_class: dclass=narrow\n"
    assert (
        plan_text(candidates.comment(), "3") == "A/A 3: a comment-only change; the kernel's code is the same\n"
        "scope: global\n"
    )


def test_the_scripted_proposer_as_kopt_runs_it(tmp_path: Path) -> None:
    """The script itself: a held change waits, then exits 3; a repair is refused."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "params.json").write_text(json.dumps({"*": {}, NARROW: {"num_warps": 4}}))
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"default": candidates.params_change(NARROW, {"num_warps": 4}, "h", wait_if_same_s=0.2)})
    )
    script = REPO / "experiments" / "h100_wave3" / "propose_scripted.py"
    env = {"KOPT_ITERATION": "4", "KOPT_PLAN": str(tmp_path / "plan.md"), "PATH": "/usr/bin:/bin"}
    held = subprocess.run([sys.executable, str(script), str(plan)], cwd=tree, env=env, capture_output=True, text=True)
    assert held.returncode == 3 and "already holds" in held.stdout and not (tmp_path / "plan.md").exists()
    repair = subprocess.run(
        [sys.executable, str(script), str(plan)],
        cwd=tree,
        env={**env, "KOPT_REPAIR": "1"},
        capture_output=True,
        text=True,
    )
    assert repair.returncode == 1


def test_the_prescan_chooses_closest_to_target_inside_the_window_else_the_smallest_above() -> None:
    steps = [{"name": n, "slowdown_pct": p} for n, p in (("a", 9.0), ("b", 2.0), ("c", 3.6), ("d", -4.0))]
    assert choose(steps, 3.0) == {"name": "c", "slowdown_pct": 3.6, "in_window": True}
    assert choose([s for s in steps if s["name"] in "ad"], 3.0) == {
        "name": "a",
        "slowdown_pct": 9.0,
        "in_window": False,
    }
    assert choose([{"name": "d", "slowdown_pct": 1.0}], 3.0) is None
    assert neighbours([1, 2, 4, 8], 1) == [2] and neighbours([1, 2, 4, 8], 4) == [2, 8] and neighbours([1], 3) == []


def test_allow_entries_name_each_rule_on_its_path_once() -> None:
    found = [
        {"rule": "dynamic-access", "path": "solution/rmsnorm.py"},
        {"rule": "dynamic-access", "path": "solution/rmsnorm.py"},
        {"rule": "input-cache", "path": "a.py"},
    ]
    assert candidates.allow_for(found) == ["dynamic-access:solution/rmsnorm.py", "input-cache:a.py"]


HOSTILE_CHECK = """
import itertools, sys, time
import torch
from kopt_supervisor.kernels.harness import timing
mode = sys.argv[1]
if mode == "timer":
    time.process_time = itertools.count().__next__  # the CPU timer's clock, ticking one second per reading
    t = timing.CpuTimer(lambda: None, 10, warm_blocks=0)
    before = t.block()
    src = sys.stdin.read()
    ns = {"torch": torch}
    exec(src, ns)
    exec(src, ns)  # the solution imported again in the same process: the patch does not stack
    print(t.block() / before)
else:
    def rms_norm(x, weight, eps=1e-6, out=None):
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight
        return y if out is None else out.copy_(y)
    ns = {"rms_norm": rms_norm, "torch": torch}
    exec(sys.stdin.read(), ns)
    f = ns["rms_norm"]
    g = torch.Generator().manual_seed(0)
    w = torch.ones(8)
    checked = torch.randn(4, 8, generator=g)
    first = f(checked, w, out=torch.empty(4, 8)).clone()
    timed = torch.randn(4, 8, generator=g)
    got = f(timed, w, out=torch.empty(4, 8))
    print(bool(torch.allclose(first, rms_norm(checked, w))), bool(torch.allclose(got, rms_norm(timed, w))),
          bool((got == first[:1]).all()))
"""


def test_the_timer_patch_makes_the_harness_timer_report_90_percent_once() -> None:
    got = subprocess.run(
        [sys.executable, "-c", HOSTILE_CHECK, "timer"],
        input=candidates.TIMER_WALK,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    assert float(got.stdout) == pytest.approx(0.9)  # not 0.81: imported twice, wrapped once


def test_stolen_outputs_are_right_on_the_checked_inputs_and_wrong_on_new_ones() -> None:
    got = subprocess.run(
        [sys.executable, "-c", HOSTILE_CHECK, "stolen"],
        input=candidates.STOLEN_OUTPUTS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["True", "False", "True"]  # honest first, then the first row broadcast


# --- the preflight and the summary ----------------------------------------------------------------


def test_a_missing_piece_is_reported_with_how_it_was_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        preflight,
        "PIECES",
        {
            "here": preflight._module("json"),
            "not here": preflight._module("kopt_supervisor.no_such_piece"),
            "broken check": lambda: 1 / 0,
        },
    )  # type: ignore[dict-item]
    found = preflight.pieces()
    assert found["here"]["present"] and not found["not here"]["present"]
    assert "no_such_piece" in found["not here"]["how"] and "ZeroDivisionError" in found["broken check"]["how"]
    assert preflight.missing(found) == ["not here", "broken check"]


def test_the_summary_heads_with_commit_gpu_and_missing_pieces(tmp_path: Path) -> None:
    s = device_wave.Summary(tmp_path, "part9", "test", "bash experiments/h100_wave3.sh part9")
    s.data.update(commit="abc123", gpu="NVIDIA H100 80GB HBM3", missing_pieces=["engine: x"])
    with device_wave.measured(s, "a step") as e:
        e["headline"] = "42 s"
    md = (tmp_path / "summary.md").read_text()
    assert "- commit: abc123" in md and "- gpu: NVIDIA H100 80GB HBM3" in md and "engine: x" in md
    assert json.loads((tmp_path / "summary.json").read_text())["steps"]["a step"]["ok"] is True


def test_the_script_refuses_an_unknown_part() -> None:
    got = subprocess.run(
        ["bash", str(REPO / "experiments" / "h100_wave3.sh"), "part9"], capture_output=True, text=True, timeout=30
    )
    assert got.returncode == 2 and "part1|part2|part3|part4" in got.stdout


def test_the_power_parts_config_is_served_unless_it_asks_for_the_process_level_bench(tmp_path: Path) -> None:
    """part4's WAVE3_P4_PROCESS=1: the same RMSNorm run without the catalog's `serve`, so the
    ~3% step is tried through the process-level bench too (issue 26: served and process-level)."""
    from experiments.h100_wave3 import targets
    from kopt_supervisor.engine.config.toml_io import loads

    repo = targets.rms_repo(tmp_path / "repo", cpu=True)
    plan = tmp_path / "plan.json"
    served = loads(targets.rms_config(repo, tmp_path / "p.py", plan, profile=False))
    process = loads(targets.rms_config(repo, tmp_path / "p.py", plan, profile=False, process=True))
    assert "--serve" in served.target.serve
    assert (process.target.serve, process.target.serve_prepare) == ("", False)
    assert process.target.bench == served.target.bench and process.decide == served.decide
    (tmp_path / "kopt.toml").write_text(targets.rms_config(repo, tmp_path / "p.py", plan, profile=False, process=True))
    assert targets.measured_through(tmp_path / "kopt.toml") == "process-level bench runs"
    assert served.decide.pooled_noise is True  # the product's default; WAVE3_POOLED=0 turns it off
    own = loads(targets.rms_config(repo, tmp_path / "p.py", plan, profile=False, pooled=False))
    assert own.decide.pooled_noise is False and own.target == served.target

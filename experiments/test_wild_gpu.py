"""The wild_gpu experiment's pure logic (no GPU, no kopt run): the figures its summary reports
from iteration rows, the scripted plan it writes, the proposer's `replace` change, and that the
real changes name text the upstream kernels hold exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import wild_gpu
from experiments.h100_wave3 import propose_scripted

T0 = 1000.0


def row(version: int, status: str, hypothesis: str, decision_s: float | None) -> dict:
    return {
        "version": version,
        "status": status,
        "hypothesis": hypothesis,
        "decision_s": decision_s,
        "total_s": decision_s,
        "looks": 2,
        "classes": {"N=1024": {"bench_ratio": 1.031}},
    }


def test_figures_count_aa_keeps_and_time_the_first_verdict_from_init() -> None:
    rows = [
        row(0, "baseline", "baseline", None),
        row(1, "fail_bench", "A/A 1: comment", None),  # not a verdict: the first verdict is v2's
        row(2, "tie", "A/A 2: comment", 12.0),
        row(3, "regression", "REAL: num_warps", 25.0),
        row(4, "keep", "A/A 4: comment", 8.0),
    ]
    finished = {0: T0 + 40.0, 1: T0 + 50.0, 2: T0 + 70.5, 3: T0 + 95.0, 4: T0 + 110.0}
    fig = wild_gpu.wild_figures(rows, finished, T0, aa_target=2)
    assert fig["first_verdict_s_after_init"] == 70.5
    assert fig["aa"]["candidates"] == 3 and fig["aa"]["decided"] == 2
    assert fig["aa"]["kept"] == [4]
    assert fig["aa"]["decision_s"]["max"] == 12.0 and fig["aa"]["decision_s"]["n"] == 2
    assert fig["real"]["version"] == 3 and fig["real"]["status"] == "regression"
    assert fig["real"]["classes"] == {"N=1024": "+3.10%"}
    t = fig["targets"]
    assert t["first verdict <= 120 s after init"] is True
    assert t["A/A decided <= 30 s each"] is True
    assert t["real change decided <= 30 s"] is True
    assert t[">= 2 comment-only candidates decided, 0 kept"] is False  # v4 was kept


def test_figures_say_not_met_when_slow_or_missing() -> None:
    rows = [row(0, "baseline", "baseline", None), row(1, "tie", "A/A 1: comment", 31.0)]
    fig = wild_gpu.wild_figures(rows, {1: T0 + 130.0}, T0, aa_target=2)
    assert fig["first_verdict_s_after_init"] == 130.0
    assert fig["real"] is None
    assert not any(fig["targets"].values())
    empty = wild_gpu.wild_figures([row(0, "baseline", "baseline", None)], {}, T0)
    assert empty["first_verdict_s_after_init"] is None and empty["aa"]["decided"] == 0


def test_a_review_the_driver_answered_is_no_decision_of_kopts() -> None:
    # kopt left v2 and v3 borderline; the driver's `kopt reject` made them "rejected": neither
    # counts as decided, nor as the first verdict
    rows = [
        row(0, "baseline", "baseline", None),
        row(1, "tie", "A/A 1: comment", 9.0),
        row(2, "rejected", "A/A 2: comment", 400.0),
        row(3, "rejected", "REAL: num_warps", 20.0),
    ]
    finished = {1: T0 + 90.0, 2: T0 + 60.0, 3: T0 + 100.0}
    fig = wild_gpu.wild_figures(rows, finished, T0, aa_target=1, answered=frozenset({2, 3}))
    assert fig["first_verdict_s_after_init"] == 90.0  # v1's, not the answered v2's
    assert fig["aa"]["candidates"] == 2 and fig["aa"]["decided"] == 1
    assert fig["answered_by_the_driver"] == [2, 3]
    assert fig["targets"]["real change decided <= 30 s"] is False
    assert fig["targets"]["A/A decided <= 30 s each"] is True
    plain = wild_gpu.wild_figures(rows, finished, T0, aa_target=1)
    assert plain["aa"]["decided"] == 2 and plain["targets"]["real change decided <= 30 s"] is True


def test_the_plan_puts_the_real_change_at_its_iteration_and_comments_elsewhere() -> None:
    k = wild_gpu.kernels(smoke=False)["liger"]
    plan = wild_gpu.plan_for(k, 2)
    assert set(plan) == {"2", "default"}
    assert plan["2"]["kind"] == "replace" and plan["2"]["hypothesis"].startswith("REAL: ")
    assert plan["default"]["kind"] == "append" and plan["default"]["path"] == k.kernel_file
    assert plan["default"]["hypothesis"].startswith("A/A")


@pytest.mark.parametrize("smoke", [False, True])
def test_each_real_change_names_text_its_kernel_file_holds_once(smoke: bool) -> None:
    for k in wild_gpu.kernels(smoke).values():
        text = (k.tree / k.kernel_file).read_text(encoding="utf-8")
        assert text.count(k.real["old"]) == 1, (k.name, smoke)
        assert k.real["new"] != k.real["old"]


def test_the_proposer_replaces_once_and_refuses_an_ambiguous_replace(tmp_path: Path) -> None:
    f = tmp_path / "k.py"
    f.write_text("a = 8\nb = 8\n")
    assert propose_scripted.apply(tmp_path, {"kind": "replace", "path": "k.py", "old": "a = 8", "new": "a = 16"}, "1")
    assert f.read_text() == "a = 16\nb = 8\n"
    with pytest.raises(SystemExit):
        propose_scripted.apply(tmp_path, {"kind": "replace", "path": "k.py", "old": " = ", "new": "="}, "2")


def test_the_proposer_writes_the_plan_file_kopt_reads(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text("x = 1\n")
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            wild_gpu.plan_for(
                wild_gpu.Kernel("t", tmp_path, "", "k.py", {"old": "x = 1", "new": "x = 2", "hypothesis": "h"}), 1
            )
        )
    )
    env = {**os.environ, "KOPT_ITERATION": "1", "KOPT_PLAN": str(tmp_path / "out.txt"), "KOPT_REPAIR": "0"}
    script = Path(propose_scripted.__file__)
    subprocess.run([sys.executable, str(script), str(plan)], cwd=tmp_path, env=env, check=True, capture_output=True)
    assert (tmp_path / "k.py").read_text() == "x = 2\n"
    assert (tmp_path / "out.txt").read_text().startswith("REAL: h\nscope: global")

"""The GPU experiment's logic with scripted timers, and its smoke run (Triton interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.decide import Policy
from kernels.experiments import decision_h100 as exp

REPO = Path(__file__).resolve().parents[2]


class ScriptedTimer:
    """A block timer whose readings follow a fixed zig-zag around a per-launch time."""

    def __init__(self, us: float, reps: int = 10) -> None:
        self.reps = reps
        self.us = us
        self.calls = 0

    def block(self) -> float:
        self.calls += 1
        return self.us * (1 + 0.001 * ((self.calls * 7) % 5 - 2))


def test_kopt_decision_judges_the_same_blocks_under_each_policy() -> None:
    tallies = {m: exp.Tally() for m in exp.METHODS}
    ratios: list[float] = []
    policies = {"kopt (run unit)": Policy(), "kopt (pooled)": Policy(pool_blocks=True)}
    best, cand = ScriptedTimer(10.0), ScriptedTimer(10.3)
    exp.kopt_decision(best, cand, policies, 8, tallies, ratios)
    for name in policies:
        d = tallies[name].decisions[0]
        assert d["verdict"] == "regression" and d["ratio"] == pytest.approx(1.03, abs=0.003)
        assert d["gpu_s"] == pytest.approx(d["looks"] * 8 * (10.0 + 10.3) * 10 / 1e6, rel=0.01)
    assert len(ratios) == 8 * max(t.looks[0] for t in tallies.values() if t.looks)
    assert best.calls == cand.calls == len(ratios)


def test_naive_rule_and_its_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([100.0, 99.5, 100.0, 99.0])  # a 0.5% gain, then a 1% gain
    monkeypatch.setattr(exp, "naive_reading", lambda arm, smoke: next(readings))
    tallies = {m: exp.Tally() for m in exp.METHODS}
    exp.naive_decision(None, None, True, tallies)  # type: ignore[arg-type]
    assert tallies["do_bench 1%"].decisions[0]["verdict"] == "tie"
    assert tallies["do_bench twice-in-a-row"].decisions[0]["verdict"] == "keep"
    assert tallies["do_bench twice-in-a-row"].decisions[0]["looks"] == 2
    assert tallies["do_bench confirm"].decisions[0]["verdict"] == "tie"
    slower = iter([100.0, 102.0])
    monkeypatch.setattr(exp, "naive_reading", lambda arm, smoke: next(slower))
    exp.naive_decision(None, None, True, tallies)  # type: ignore[arg-type]
    assert {tallies[m].decisions[1]["verdict"] for m in exp.METHODS[2:]} == {"regression"}


@pytest.mark.slow
def test_smoke_run_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    res = subprocess.run([sys.executable, "-m", "kernels.experiments.decision_h100", "--smoke", "--decisions", "1",
                          "--durations-us", "5", "--slowdowns", "2", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(out.read_text())
    methods = report["durations"]["5"]["conditions"]["A/B +2% bytes"]["methods"]
    assert set(methods) == set(exp.METHODS) and all(m["n"] == 1 for m in methods.values())
    assert "| A/A (" in res.stdout and "kopt (pooled)" in res.stdout

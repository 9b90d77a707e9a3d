"""The output's shape is part of correctness (issue "Measure from outside the candidate's reach",
item 5): a candidate's table with more, fewer or duplicated config rows than best's is a bench
failure naming the configs, never a median over the duplicates. Pure rules first
(engine/metrics.py), then the real measurement path on the fake target (ProcessAbba in a run,
tests/fake_target/shape_bench.py), then the mean that a bent median does not move."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from kopt_supervisor.engine import api, metrics
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.decide.estimate import Policy
from kopt_supervisor.engine.decide.verdict import evaluate
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git

CFG = loads_config('[target]\nbench = "b"\nmetric = "us"\ncorrect = "err == 0"\nclass_by = ["cls"]\n').target
HEADER = "shape,cls,us,err\n"
ROWS = {"a": "a,s,10,0\n", "b": "b,s,20,0\n", "c": "c,l,100,0\n"}


def table(*rows: str, header: str = HEADER) -> metrics.Measurement:
    return metrics.measure(pd.read_csv(io.StringIO(header + "".join(rows))), CFG, "t.csv")


# --- one table ------------------------------------------------------------------------------------


def test_a_duplicated_config_row_is_a_bench_error_naming_the_config_never_a_median() -> None:
    with pytest.raises(BenchError, match=r"^t\.csv: shape=a,cls=s \(2 rows\) where every other config has 1 row"):
        table(ROWS["a"], "a,s,1,0\n", ROWS["b"], ROWS["c"])
    # a config missing from some repetitions is named as the short one
    with pytest.raises(BenchError, match=r"shape=c,cls=l \(1 rows\) where every other config has 2 row"):
        table(ROWS["a"], ROWS["a"], ROWS["b"], ROWS["b"], ROWS["c"])
    # two configs, one twice: the duplicated one is named, not the other
    with pytest.raises(BenchError, match=r"shape=a,cls=s \(2 rows\)"):
        table(ROWS["a"], "a,s,1,0\n", ROWS["b"])


def test_every_config_repeated_as_often_is_a_bench_of_repetitions() -> None:
    m = table(ROWS["a"], "a,s,12,0\n", ROWS["b"], "b,s,22,0\n")
    a = m.configs["shape=a,cls=s"]
    assert a.rows == 2 and a.value == 11.0


def test_the_bench_s_mean_beside_its_median_is_read() -> None:
    m = table("a,s,10,0,30\n", "b,s,20,0,20\n", header="shape,cls,us,err,us_mean\n")
    assert m.configs["shape=a,cls=s"].mean == 30.0 and m.config_columns == ("shape", "cls")
    assert table(ROWS["a"]).configs["shape=a,cls=s"].mean != table(ROWS["a"]).configs["shape=a,cls=s"].mean  # NaN
    nan_mean = table("a,s,10,0,\n", header="shape,cls,us,err,us_mean\n")
    assert nan_mean.configs["shape=a,cls=s"].mean != nan_mean.configs["shape=a,cls=s"].mean


# --- a look: the candidate against best -----------------------------------------------------------


def test_the_candidate_must_hold_exactly_best_s_configs_each_as_often() -> None:
    best = table(*ROWS.values())
    metrics.check_shape(best, table(*ROWS.values()))
    with pytest.raises(BenchError, match=r"config\(s\) best's has not: shape=z,cls=s"):
        metrics.check_shape(best, table(*ROWS.values(), "z,s,1,0\n"))
    with pytest.raises(BenchError, match=r"lacks config\(s\) shape=c,cls=l"):
        metrics.check_shape(best, table(ROWS["a"], ROWS["b"]))
    # every row twice (uniform, so no error in the table itself): not best's shape
    doubled = table(*ROWS.values(), "a,s,1,0\n", "b,s,2,0\n", "c,l,10,0\n")
    with pytest.raises(BenchError, match=r"rows than best's for shape=a,cls=s \(2, best 1\)"):
        metrics.check_shape(best, doubled)
    # both at once, in one line
    with pytest.raises(BenchError) as e:
        metrics.check_shape(best, table(ROWS["a"], ROWS["b"], "z,l,1,0\n"))
    assert "shape=z,cls=l" in str(e.value) and "shape=c,cls=l" in str(e.value) and "\n" not in str(e.value)


def test_paired_checks_the_shape_then_pairs_the_configs_that_passed_with_their_means() -> None:
    header = "shape,cls,us,err,us_mean\n"
    best = table("a,s,10,0,11\n", "b,s,20,0,21\n", header=header)
    cand = table("a,s,5,0,12\n", "b,s,15,1,16\n", header=header)
    (p,) = metrics.paired(best, cand, 2, "BA")
    assert (p.config, p.best, p.cand, p.round, p.order, p.best_mean, p.cand_mean) == (
        "shape=a,cls=s",
        10.0,
        5.0,
        2,
        "BA",
        11.0,
        12.0,
    )
    with pytest.raises(BenchError, match="lacks config"):
        metrics.paired(best, table("a,s,5,0,6\n", header=header), 0, "AB")


# --- the real measurement path: the loop on the fake target ----------------------------------------

SHAPE_FILES = ("bench.py", "kernel.json", "shape_bench.py")
SHAPE_TOML = {
    ' bench.py"\ncsv': ' shape_bench.py"\ncsv',
    'protected = ["bench.py"]': 'protected = ["bench.py", "shape_bench.py"]',
}


def shape_knob(**shape: object) -> str:
    return "knob:shape=" + json.dumps(shape)


def test_a_candidate_that_bends_the_output_s_shape_fails_the_bench_and_is_never_kept(fake_env) -> None:
    """Each way a candidate changes the rows of its own output fails the bench with the config
    named: duplicate fast rows (a median over them would be 1.8x faster), a row of a config best
    has not, a row left out, and a row injected through a data file the bench reads. An honest
    gain through the same bench is kept."""
    script = [
        shape_knob(dup=["s0"]),
        shape_knob(extra=["s9,small,64,1.0,0"]),
        shape_knob(drop=["s3"]),
        "do:open('rows.csv', 'w').write('s1,small,256,0.5,0\\n'); speed['small'] *= 0.99; "
        "json.dump(k, open('kernel.json', 'w'))",
        "gain5",
    ]
    repo, root = fake_env(script, files=SHAPE_FILES, toml_replace=SHAPE_TOML)
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "shape"]) == 0
    ws = Workspace(root, "shape")
    assert run_engine(ws, max_iters=len(script)) == 0
    with ws.open_store(readonly=True) as s:
        its = s.iterations()
    assert [it.status for it in its] == ["baseline", "fail_bench", "fail_bench", "fail_bench", "fail_bench", "keep"], [
        (it.status, it.record.get("decision", {}).get("reason")) for it in its
    ]
    reasons = [it.record["decision"]["reason"] for it in its[1:5]]
    assert "shape=s0,cls=small,n=128 (2 rows) where every other config has 1 row" in reasons[0]
    assert "config(s) best's has not: shape=s9,cls=small,n=64" in reasons[1]
    assert "lacks config(s) shape=s3,cls=large,n=8192" in reasons[2]
    assert "shape=s1,cls=small,n=256 (2 rows)" in reasons[3]
    assert all("\n" not in r for r in reasons)
    # nothing of the failed candidates reached BEST; the honest gain did
    speed = json.loads((ws.best / "kernel.json").read_text())
    assert "shape" not in speed and abs(speed["speed"]["small"] - 0.95) < 1e-9  # v5's 0.99 is not in it
    assert not (ws.best / "rows.csv").exists()


def test_a_baseline_with_a_duplicated_row_stops_the_run_naming_it(fake_env) -> None:
    repo, root = fake_env(["gain5"], files=SHAPE_FILES, toml_replace=SHAPE_TOML)
    kernel = json.loads((repo / "kernel.json").read_text())
    (repo / "kernel.json").write_text(json.dumps({**kernel, "shape": {"dup": ["s2"]}}))
    git(repo, "commit", "-qam", "a bench that prints s2 twice")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "dupbase"]) == 0
    ws = Workspace(root, "dupbase")
    run_engine(ws, max_iters=1)
    with ws.open_store(readonly=True) as s:
        (base,) = s.iterations()
    assert base.status == "fail_bench"
    assert "shape=s2,cls=large,n=4096 (2 rows) where every other config has 1 row" in base.record["decision"]["reason"]
    st = api.status(ws)
    assert st["state"] == "stopped" and "the baseline bench failed: " in st["stop_reason"]
    assert "shape=s2,cls=large,n=4096 (2 rows)" in st["stop_reason"]


# --- the median a few expensive calls bend, through the same path -----------------------------------


def test_a_median_that_falls_while_the_mean_does_not_escalates_the_keep() -> None:
    """The harness's `us` is a median over timed calls and `us_mean` their mean: a candidate
    whose calls are mostly 4x cheaper with a few expensive ones shows -75% in `us` while
    `us_mean` stays. Read by metrics.measure, paired by metrics.paired, decided by evaluate:
    a keep that needs the stronger checks, with mean_not_faster. The honest 4x (mean falls
    with the median) is flagged only as a suspicious speedup."""
    header = "shape,cls,us,err,us_mean\n"
    policy = Policy(suspicious_speedup=10.0)

    def look(r: int, cand_mean: float) -> list:
        best = table(
            f"a,s,{10 + r * 0.01},0,{10.2 + r * 0.01}\n", f"b,s,{20 - r * 0.01},0,{20.3 - r * 0.01}\n", header=header
        )
        cand = table(
            f"a,s,{2.5 + r * 0.002},0,{cand_mean * 10.2}\n",
            f"b,s,{5 - r * 0.003},0,{cand_mean * 20.3}\n",
            header=header,
        )
        return metrics.paired(best, cand, r, "AB" if r % 2 == 0 else "BA")

    bent = evaluate([p for r in range(4) for p in look(r, 1.01 - r * 0.01)], policy)
    assert bent.kind == "keep" and bent.needs_stronger_checks and "mean_not_faster" in bent.flags
    assert (
        "cls=s -75.0% by its metric but at best -2.1% by the mean over the same calls (over 4 looks)" in bent.escalation
    )
    honest = evaluate([p for r in range(4) for p in look(r, 0.25 + r * 0.001)], policy)
    assert honest.settled_keep and "mean_not_faster" not in honest.flags

import math
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from kopt_supervisor.engine import adapters, metrics
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.metrics import BenchError

CFG = loads_config(
    '[target]\nbench = "b"\nmetric = "us"\ncorrect = "err == 0"\nclass_by = ["cls"]\n'
    'ignore = ["us_std"]\nproduction = "prod == 1"\n'
).target


def frame(text: str) -> pd.DataFrame:
    import io

    return pd.read_csv(io.StringIO(text))


def test_config_columns_classes_and_repetitions_as_samples():
    # every config as many times (repetitions): samples of one run; unequal counts are a
    # bench failure (tests/engine/test_output_shape.py)
    df = frame(
        "shape,cls,n,prod,us,us_std,err\na,small,1,1,10,0.1,0\na,small,1,1,12,0.1,0\nb,large,2,0,100,1,0\n"
        "b,large,2,0,101,1,0\n"
    )
    m = metrics.measure(df, CFG)
    assert m.config_columns == ("shape", "cls", "n", "prod")
    a = m.configs["shape=a,cls=small,n=1,prod=1"]
    assert a.values == (10.0, 12.0) and a.value == 11.0 and a.cls == "cls=small" and a.production
    assert not m.configs["shape=b,cls=large,n=2,prod=0"].production
    assert m.ok and m.classes() == ["cls=large", "cls=small"]


def test_correctness_nan_inf_missing_and_nonpositive_fail_with_reasons():
    df = frame(
        "shape,cls,prod,us,us_std,err\na,s,1,10,0,1\nb,s,1,nan,0,0\nc,s,1,inf,0,0\nd,s,1,,0,0\ne,s,1,0,0,0\nf,s,1,5,0,0\n"
    )
    m = metrics.measure(df, CFG)
    reasons = {c.row["shape"]: c.reasons for c in m.failing}
    assert set(reasons) == {"a", "b", "c", "d", "e"}
    assert "fails 'err == 0'" in reasons["a"]
    assert any("missing or not a number" in r for r in reasons["b"] + reasons["d"])
    assert any("inf" in r for r in reasons["c"])
    assert any("must be > 0" in r for r in reasons["e"])
    assert m.configs["shape=f,cls=s,prod=1"].ok


def test_missing_columns_are_named():
    with pytest.raises(BenchError, match="metric column 'us' missing"):
        metrics.measure(frame("shape,cls,err\na,s,0\n"), CFG)
    with pytest.raises(BenchError, match="class_by column 'cls' missing"):
        metrics.measure(frame("shape,us,err,prod\na,1,0,1\n"), CFG)
    with pytest.raises(Exception, match="'err'"):
        metrics.measure(frame("shape,cls,prod,us\na,s,1,1\n"), CFG)


def test_reading_empty_malformed_and_stdout(tmp_path: Path):
    p = tmp_path / "r.csv"
    p.write_text("")
    with pytest.raises(BenchError, match="empty CSV"):
        adapters.read_kopt_csv(p, metric="us")
    p.write_text("a,us\n")
    with pytest.raises(BenchError, match="header but no rows"):
        adapters.read_kopt_csv(p, metric="us")
    p.write_text('a,us\n1,2\n"3,4\n')
    with pytest.raises(BenchError, match="malformed CSV"):
        adapters.read_kopt_csv(p, metric="us")
    out = tmp_path / "bench.out"
    out.write_text("compiling...\nshape,us\nold,1\n\nwarmup done\nshape,us\na,3.5\nb,4\nbye\n")
    df = adapters.read_kopt_csv(out, metric="us", from_stdout=True)
    assert list(df["shape"]) == ["a", "b"]
    out.write_text("no csv here\n")
    with pytest.raises(BenchError, match="no CSV header with column 'us'"):
        adapters.read_kopt_csv(out, metric="us", from_stdout=True)


def test_find_csv_ignores_files_from_earlier_runs(tmp_path: Path):
    (tmp_path / "results").mkdir()
    old = tmp_path / "results" / "old.csv"
    old.write_text("us\n1\n")
    before = adapters.csv_stamps(tmp_path, "results/*.csv")
    with pytest.raises(BenchError, match="was written by this run"):
        adapters.find_csv(tmp_path, "results/*.csv", before, tmp_path / "x.out")
    new = tmp_path / "results" / "new.csv"
    new.write_text("us\n2\n")
    assert adapters.find_csv(tmp_path, "results/*.csv", before, tmp_path / "x.out") == new.resolve()
    # a glob may not escape the worktree through a symlink
    outside = tmp_path.parent / "outside.csv"
    outside.write_text("us\n3\n")
    (tmp_path / "results" / "link.csv").symlink_to(outside)
    assert adapters.find_csv(tmp_path, "results/*.csv", before, tmp_path / "x.out") == new.resolve()


def test_find_csv_does_not_trust_the_wall_clock(tmp_path: Path):
    """A clock jump: a leftover CSV dated in the future is still a leftover; this run's CSV
    dated in the past (the clock jumped back meanwhile) is still this run's."""
    (tmp_path / "results").mkdir()
    old = tmp_path / "results" / "old.csv"
    old.write_text("us\n1\n")
    future = time.time() + 86400
    os.utime(old, (future, future))
    before = adapters.csv_stamps(tmp_path, "results/*.csv")
    with pytest.raises(BenchError, match="was written by this run"):
        adapters.find_csv(tmp_path, "results/*.csv", before, tmp_path / "x.out")
    new = tmp_path / "results" / "new.csv"
    new.write_text("us\n2\n")
    past = time.time() - 86400
    os.utime(new, (past, past))
    assert adapters.find_csv(tmp_path, "results/*.csv", before, tmp_path / "x.out") == new.resolve()
    old.write_text("us\n3\n")  # rewritten in place: changed, so this run's, and the newest
    os.utime(old, (future, future))
    assert adapters.find_csv(tmp_path, "results/*.csv", before, tmp_path / "x.out") == old.resolve()
    with pytest.raises(BenchError, match="not a glob inside the worktree"):
        adapters.csv_stamps(tmp_path, "/etc/*.csv")


def test_key_format_matches_class_key_parsing():
    key = metrics.key_of({"D": 3072.0, "dtype": "bf16", "eps": 1e-6}, ["D", "dtype", "eps"])
    assert key == "D=3072,dtype=bf16,eps=1e-06"
    assert metrics.parse_class_key(key) == {"D": "3072", "dtype": "bf16", "eps": "1e-06"}
    assert math.isnan(metrics.ConfigResult("k", "c", (math.nan,), False).value)


def test_the_calls_column_gives_the_seconds_the_bench_says_it_timed():
    """[target].calls: each row's latency times its count of timed calls, summed (what the
    wall-time check weighs against the process); never a config column; missing, it is named;
    a count or latency that is not a finite positive number gives no total at all."""
    cfg = loads_config('[target]\nbench = "b"\nmetric = "us"\ncalls = "reps"\nclass_by = ["cls"]\n').target
    m = metrics.measure(frame("shape,cls,us,reps\na,s,10,100\na,s,12,100\nb,l,200,50\nb,l,210,50\n"), cfg)
    assert m.timed == 10 * 100 + 12 * 100 + 200 * 50 + 210 * 50 and m.config_columns == ("shape", "cls")
    assert (
        metrics.measure(frame("shape,cls,prod,us,err,reps\na,s,1,10,0,100\n"), CFG).timed is None
    )  # no calls configured
    for bad in ("0", "nan", "-3", "x"):
        assert metrics.measure(frame(f"shape,cls,us,reps\na,s,10,{bad}\nb,l,5,9\n"), cfg).timed is None, bad
    with pytest.raises(BenchError, match="calls column 'reps' missing"):
        metrics.measure(frame("shape,cls,us\na,s,10\n"), cfg)
    with pytest.raises(Exception, match=r"\[target\]\.calls needs a latency metric"):
        loads_config('[target]\nbench = "b"\nmetric = "tflops"\ndirection = "max"\ncalls = "reps"\n')

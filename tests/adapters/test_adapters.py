"""engine/adapters on real-format samples (tests/adapters/data, see its README.md): each
format's rows, units and odd cases, and what engine.metrics.measure makes of them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from kopt_supervisor.engine import adapters, metrics
from kopt_supervisor.engine.adapters import benchmarks
from kopt_supervisor.engine.adapters.table import (
    RATE,
    TIME,
    AdapterError,
    column_unit,
    find_tables,
    read_csv_file,
    select,
    to_unit,
)
from kopt_supervisor.engine.config import AdapterConfig, TargetConfig

DATA = Path(__file__).parent / "data"


def table(fmt: str, name: str, **opts: str) -> adapters.Table:
    return adapters.read_table(fmt, DATA / name, AdapterConfig(**opts))


def measure(frame: pd.DataFrame, **target: object) -> metrics.Measurement:
    return metrics.measure(frame, TargetConfig(bench="x", **target))  # type: ignore[arg-type]  # test keywords


# -- units ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,unit,kind",
    [
        ("us", "us", TIME),
        ("time (us)", "us", TIME),
        ("latency[ms]", "ms", TIME),
        ("triton_ms", "ms", TIME),
        ("median_us", "us", TIME),
        ("Time(µs)", "us", TIME),
        ("elapsed_s", "s", TIME),
        ("runtime", "", TIME),
        ("Triton (GB/s)", "gb/s", RATE),
        ("gbps", "gbps", RATE),
        ("TFLOPS", "tflops", RATE),
        ("it/s", "it/s", RATE),
        ("bytes_per_second", "bytes_per_second", RATE),
        ("throughput", "throughput", RATE),
        ("N", "", ""),
        ("dtype", "", ""),
        ("max_abs_err", "", ""),
        ("bs", "", ""),
        ("seed", "", ""),
    ],
)
def test_column_units(name: str, unit: str, kind: str) -> None:
    got = column_unit(name)
    assert (got.unit, got.kind) == (unit, kind)


def test_time_conversion_and_unknown_units() -> None:
    assert to_unit(1.5, "ms", "us") == pytest.approx(1500.0) and to_unit(2e4, "ns", "us") == pytest.approx(20.0)
    with pytest.raises(ValueError, match="'fortnights'"):
        to_unit(1.0, "fortnights", "us")


# -- triton perf_report -------------------------------------------------------------------


def test_perf_report_csv_file() -> None:
    t = table("perf_report", "perf_report_softmax.csv")
    assert t.format == "perf_report" and t.config == ("N",)
    assert t.metrics == ("Triton (GB/s)", "Torch (GB/s)", "Naive (GB/s)") and set(t.units.values()) == {"GB/s"}
    m = measure(t.frame, metric="Triton (GB/s)", direction="max", ignore=["Torch (GB/s)", "Naive (GB/s)"])
    assert m.ok and sorted(m.configs) == ["N=1024", "N=12800", "N=256", "N=4096"]
    assert m.configs["N=4096"].value == pytest.approx(1553.69242)


def test_perf_report_printed_tables_pick_one_by_title_or_position() -> None:
    t = table("perf_report", "perf_report_stdout.txt", table="matmul-performance-fp16")
    assert t.config == ("M", "N", "K") and t.units["Triton (TFLOPS)"] == "TFLOPS" and len(t.frame) == 3
    assert list(t.frame["M"]) == [256.0, 512.0, 1024.0]  # the printed index column is gone
    assert table("perf_report", "perf_report_stdout.txt", table="1").title == "softmax-performance"
    with pytest.raises(AdapterError, match="2 tables with different columns.*softmax-performance.*matmul"):
        table("perf_report", "perf_report_stdout.txt")
    with pytest.raises(AdapterError, match="names no table"):
        table("perf_report", "perf_report_stdout.txt", table="softmax")
    with pytest.raises(AdapterError, match="has 2 table"):
        table("perf_report", "perf_report_stdout.txt", table="3")


def test_perf_report_diff_column_and_a_csv_that_is_not_one(tmp_path: Path) -> None:
    t = table("perf_report", "perf_report_ms_diff.csv")
    assert t.config == ("size", "dtype") and t.metrics == ("Triton (ms)", "Torch (ms)") and "Diff" in t.columns
    plain = tmp_path / "plain.csv"
    plain.write_text("N,us\n1,2.0\n")
    with pytest.raises(AdapterError, match="plain.csv: not a perf_report CSV"):
        adapters.read_table("perf_report", plain)


# -- pytest-benchmark ----------------------------------------------------------------------


def test_pytest_benchmark_rows_params_extra_info_and_units() -> None:
    t = table("pytest-benchmark", "pytest_benchmark.json")
    f = t.frame
    assert t.config == ("test", "group", "N", "dtype", "param")
    assert list(f["test"]) == ["test_softmax", "test_softmax", "test_layernorm_small"]
    assert f.loc[0, "median_us"] == pytest.approx(12.673) and f.loc[2, "median_us"] == pytest.approx(1038.1)
    assert f.loc[0, "max_abs_err"] == pytest.approx(0.0009765625) and f.loc[0, "compiled"] == 1
    assert table("pytest-benchmark", "pytest_benchmark.json", unit="ms").frame.loc[2, "median_ms"] == pytest.approx(
        1.0381
    )
    m = measure(
        f,
        metric="median_us",
        config=["test", "group", "N", "dtype", "param"],
        ignore=[c for c in f.columns if c not in ("test", "group", "N", "dtype", "param", "median_us")],
    )
    assert m.ok and len(m.configs) == 3


def test_pytest_benchmark_errored_benchmark_fails_its_row() -> None:
    t = table("pytest-benchmark", "pytest_benchmark_errored.json")
    assert t.config == ("test", "hidden") and math.isnan(t.frame.loc[1, "median_us"])
    m = measure(t.frame, metric="median_us", config=["test", "hidden"], correct="has_error == 0")
    assert [c.key for c in m.failing] == ["test=test_rmsnorm,hidden=4096"]
    assert "missing or not a number" in m.failing[0].reasons[0]


def test_pytest_benchmark_refuses_what_is_not_its_report(tmp_path: Path) -> None:
    wrong = tmp_path / "x.json"
    wrong.write_text('{"benchmarks": [{"name": "BM_x", "run_type": "iteration", "real_time": 1.0}]}')
    with pytest.raises(AdapterError, match="not a pytest-benchmark entry"):
        adapters.read_table("pytest-benchmark", wrong)
    wrong.write_text("no json here\n")
    with pytest.raises(AdapterError, match="no JSON object with 'benchmarks'"):
        adapters.read_table("pytest-benchmark", wrong)
    wrong.write_text('{"benchmarks": []}')
    with pytest.raises(AdapterError, match="no benchmarks"):
        adapters.read_table("pytest-benchmark", wrong)


# -- Google Benchmark ----------------------------------------------------------------------


def test_google_benchmark_named_args_manual_time_counters_and_log_lines_around() -> None:
    t = table("google-benchmark", "google_benchmark_manual_time.txt")
    f = t.frame
    assert t.config == ("benchmark", "M", "N") and list(f["benchmark"]) == ["BM_Softmax<half>"] * 2 + [
        "BM_Softmax<float>"
    ]
    assert list(f["N"]) == [1024, 8192, 1024] and f.loc[1, "real_us"] == pytest.approx(114.70316052)
    assert f.loc[0, "GB/s"] == pytest.approx(991.4831519136) and f.loc[2, "label"] == "fp32 accumulate"
    assert t.correctness == ("error",) and list(f["error"]) == ["", "", ""]


def test_google_benchmark_repetitions_are_samples_and_aggregates_are_dropped() -> None:
    t = table("google-benchmark", "google_benchmark_repetitions.json")
    assert len(t.frame) == 3 and t.config == ("benchmark", "arg0", "arg1")
    m = measure(
        t.frame,
        metric="real_us",
        config=list(t.config),
        ignore=["cpu_us", "iterations", "label"],
        correct='error == ""',
    )
    (c,) = m.configs.values()
    assert c.key == "benchmark=BM_LayerNorm,arg0=8192,arg1=1024" and c.values == pytest.approx((33.611, 33.702, 33.59))
    assert c.value == pytest.approx(33.611)  # the median of the repetitions, ns -> us


def test_google_benchmark_aggregates_only_takes_the_chosen_statistic() -> None:
    median = table("google-benchmark", "google_benchmark_aggregates_only.json").frame
    assert list(median["real_us"]) == pytest.approx([33.611, 33.611 * 3.9])
    mean = table("google-benchmark", "google_benchmark_aggregates_only.json", stat="mean").frame
    assert mean.loc[0, "real_us"] == pytest.approx(33.634333)
    with pytest.raises(AdapterError, match="no iteration runs and no 'min' aggregates"):
        table("google-benchmark", "google_benchmark_aggregates_only.json", stat="min")


def test_google_benchmark_errors_skips_nan_and_complexity_rows() -> None:
    t = table("google-benchmark", "google_benchmark_errors.json")
    f = t.frame
    assert list(f["arg0"]) == [1024, 2048, 4096, 8] and "threads" in t.config  # BigO/RMS rows dropped
    assert f.loc[0, "real_us"] == pytest.approx(412.0)  # ms -> us
    assert f.loc[1, "error"].startswith("max abs error 0.37") and f.loc[2, "error"].startswith("skipped: needs")
    m = measure(
        f,
        metric="real_us",
        config=list(t.config),
        correct='error == ""',
        ignore=["cpu_us", "iterations", "label", "items_per_second"],
    )
    assert sorted(c.key for c in m.failing) == [
        "benchmark=BM_Gemm,arg0=2048,threads=1",
        "benchmark=BM_Gemm,arg0=4096,threads=1",
        "benchmark=BM_Gemm,arg0=8,threads=1",
    ]
    assert m.configs["benchmark=BM_Gemm,arg0=1024,threads=1"].ok


def test_google_benchmark_names_and_bad_units(tmp_path: Path) -> None:
    assert benchmarks.parse_name("BM_x/M:64/7/min_time:0.500/repeats:3/manual_time/threads:4") == {
        "benchmark": "BM_x",
        "M": 64,
        "arg1": 7,
        "threads": 4,
    }
    bad = tmp_path / "g.json"
    bad.write_text(
        '{"benchmarks": [{"name": "BM_x", "run_type": "iteration", "real_time": 1, "cpu_time": 1,'
        ' "time_unit": "fortnights"}]}'
    )
    with pytest.raises(AdapterError, match="time_unit 'fortnights'"):
        adapters.read_table("google-benchmark", bad)
    pyt = DATA / "pytest_benchmark.json"
    with pytest.raises(AdapterError, match="not a Google Benchmark run"):
        adapters.read_table("google-benchmark", pyt)


# -- torch.utils.benchmark -------------------------------------------------------------------


def test_torch_compare_table_with_thread_groups() -> None:
    t = table("torch-benchmark", "torch_compare_threads.txt")
    assert t.title == "softmax" and t.config == ("threads", "sub_label")
    assert t.metrics == ("torch.softmax", "triton_softmax") and t.units["triton_softmax"] == "us"
    assert list(t.frame["threads"]) == [1, 1, 2, 2] and t.frame.loc[3, "torch.softmax"] == pytest.approx(1438.0)
    m = measure(t.frame, metric="triton_softmax", config=["threads", "sub_label"], ignore=["torch.softmax"])
    assert m.ok and len(m.configs) == 4


def test_torch_compare_envs_units_and_key_value_sub_labels() -> None:
    t = table("torch-benchmark", "torch_compare_env_ms.txt")
    assert t.config == ("threads", "env", "n")  # `n=1048576` spread into a column
    assert list(t.frame["env"]) == ["best", "best", "cand", "cand"]  # printed on each env's first row only
    assert t.frame.loc[0, "sort"] == pytest.approx(122700.0)  # ms -> us: a table's unit moves with its values
    assert table("torch-benchmark", "torch_compare_env_ms.txt", unit="ms").frame.loc[0, "sort"] == pytest.approx(122.7)


def test_torch_compare_colours_and_variance_warnings() -> None:
    t = table("torch-benchmark", "torch_compare_colored_warnings.txt")
    assert t.config == ("threads", "N", "dtype") and list(t.frame["N"]) == [1024, 8192]
    assert list(t.frame["triton"]) == pytest.approx([0.0837, 0.7355])  # ns -> us, "(! 37%)" dropped


def test_torch_printed_measurements() -> None:
    t = table("torch-benchmark", "torch_measurements.txt")
    assert t.config == ("threads", "N") and t.metrics == ("triton",)
    assert list(t.frame["triton"]) == pytest.approx([10.43, 11.99, 733.08, 762.41])
    m = measure(t.frame, metric="triton", config=["threads", "N"])
    assert m.configs["threads=1,N=65536"].values == pytest.approx((733.08, 762.41))


def test_torch_compare_without_its_unit_line_is_refused(tmp_path: Path) -> None:
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join((DATA / "torch_compare_threads.txt").read_text().splitlines()[:5]))
    with pytest.raises(AdapterError, match="without its 'Times are in"):
        adapters.read_table("torch-benchmark", cut)


# -- printed tables ----------------------------------------------------------------------------

WHITESPACE = """\
loading kernels...
softmax on cuda (NVIDIA H100 80GB HBM3)
     M      N     dtype  triton_ms   torch_ms  max_abs_err
  4096    256   float16     0.0123     0.0164     3.37e-05
  4096   4096   float16     0.0213     0.0296     2.00e-05
done in 4.1 s
"""


def test_whitespace_table_among_log_lines() -> None:
    (t,) = find_tables(WHITESPACE)
    assert t.format == "table" and t.columns == ["M", "N", "dtype", "triton_ms", "torch_ms", "max_abs_err"]
    assert t.title == "softmax on cuda (NVIDIA H100 80GB HBM3)" and list(t.frame["N"]) == [256, 4096]
    assert t.frame["triton_ms"].dtype.kind == "f" and not pd.api.types.is_numeric_dtype(t.frame["dtype"])


def test_pandas_printed_frames_with_plain_and_named_index() -> None:
    df = pd.DataFrame({"N": [256.0, 1024.0], "Triton (GB/s)": [614.4, 1310.7], "Torch (GB/s)": [468.1, 923.0]})
    (plain,) = find_tables("results:\n" + df.to_string() + "\n")
    assert plain.columns == ["N", "Triton (GB/s)", "Torch (GB/s)"] and list(plain.frame["N"]) == [256.0, 1024.0]
    (named,) = find_tables(df.set_index("N").to_string() + "\n")
    assert named.columns == ["N", "Triton (GB/s)", "Torch (GB/s)"] and list(named.frame["Torch (GB/s)"]) == [
        468.1,
        923.0,
    ]


def test_markdown_and_csv_blocks_and_several_tables() -> None:
    out = """\
## fp16
| M | N | time (us) |
|---|--:|----------:|
| 1 | 64 | 3.5 |
| 2 | 64 | 4.0 |

## bf16
| M | N | time (us) |
|---|---|---|
| 1 | 64 | 3.6 |
"""
    tables = find_tables(out)
    assert [t.title for t in tables] == ["fp16", "bf16"] and tables[0].columns == ["M", "N", "time (us)"]
    joined = select(tables, "", "stdout")
    assert joined.config[0] == "table" and list(joined.frame["table"]) == ["fp16", "fp16", "bf16"]
    m = measure(joined.frame, metric="time (us)")
    assert sorted(m.configs) == ["table=bf16,M=1,N=64", "table=fp16,M=1,N=64", "table=fp16,M=2,N=64"]
    csvs = find_tables("log line, with a comma\nN,us,err\n1,2.5,0\n2,3.5,0\nmore log\nk,gbps\n1,900\n")
    assert [t.format for t in csvs] == ["csv", "csv"] and csvs[1].columns == ["k", "gbps"]
    with pytest.raises(AdapterError, match=r"2 tables with different columns.*1: .*\[N, us, err\].*2: "):
        select(csvs, "", "stdout")
    assert select(csvs, "2", "stdout").columns == ["k", "gbps"]


def test_lines_that_only_look_like_tables_are_not_tables() -> None:
    assert find_tables("look 1: done\nlook 2: done\n") == []  # no numeric column
    assert find_tables("x 1 2\ny 3 4\n") == []  # a header of numbers is no header
    assert find_tables("bench phases: start 1.9 s, setup 2.0 s\n") == []


def test_csv_file_written_with_a_pandas_index(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    pd.DataFrame({"N": [1, 2], "us": [3.0, 4.0]}).to_csv(f)
    t = read_csv_file(f)
    assert t.columns == ["N", "us"] and "pandas index" in t.notes[0]
    f.write_text("N,us\n")
    with pytest.raises(AdapterError, match="header but no rows"):
        read_csv_file(f)


def test_read_frame_is_what_the_loop_reads(tmp_path: Path) -> None:
    out = tmp_path / "bench.out"
    out.write_text(WHITESPACE)
    frame = adapters.read_frame("table", out, from_stdout=True)
    m = measure(frame, metric="triton_ms", correct="max_abs_err <= 1e-3", ignore=["torch_ms"])
    assert m.ok and sorted(m.configs) == ["M=4096,N=256,dtype=float16", "M=4096,N=4096,dtype=float16"]
    with pytest.raises(AdapterError, match="unknown format 'xml'"):
        adapters.read_frame("xml", out)
    empty = tmp_path / "empty.out"
    empty.write_text("nothing measured\n")
    with pytest.raises(AdapterError, match="stdout: no table output found"):
        adapters.read_frame("table", empty, from_stdout=True)


def test_sniff_names_the_specific_format_first() -> None:
    assert {t.format for t in adapters.sniff((DATA / "pytest_benchmark.json").read_text(), "x")} == {"pytest-benchmark"}
    assert {t.format for t in adapters.sniff((DATA / "google_benchmark_errors.json").read_text(), "x")} == {
        "google-benchmark"
    }
    assert {t.format for t in adapters.sniff((DATA / "torch_measurements.txt").read_text(), "x")} == {"torch-benchmark"}
    assert [t.format for t in adapters.sniff((DATA / "perf_report_stdout.txt").read_text(), "x")] == ["perf_report"] * 2
    assert [t.format for t in adapters.sniff(WHITESPACE, "x")] == ["table"]

"""engine/onboard: from one bench run's output to a commented kopt.toml, on many outputs a
bench may print or write: odd column names, units in headers, several tables, throughput
metrics, missing correctness columns, pandas/markdown/whitespace tables, the adapters'
formats. Ambiguity is a question (and without a terminal a one-line error naming the
candidates), never a silent guess; every proposal loads with engine.config."""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from kopt_supervisor.engine import BadInput, onboard
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.onboard import steps

DATA = Path(__file__).resolve().parents[1] / "adapters" / "data"


def fake_run(
    tmp_path: Path,
    stdout: str = "",
    files: dict[str, str] | None = None,
    *,
    bench: str = "python bench.py",
    seconds: float = 4.0,
    rc: int = 0,
    sources: dict[str, str] | None = None,
) -> onboard.BenchRun:
    """A BenchRun as run_once returns it, without running anything: the repo's sources, the
    files the bench wrote, its stdout."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    for name, text in {"bench.py": "import torch\n", **(sources or {})}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    written = []
    for name, text in (files or {}).items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
        written.append(Path(name))
    out = tmp_path / "bench.out"
    out.write_text(stdout)
    return onboard.BenchRun(bench, repo, rc, out, tuple(written), seconds)


def proposed(run: onboard.BenchRun, **answers: str) -> tuple[onboard.Proposal, dict]:
    p = onboard.propose(run, answers)
    assert p.complete, p.error_line()
    text = p.text()
    loads_config(text)  # loads as kopt reads it
    return p, tomllib.loads(text)["target"]


# -- units, names, directions ----------------------------------------------------------------


def test_units_in_headers_choose_the_metric_and_its_scale(tmp_path: Path) -> None:
    out = (
        "N   dtype     latency[ms]   max_abs_err\n"
        "256 float16   0.0123        0.0004\n"
        "512 float16   0.0150        0.0002\n"
    )
    p, t = proposed(fake_run(tmp_path, out))
    assert (t["metric"], t["direction"], t["format"], t["csv"]) == ("latency[ms]", "min", "table", "-")
    assert t["config"] == ["N", "dtype"] and t["correct"] == "max_abs_err <= 0.004"
    assert p.sections["roofline"]["unit_scale"] == pytest.approx(1e-3)
    assert "latency[ms]: a time in ms" in p.comments["target.metric"]


@pytest.mark.parametrize(
    "header,metric,direction",
    [
        ("time (us)", "time (us)", "min"),
        ("Time(µs)", "Time(µs)", "min"),
        ("kernel_time_ns", "kernel_time_ns", "min"),
        ("bandwidth_GB/s", "bandwidth_GB/s", "max"),
        ("TFLOPS", "TFLOPS", "max"),
        ("it/s", "it/s", "max"),
    ],
)
def test_odd_metric_names(tmp_path: Path, header: str, metric: str, direction: str) -> None:
    out = f"size,{header},err\n1024,1.5,0\n4096,2.5,0\n"
    _, t = proposed(fake_run(tmp_path, out))
    assert (t["metric"], t["direction"], t["csv"], t.get("format", "csv")) == (metric, direction, "-", "csv")
    assert t["correct"] == "err == 0"  # all zero: exact results stay exact


def test_a_throughput_only_table_maximises(tmp_path: Path) -> None:
    out = "M,N,Triton_GBps,status_ok\n4096,1024,1310.7,True\n4096,4096,1553.7,True\n"
    _, t = proposed(fake_run(tmp_path, out))
    assert (t["metric"], t["direction"], t["correct"]) == ("Triton_GBps", "max", "status_ok == 1")


def test_a_time_wins_over_the_rates_of_the_same_run_and_reference_columns_are_ignored(tmp_path: Path) -> None:
    out = "M,N,triton_ms,torch_ms,cublas_ms,triton_gbps\n1,64,0.01,0.02,0.03,800\n2,64,0.02,0.03,0.04,820\n"
    p, t = proposed(fake_run(tmp_path, out))
    assert t["metric"] == "triton_ms" and {"torch_ms", "cublas_ms", "triton_gbps"} <= set(t["ignore"])
    assert "reference implementation" in p.comments["target.metric"]
    assert t["correct"] == "" and any("checks nothing kopt can see" in c for c in p.checks)


def test_an_unknown_unit_is_said_and_a_unitless_answer_asks_the_direction(tmp_path: Path) -> None:
    out = "N,runtime,score\n1,5.0,0.3\n2,6.0,0.4\n"
    p, t = proposed(fake_run(tmp_path, out))
    assert t["metric"] == "runtime" and "unknown unit" in p.comments["target.direction"]
    q = onboard.propose(fake_run(tmp_path, out), {"metric": "score"})
    assert [x.key for x in q.questions] == ["direction"] and "--answer direction=VALUE" in q.error_line()
    _, t2 = proposed(fake_run(tmp_path, out), metric="score", direction="max")
    assert (t2["metric"], t2["direction"]) == ("score", "max")
    with pytest.raises(BadInput, match="direction='up'"):
        onboard.propose(fake_run(tmp_path, out), {"metric": "score", "direction": "up"})


# -- ambiguity: questions, never a guess -----------------------------------------------------


def test_two_kernels_timed_side_by_side_is_a_question(tmp_path: Path) -> None:
    out = "N,triton_us,cuda_us\n64,1.0,1.1\n128,2.0,2.1\n"
    p = onboard.propose(fake_run(tmp_path, out))
    (q,) = p.questions
    assert q.key == "metric" and [c.value for c in q.choices] == ["triton_us", "cuda_us"] and q.default is None
    line = p.error_line()
    assert "\n" not in line and "triton_us, cuda_us" in line and "--answer metric=VALUE" in line
    with pytest.raises(BadInput, match="triton_us, cuda_us"):
        p.text()  # nothing is written while a question is open
    _, t = proposed(fake_run(tmp_path, out), metric="cuda_us")
    assert t["metric"] == "cuda_us" and "triton_us" in t["ignore"]
    with pytest.raises(BadInput, match="metric='gpu_us': no such column"):
        onboard.propose(fake_run(tmp_path, out), {"metric": "gpu_us"})


def test_several_tables_with_different_columns_ask_which(tmp_path: Path) -> None:
    out = "== softmax ==\nN  triton_us  err\n64  1.0  0\n128  2.0  0\n\n== layernorm ==\nD  ln_us  err\n1024  3.0  0\n"
    p = onboard.propose(fake_run(tmp_path, out))
    (q,) = p.questions
    assert q.key == "table" and [c.value for c in q.choices] == ["stdout#1", "stdout#2"]
    assert "softmax" in q.choices[0].label or "N, triton_us" in q.choices[0].label
    _, t = proposed(fake_run(tmp_path, out), table="stdout#2")
    assert (t["format"], t["metric"]) == ("table", "ln_us") and tomllib.loads(
        onboard.propose(fake_run(tmp_path, out), {"table": "stdout#2"}).text()
    )["target"]["adapter"]["table"] == "layernorm"
    with pytest.raises(BadInput, match="table='stdout#7' names no table"):
        onboard.propose(fake_run(tmp_path, out), {"table": "stdout#7"})


def test_several_tables_with_the_same_columns_are_one_with_a_table_class(tmp_path: Path) -> None:
    out = (
        "float16:\n  N   time_us  max_err\n 64   1.0   1e-3\n128   2.0   2e-3\n"
        "bfloat16:\n  N   time_us  max_err\n 64   1.1   8e-3\n128   2.1   9e-3\n"
    )
    p, t = proposed(fake_run(tmp_path, out))
    assert t["format"] == "table" and t["config"] == ["table", "N"] and t["class_by"] == ["table"]
    assert "adapter" not in t  # all of them, read as one


# -- printed table styles ----------------------------------------------------------------------


def test_pandas_printed_table(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {"M": [4096, 4096], "N": [256, 1024], "dtype": ["bf16", "bf16"], "ms": [0.01, 0.02], "max diff": [1e-3, 2e-3]}
    )
    p, t = proposed(fake_run(tmp_path, "benchmark results\n" + df.to_string() + "\n"))
    assert t["metric"] == "ms" and t["config"] == ["M", "N", "dtype"] and t["correct"] == ""
    assert any("'max diff'" in c and "rename" in c for c in p.checks)  # an expression cannot name it


def test_markdown_table(tmp_path: Path) -> None:
    out = (
        "| shape | dtype | time (ms) | correct |\n|---|---|---:|:---:|\n| 1x64 | fp16 | 0.5 | PASS |\n"
        "| 2x64 | fp16 | 0.7 | PASS |\n"
    )
    _, t = proposed(fake_run(tmp_path, out))
    assert (t["metric"], t["correct"], t["config"]) == ("time (ms)", 'correct == "PASS"', ["shape", "dtype"])


def test_whitespace_table_with_failure_counts(tmp_path: Path) -> None:
    out = (
        "running...\n"
        "   batch   hidden   dtype   us_per_iter   mismatches\n"
        "       1     4096    fp16        12.500            0\n"
        "       8     4096    fp16        40.125            0\n"
        "       8     5120    fp16        49.000            0\n"
        "       1     5120    fp16        13.900            0\n"
    )
    _, t = proposed(fake_run(tmp_path, out))
    assert (t["metric"], t["correct"]) == ("us_per_iter", "mismatches == 0")
    assert t["class_by"] == ["hidden"]  # a dimension of 2 values shared by several configs


# -- files the bench wrote, and the adapters' formats --------------------------------------------


def test_a_file_the_bench_wrote_beats_the_table_it_printed_and_timestamps_become_globs(tmp_path: Path) -> None:
    out = "N   time_us\n64  1.0\n"
    run = fake_run(tmp_path, out, {"results/run_20261122_091233.csv": "N,time_us,err\n64,1.0,0\n"})
    p, t = proposed(run)
    assert t["csv"] == "results/run_*_*.csv" and t.get("format", "csv") == "csv" and t["correct"] == "err == 0"
    assert "wrote to a file" in p.comments["target.csv"]


def test_two_written_files_ask_which(tmp_path: Path) -> None:
    run = fake_run(tmp_path, "", {"a.csv": "N,time_us\n1,2\n", "b.csv": "N,gbps\n1,900\n"})
    (q,) = onboard.propose(run).questions
    assert [c.value for c in q.choices] == ["file:a.csv", "file:b.csv"]
    _, t = proposed(run, table="file:b.csv")
    assert (t["csv"], t["metric"], t["direction"]) == ("b.csv", "gbps", "max")


def test_written_links_and_files_outside_the_repo_are_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("N,time_us\n1,2\n")
    run = fake_run(tmp_path, "N  time_us\n1  3.0\n")
    (run.repo / "link.csv").symlink_to(secret)
    run = onboard.BenchRun(
        run.bench, run.repo, 0, run.stdout_path, (Path("link.csv"), secret, Path("../secret.csv")), 1.0
    )
    (c,) = onboard.candidates(run)
    assert c.key == "stdout"


def test_perf_report_csv(tmp_path: Path) -> None:
    run = fake_run(tmp_path, "", {"out/softmax-performance.csv": (DATA / "perf_report_softmax.csv").read_text()})
    p, t = proposed(run)
    assert (t["format"], t["metric"], t["direction"]) == ("perf_report", "Triton (GB/s)", "max")
    assert t["config"] == ["N"] and set(t["ignore"]) == {"Torch (GB/s)", "Naive (GB/s)"}


def test_pytest_benchmark_json(tmp_path: Path) -> None:
    run = fake_run(
        tmp_path,
        "==== 3 passed ====\n",
        {"bench.json": (DATA / "pytest_benchmark.json").read_text()},
        bench="pytest benchmarks --benchmark-json=bench.json",
    )
    p, t = proposed(run)
    assert (t["format"], t["metric"], t["csv"]) == ("pytest-benchmark", "median_us", "bench.json")
    assert "median statistic" in p.comments["target.metric"] and t["config"][:4] == ["test", "group", "N", "dtype"]
    assert t["correct"].startswith("max_abs_err <= ")


def test_google_benchmark_json_on_stdout(tmp_path: Path) -> None:
    run = fake_run(
        tmp_path,
        (DATA / "google_benchmark_manual_time.txt").read_text(),
        bench="./build/bench_softmax --benchmark_format=json",
    )
    p, t = proposed(run)
    assert (t["format"], t["metric"], t["correct"]) == ("google-benchmark", "real_us", 'error == ""')
    assert t["config"] == ["benchmark", "M", "N"] and "cpu_us" in t["ignore"]
    assert "real time" in p.comments["target.metric"]
    assert any("names no Python file" in c for c in p.checks) and t["protected"] == []


def test_torch_benchmark_compare(tmp_path: Path) -> None:
    out = (DATA / "torch_compare_threads.txt").read_text()
    _, t = proposed(fake_run(tmp_path, out))
    # torch.softmax names a reference: the other description is the kernel
    assert (t["format"], t["metric"], t["config"]) == ("torch-benchmark", "triton_softmax", ["threads", "sub_label"])


def test_kopts_own_harness_output_is_served(tmp_path: Path) -> None:
    header = (
        "shape,B,N,H,hd,dtype,esize,dclass,us,err,us_mean,us_std,us_min,us_p10,us_p90,samples,gbps,copy_us,"
        "copy_gbps,pct_copy,prod,seed,model"
    )
    out = header + "\ncpu-64,1,2,2,64,bfloat16,2,narrow,900.1,0.3,901,5,890,891,910,3,0.1,10,0.2,1.1,1,7,m\n"
    p, t = proposed(fake_run(tmp_path, out, bench="python bench.py --dtypes bfloat16"))
    assert t["serve"] == "python bench.py --dtypes bfloat16 --serve" and "ab_command" not in t
    assert "calls" not in t  # this output has no calls column (an older harness)
    assert (t["metric"], t["correct"], t["class_by"]) == ("us", "err <= 1", ["dclass"])
    assert t["config"] == ["shape", "B", "N", "H", "hd", "dtype", "esize", "dclass"]
    assert tomllib.loads(p.text())["profile"]["command"] == "python bench.py --dtypes bfloat16 --profile"


def test_the_harness_calls_column_becomes_target_calls(tmp_path: Path) -> None:
    header = "shape,N,dtype,us,err,us_mean,us_std,us_min,us_p10,us_p90,samples,calls,gbps,copy_us,copy_gbps,pct_copy,prod,seed,model"
    out = header + "\ncpu-64,64,bfloat16,900.1,0.3,901,5,890,891,910,3,27,0.1,10,0.2,1.1,1,7,m\n"
    p, t = proposed(fake_run(tmp_path, out, bench="python bench.py"))
    assert t["serve"] == "python bench.py --serve" and t["calls"] == "calls"
    assert "calls" not in t["config"] and "calls" in t["ignore"]
    assert loads_config(p.text()).target.calls == "calls"  # the proposal loads as it is


def test_harness_columns_match_the_harness() -> None:
    from kopt_supervisor.kernels.harness import bench

    assert steps.HARNESS_STATS == bench.STATS and steps.HARNESS_EXTRA == bench.EXTRA


# -- what cannot be proposed -------------------------------------------------------------------


def test_no_measurement_and_a_failed_bench_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no table with a time or rate column.*tables found: stdout"):
        onboard.propose(fake_run(tmp_path, "N,dtype\n1,fp16\n2,fp16\n"))
    with pytest.raises(BadInput, match="the bench exited 3"):
        onboard.propose(fake_run(tmp_path, "N,us\n1,2\n", rc=3))


def test_answers_from_the_command_line() -> None:
    assert onboard.answers_from(["metric=time (us)", "table=stdout#2"]) == {"metric": "time (us)", "table": "stdout#2"}
    with pytest.raises(BadInput, match="--answer 'colour=red'"):
        onboard.answers_from(["colour=red"])


def test_decision_cost_is_in_the_header_and_slow_benches_point_to_the_harness(tmp_path: Path) -> None:
    p, _ = proposed(fake_run(tmp_path, "N,time_us\n1,2\n", seconds=17.0))
    assert p.cost is not None and p.cost.slow and "Decision cost:" in p.text()
    assert any("kopt's harness" in c for c in p.checks)
    fast, _ = proposed(fake_run(tmp_path, "N,time_us\n1,2\n", seconds=0.5))
    assert fast.cost is not None and not fast.cost.slow


def test_write_never_overwrites(tmp_path: Path) -> None:
    p, _ = proposed(fake_run(tmp_path, "N,time_us\n1,2\n"))
    dest = tmp_path / "kopt.toml"
    onboard.write(p, dest)
    assert load_config(dest).target.metric == "time_us"
    with pytest.raises(BadInput, match="exists already"):
        onboard.write(p, dest)


def test_a_real_run_through_local_run_bench(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "timing.py").write_text("import time\n\ndef ms():\n    return 1.25\n")
    (repo / "kern.py").write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n")
    (repo / "bench.py").write_text(
        "import os\nimport sys\nsys.modules['triton'] = type(sys)('triton')\n"
        "sys.modules['triton'].jit = lambda f: f\nimport kern\nfrom timing import ms\n"
        "os.makedirs('out', exist_ok=True)\n"
        "open('out/r.csv', 'w').write('N,dtype,ms,ok\\n64,fp16,' + str(ms()) + ',1\\n128,fp16,2.5,1\\n')\n"
        "print('done')\n"
    )
    shutil.copy(repo / "bench.py", repo / "unused.py")
    run = onboard.run_once(repo, f"{sys.executable} bench.py", onboard.local_run_bench(tmp_path / "logs"))
    assert run.returncode == 0 and run.files_written == (Path("out/r.csv"),) and run.seconds > 0
    _, t = proposed(run)
    assert (t["csv"], t["metric"], t["correct"]) == ("out/r.csv", "ms", "ok == 1")
    assert t["protected"] == ["bench.py", "timing.py"] and t["sources"] == ["bench.py", "kern.py", "timing.py"]


def test_settle_asks_one_question_at_a_time_or_fails_in_one_line(tmp_path: Path) -> None:
    out = "N,triton_us,cuda_us,score\n64,1.0,1.1,3\n128,2.0,2.1,4\n"
    run = fake_run(tmp_path, out)
    asked: list[str] = []

    def ask(q: onboard.Question) -> str:
        asked.append(q.key)
        return "cuda_us"

    p = onboard.settle(run, {}, ask)
    assert asked == ["metric"] and p.target["metric"] == "cuda_us"
    with pytest.raises(BadInput, match=r"^kopt init --bench: Which column .*triton_us, cuda_us"):
        onboard.settle(run, {})
    assert onboard.settle(run, {"metric": "triton_us"}).target["metric"] == "triton_us"
    with pytest.raises(BadInput, match="'gpu_us' is not one of triton_us, cuda_us"):
        onboard.settle(run, {}, lambda q: "gpu_us")

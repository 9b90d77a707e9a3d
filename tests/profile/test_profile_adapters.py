"""The commands the adapters build, the choice of profiler, and bad output.

The end-to-end test runs the built argv through a stand-in `ncu` (a test double on PATH
that honours ncu's option shapes, runs the wrapped command and writes a CSV where
`--log-file` says), so the argv's shape is checked by a real subprocess.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput, KoptFailure
from kopt_supervisor.engine.profile import choose_profiler
from kopt_supervisor.engine.profile.ncu import DEFAULT_METRICS, NcuProfiler, ncu_launches
from kopt_supervisor.engine.profile.profiler import PROFILE_ENV
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler, trace_launches

DATA = Path(__file__).resolve().parents[1] / "data"


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_ncu_command_wraps_the_bench(tmp_path: Path):
    out = tmp_path / "profiles" / "v3"
    argv = NcuProfiler().command(["python", "bench.py", "--fast"], out, "rmsnorm|rms_bwd")
    assert argv[0] == "ncu"
    assert argv[-3:] == ["python", "bench.py", "--fast"]
    assert _option(argv, "--clock-control") == "none"
    assert _option(argv, "--target-processes") == "all"
    assert _option(argv, "--cache-control") == "none"  # unflushed: flushed launches disagreed with the bench
    assert _option(NcuProfiler().for_keep("time").command(["x"], out, ""), "--cache-control") == "none"  # a keep's too
    assert _option(argv, "--page") == "raw" and "--csv" in argv
    assert _option(argv, "--print-units") == "base"
    assert _option(argv, "--print-kernel-base") == "function"
    assert _option(argv, "--metrics").split(",") == list(DEFAULT_METRICS)
    assert _option(argv, "--log-file") == str((out / "ncu.csv").resolve())
    # NVTX ranges recorded into a report that after_commands reads back
    assert "--nvtx" in argv and _option(argv, "--export") == str((out / "ncu").resolve())
    assert "--force-overwrite" in argv
    # the regex never filters what is profiled: it only marks kernels for display
    assert "--kernel-name" not in argv and "--nvtx-include" not in argv
    assert not any("rmsnorm" in a for a in argv)
    assert out.is_dir()
    assert "--launch-count" not in argv


def test_ncu_after_commands_print_the_report_twice(tmp_path: Path):
    plain, renamed = NcuProfiler(executable="/opt/ncu").after_commands(tmp_path)
    report = str((tmp_path / "ncu.ncu-rep").resolve())
    for argv in (plain, renamed):
        assert argv[:3] == ["/opt/ncu", "--import", report]
        assert _option(argv, "--page") == "raw" and "--csv" in argv
        assert _option(argv, "--print-units") == "base" and _option(argv, "--print-kernel-base") == "function"
    assert _option(plain, "--log-file") == str((tmp_path / "ncu_import.csv").resolve())
    assert "--print-nvtx-rename" not in plain
    assert _option(renamed, "--print-nvtx-rename") == "kernel"
    assert _option(renamed, "--log-file") == str((tmp_path / "ncu_nvtx.csv").resolve())
    assert Rocprofv3Profiler().after_commands(tmp_path) == []


def test_ncu_command_without_regex_profiles_every_kernel(tmp_path: Path):
    argv = NcuProfiler(cache_control="all", launch_count=200).command(["./bench"], tmp_path, "")
    assert "--kernel-name" not in argv
    assert _option(argv, "--cache-control") == "all"
    assert _option(argv, "--launch-count") == "200"
    with pytest.raises(ValueError):
        NcuProfiler(cache_control="some")


def test_rocprofv3_command_wraps_the_bench(tmp_path: Path):
    argv = Rocprofv3Profiler().command(["python", "bench.py"], tmp_path / "p", "pa_")
    assert argv[0] == "rocprofv3"
    assert {"--kernel-trace", "--marker-trace", "--hip-runtime-trace", "--stats", "--truncate-kernels"} <= set(argv)
    assert _option(argv, "--output-format") == "csv"
    assert _option(argv, "-d") == str((tmp_path / "p").resolve())
    assert argv[argv.index("--") + 1 :] == ["python", "bench.py"]
    assert (tmp_path / "p").is_dir()


def _fake_tools(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_choose_profiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = tmp_path / "bin"
    _fake_tools(bin_dir, "ncu")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert isinstance(choose_profiler("auto", "nvidia"), NcuProfiler)
    assert choose_profiler("auto", "amd") is None  # rocprofv3 not on PATH
    assert choose_profiler("auto", "none") is None
    assert choose_profiler("none", "nvidia") is None
    assert isinstance(choose_profiler("ncu", "amd"), NcuProfiler)
    with pytest.raises(KoptFailure, match="`rocprofv3` is not on PATH"):
        choose_profiler("rocprofv3", "amd")
    with pytest.raises(BadInput, match="'nsys'"):
        choose_profiler("nsys", "nvidia")
    _fake_tools(bin_dir, "rocprofv3")
    assert isinstance(choose_profiler("auto", "AMD"), Rocprofv3Profiler)


FAKE_NCU = textwrap.dedent(
    """\
    #!{python}
    # Test double for ncu: consumes ncu-style options. Profiling: runs the wrapped command,
    # writes a "report" (the two CSV layouts of tests/data/{sample}) where --export says and
    # the raw page to --log-file. --import: prints the report's raw page to --log-file,
    # renamed after NVTX ranges with --print-nvtx-rename kernel.
    import json, subprocess, sys
    with_value = {{"--target-processes", "--clock-control", "--cache-control", "--replay-mode",
                  "--metrics", "--print-kernel-base", "--page", "--export", "--import",
                  "--print-units", "--log-file", "--launch-count", "--print-nvtx-rename"}}
    flags = {{"--csv", "--nvtx", "--force-overwrite"}}
    args, opts, i = sys.argv[1:], {{}}, 0
    while i < len(args) and args[i].startswith("--"):
        if args[i] in with_value:
            opts[args[i]] = args[i + 1]; i += 2
        elif args[i] in flags:
            opts[args[i]] = True; i += 1
        else:
            sys.exit("fake ncu: unknown option " + args[i])
    if opts.get("--page") != "raw" or "--csv" not in opts or opts.get("--print-units") != "base":
        sys.exit("fake ncu: kopt must ask for the raw page as CSV in base units")
    if "--import" in opts:
        report = json.load(open(opts["--import"]))
        rename = opts.get("--print-nvtx-rename", "none")
        open(opts["--log-file"], "w").write(report["nvtx" if rename == "kernel" else "plain"])
        sys.exit(0)
    if "--nvtx" not in opts or "--export" not in opts:
        sys.exit("fake ncu: kopt must record NVTX ranges into a report")
    rc = subprocess.call(args[i:])
    plain = open({folder!r} + "/ncu_import.csv").read()
    nvtx = open({folder!r} + "/ncu_nvtx.csv").read()
    json.dump({{"plain": plain, "nvtx": nvtx}}, open(opts["--export"] + ".ncu-rep", "w"))
    open(opts["--log-file"], "w").write("==PROF== fake ncu\\n" + plain)
    sys.exit(rc)
    """
)


def test_command_runs_under_an_ncu_shaped_cli_and_parses(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ncu"
    fake.write_text(
        FAKE_NCU.format(python=sys.executable, sample="ncu_nvtx_renamed", folder=str(DATA / "ncu_nvtx_renamed"))
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    marker = tmp_path / "bench_ran"
    bench = [
        sys.executable,
        "-c",
        f"import os; open({str(marker)!r}, 'w').write(os.environ['KOPT_PROFILE'])",
    ]
    profiler = NcuProfiler(executable=str(fake))
    out = tmp_path / "profiles" / "v1"
    argv = profiler.command(bench, out, "rmsnorm")
    env = {**os.environ, **PROFILE_ENV}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "1"
    # before the after-commands: the live CSV alone, no ranges, and the summary says why
    early = profiler.parse(out, "_rms")
    assert early.ranged == () and "after_commands did not run" in early.ranges_source
    for after in profiler.after_commands(out):
        done = subprocess.run(after, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    summary = profiler.parse(out, "_rms")
    assert summary.kopt_ranges == ("kopt:dclass=narrow,n=1024", "kopt:dclass=narrow,n=2048", "kopt:dclass=wide,n=4096")
    assert summary.files == (str(out / "ncu_import.csv"), str(out / "ncu_nvtx.csv"))


@pytest.mark.parametrize(
    "text, message",
    [
        ("==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM\n", "no CSV table"),
        ('"Name","Value"\n"x","1"\n', "not an ncu CSV"),
        (
            '"ID","Kernel Name","launch__registers_per_thread"\n"0","k","32"\n',
            "no gpu__time_duration.sum column",
        ),
        (
            '"ID","Kernel Name","gpu__time_duration.sum"\n"0","k"\n',
            "a row has 2 fields, the header 3",
        ),
        (
            '"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","12x"\n',
            "kernel 'k', gpu__time_duration.sum = '12x'",
        ),
        (
            '"ID","Kernel Name","gpu__time_duration.sum"\n"","","fortnight"\n"0","k","12"\n',
            "unknown time unit 'fortnight'",
        ),
        (
            '"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","n/a"\n',
            "kernel 'k' (ID 0) has no gpu__time_duration.sum",
        ),
    ],
)
def test_malformed_ncu_output_is_a_one_line_failure(text: str, message: str):
    with pytest.raises(KoptFailure, match=re.escape(message)):
        ncu_launches(text, where="ncu.csv")


def test_missing_ncu_log_names_the_file(tmp_path: Path):
    with pytest.raises(KoptFailure, match=r"ncu\.csv: ncu wrote no output"):
        NcuProfiler().parse(tmp_path, "x")


def test_rocprofv3_bad_output(tmp_path: Path):
    with pytest.raises(KoptFailure, match="wrote no \\*kernel_trace.csv"):
        Rocprofv3Profiler().parse(tmp_path, "x")
    bad = tmp_path / "a_kernel_trace.csv"
    bad.write_text('"Kernel_Name","Start_Timestamp","End_Timestamp"\n"k",200,100\n')
    with pytest.raises(KoptFailure, match=r"a_kernel_trace\.csv:2: bad timestamps"):
        trace_launches(bad)
    bad.write_text('"Kernel_Name","Duration"\n"k",100\n')
    with pytest.raises(KoptFailure, match="not a rocprofv3 kernel trace"):
        trace_launches(bad)
    bad.write_text('"Kernel_Name","Start_Timestamp","End_Timestamp","VGPR_Count"\n"k",100,200,many\n')
    with pytest.raises(KoptFailure, match=r":2: vgpr_count = 'many' is not a number"):
        trace_launches(bad)
    bad.unlink()
    stats = tmp_path / "b_kernel_stats.csv"
    stats.write_text('"Name","Calls","TotalDurationNs"\n"k",0,100\n')
    with pytest.raises(KoptFailure, match=r"b_kernel_stats\.csv:2: not a rocprofv3 kernel stats row"):
        Rocprofv3Profiler().parse(tmp_path, "k")


def test_an_adapter_that_does_not_say_how_to_run_and_read_its_tool_cannot_be_made() -> None:
    # the base declares `command` and `parse` abstract: a half-written adapter fails where it is
    # made, not in the middle of a keep's profile
    import pytest

    from kopt_supervisor.engine.profile.profiler import Profiler

    class RunsOnly(Profiler):
        def command(self, inner_argv: list[str], out_dir, kernel_regex: str) -> list[str]:  # type: ignore[no-untyped-def]
            return inner_argv

    with pytest.raises(TypeError, match="parse"):
        RunsOnly()  # type: ignore[abstract]

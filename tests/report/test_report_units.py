"""The pure parts of the report: statistics, the export's rules, which samples measure which
tree, environment parsers, and rendering of whatever the loop recorded."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import statistics
import sys
import types
from pathlib import Path

import pytest

from kopt_supervisor.engine import doctor
from kopt_supervisor.engine import report as writer
from kopt_supervisor.engine.report import inputs
from kopt_supervisor.engine.report.inputs import geomean, quantile, speedup, summarize
from kopt_supervisor.engine.report.provenance import generic_tables
from kopt_supervisor.engine.report.provenance import gpu_state as _gpu_state
from kopt_supervisor.engine.store import Iteration

# -- statistics ----------------------------------------------------------------------------


@pytest.mark.parametrize("xs", [[3.0, 1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0, 9.5, 7.25], [2.0, 2.0]])
def test_summary_matches_the_statistics_module(xs):
    s = summarize(xs)
    q = statistics.quantiles(xs, n=10, method="inclusive")
    assert s.n == len(xs) and s.min == min(xs) and s.max == max(xs)
    assert s.median == pytest.approx(statistics.median(xs))
    assert s.mean == pytest.approx(statistics.fmean(xs))
    assert s.std == pytest.approx(statistics.stdev(xs))
    assert s.p10 == pytest.approx(q[0]) and s.p90 == pytest.approx(q[8])


def test_summary_edge_cases():
    one = summarize([4.0, float("nan"), float("inf")])
    assert one.n == 1 and one.std is None and one.p10 == one.p90 == 4.0
    assert summarize([]) is None and summarize([float("nan")]) is None
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_speedup_is_oriented_by_direction_and_geomean_is_equal_weight():
    assert speedup(10.0, 8.0, "min") == pytest.approx(1.25)
    assert speedup(100.0, 125.0, "max") == pytest.approx(1.25)
    assert speedup(10.0, None) is None and speedup(0.0, 1.0) is None
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([None, 4.0, float("nan")]) == pytest.approx(4.0)
    assert geomean([]) is None


# -- the export's rules ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "path,in_branch,proposer,ignored,csv,reason",
    [
        ("kernel.py", True, {"kernel.py"}, False, "-", None),
        ("new_kernel.py", False, {"new_kernel.py"}, False, "-", None),
        ("build/setup.py", True, set(), False, "-", None),  # tracked since the baseline
        ("build/gen.py", False, {"build/gen.py"}, False, "-", "under `build/`"),
        ("pkg/x.egg-info/PKG-INFO", False, None, False, "-", "under `x.egg-info/`"),
        ("out.csv", False, {"out.csv"}, False, "results/*.csv", None),
        ("results/r1.csv", False, set(), False, "results/*.csv", "[target].csv"),
        ("results/r1.csv", True, set(), False, "results/*.csv", "[target].csv"),
        ("profile.ncu-rep", False, {"profile.ncu-rep"}, False, "-", "profiler report"),
        ("deep/k.cpython-311.pyc", True, set(), False, "-", "compiled"),
        ("run.log", False, {"run.log"}, False, "-", "log or scratch"),
        ("stats.csv", False, {"kernel.py"}, False, "-", "not written by the proposer"),
        ("stats.csv", False, None, False, "-", None),  # no record: cannot tell
        ("table.dat", False, {"table.dat"}, True, "-", ".gitignore"),
        ("table.dat", True, set(), True, "-", None),  # tracked on purpose
        ("core", False, {"core"}, False, "-", "log or scratch"),
        ("core.py", False, {"core.py"}, False, "-", None),
    ],
)
def test_exclusion_rules(path, in_branch, proposer, ignored, csv, reason):
    got = writer.exclusion(path, ignored=ignored, in_branch=in_branch, proposer_files=proposer, bench_csv=csv)
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


# -- which samples measure which tree ----------------------------------------------------------


def it(version, status, *, commit=None, before=None, masked=False, record=None) -> Iteration:
    return Iteration(
        version, status, masked=masked, commit=commit, best_commit_before=before, record=record or {}, started_at=0.0
    )


def row(version, stage, side, value, config="c1"):
    return {"version": version, "stage": stage, "side": side, "config": config, "cls": "k", "value": value}


def test_tree_samples_follow_sides_stages_and_masks():
    its = [
        it(0, "baseline", commit="B", before="B", record={"configs": {"c1": {"cls": "k", "production": True}}}),
        it(1, "keep", commit="C1", before="B", record={"commit_tree": "t", "evaluated_tree": "t"}),
        it(2, "keep", commit="C2", before="C1", record={"commit_tree": "t2", "evaluated_tree": "t1"}),
        it(3, "regression", before="C2"),
        it(4, "keep", commit="C4", before="C2", masked=True),
    ]
    rows = [
        row(0, "baseline", "best", 10.0),
        row(1, "eval", "best", 11.0),
        row(1, "eval", "cand", 5.0),
        row(2, "eval", "best", 6.0),
        row(2, "eval", "cand", 99.0),
        row(2, "verify", "cand", 4.0),
        row(2, "verify", "best", 6.5),
        row(3, "eval", "best", 4.5),
        row(3, "eval", "cand", 7.0),
        row(4, "eval", "best", 4.2),
        row(4, "eval", "cand", 3.0),
    ]
    assert inputs.tree_samples(its, rows, "B").values == {"c1": [10.0, 11.0]}
    # C1: v1's candidate (eval: its committed tree is the evaluated one) and v2's best side
    assert inputs.tree_samples(its, rows, "C1").values == {"c1": [5.0, 6.0, 6.5]}
    # C2: v2's verify candidate only (its eval tree was not the committed one), v3's best; v4 masked
    c2 = inputs.tree_samples(its, rows, "C2")
    assert c2.values == {"c1": [4.0, 4.5]} and c2.sources == {2: 1, 3: 1}
    data = inputs.collect({}, its, rows)
    assert data.best.version == 2 and [i.version for i in data.chain] == [1, 2]


def test_committed_tree_never_timed_has_no_candidate_samples():
    keep = it(1, "keep", commit="C", before="B", record={"commit_tree": "x", "evaluated_tree": "y"})
    assert inputs.committed_stages(keep, {"eval", "reverify"}) == frozenset()
    assert inputs.committed_stages(keep, {"eval", "reverify", "verify"}) == {"verify"}
    same = it(2, "keep", commit="D", before="C", record={"commit_tree": "t", "evaluated_tree": "t"})
    assert inputs.committed_stages(same, {"eval", "reverify"}) == {"eval", "reverify"}


def test_reverify_samples_count_and_flagged_rounds_are_left_out():
    """The keep decided again in fresh processes measured both trees: its samples count for
    each. A round the GPU gate flagged is left out of every statistic (the decision left it
    out too) and counted; a forged "flagged" of any truthy kind is still a flag."""
    its = [
        it(0, "baseline", commit="B", before="B", record={"configs": {"c1": {"cls": "k", "production": True}}}),
        it(1, "keep", commit="C1", before="B", record={"commit_tree": "t", "evaluated_tree": "t"}),
    ]
    rows = [
        row(0, "baseline", "best", 10.0),
        row(1, "eval", "best", 11.0),
        row(1, "eval", "cand", 5.0),
        row(1, "reverify", "best", 12.0),
        row(1, "reverify", "cand", 5.5),
        {**row(1, "eval", "best", 500.0), "flagged": 1},
        {**row(1, "reverify", "cand", 0.001), "flagged": "yes"},
    ]
    base, final = inputs.tree_samples(its, rows, "B"), inputs.tree_samples(its, rows, "C1")
    assert base.values == {"c1": [10.0, 11.0, 12.0]} and base.flagged == 1 and base.sources == {0: 1, 1: 2}
    assert final.values == {"c1": [5.0, 5.5]} and final.flagged == 1


def test_chain_skips_a_stray_unmasked_keep_and_needs_a_baseline():
    its = [
        it(0, "baseline", commit="B", before="B"),
        it(1, "keep", commit="C1", before="B"),
        it(2, "keep", commit="C2", before="B"),
    ]  # v2 branched from the baseline (v1 unmasked by hand)
    data = inputs.collect({}, its, [])
    assert [i.version for i in data.chain] == [2] and [i.version for i in data.stray_keeps] == [1]
    with pytest.raises(inputs.NoBaseline):
        inputs.collect({}, [it(1, "keep", commit="C1", before="B")], [])


# -- environment ---------------------------------------------------------------------------------


NVIDIA_SMI = """Sat Nov 21 10:11:12 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""
AMD_SMI = (
    "AMDSMI Tool: 25.3.0+ede62f2 | AMDSMI Library version: 25.3.0 | ROCm version: 6.4.0 | "
    "amdgpu version: 6.12.12 | amd_hsmp version: N/A\n"
)


def test_tool_output_parsers():
    assert doctor.parse_nvidia_smi_header(NVIDIA_SMI) == {"driver": "550.54.15", "cuda_driver": "12.4"}
    assert doctor.parse_amd_smi_version(AMD_SMI) == {"rocm": "6.4.0", "driver": "6.12.12"}
    assert doctor.parse_rocm_smi_driver("GPU[0]\t\t: Driver version: 6.8.5\n") == "6.8.5"
    assert doctor.cuda_version_from_int(12040) == "12.4" and doctor.cuda_version_from_int(11080) == "11.8"
    assert doctor.parse_probe('noise\nKOPT_ENV {"version": "3.11.7"}\n') == {"version": "3.11.7"}
    assert doctor.parse_probe("KOPT_ENV not json") is None


def fake_nvml(*, fail: bool) -> types.ModuleType:
    m = types.ModuleType("pynvml")

    def init():
        if fail:
            raise RuntimeError("NVML Shared Library Not Found")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: b"560.35.03"
    m.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12060
    return m


def test_gpu_software_prefers_nvml_then_the_cli_and_says_why_not(monkeypatch):
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)

    def smi(argv):
        return (0, NVIDIA_SMI, "") if argv == ["nvidia-smi"] else (127, "", f"{argv[0]}: not found")

    def nothing(argv):
        return 127, "", f"{argv[0]}: not found"

    assert doctor.gpu_software("nvidia", smi, nvml=fake_nvml(fail=False)) == {
        "vendor": "nvidia",
        "driver": "560.35.03",
        "cuda_driver": "12.6",
        "source": "NVML",
    }
    got = doctor.gpu_software("auto", smi, nvml=fake_nvml(fail=True))
    assert got == {"vendor": "nvidia", "driver": "550.54.15", "cuda_driver": "12.4", "source": "nvidia-smi"}
    none = doctor.gpu_software("nvidia", nothing, nvml=fake_nvml(fail=True))
    assert none["driver"] is None and "NVML Shared Library Not Found" in none["note"]

    def amd(argv):
        return (0, AMD_SMI, "") if argv == ["amd-smi", "version"] else (127, "", "not found")

    assert doctor.gpu_software("amd", amd)["rocm"] == "6.4.0"
    assert doctor.gpu_software("none", nothing)["vendor"] == "none"
    monkeypatch.setenv("KOPT_FAKE_GPUS", "/x.json")
    assert doctor.gpu_software("auto", smi, nvml=fake_nvml(fail=False))["vendor"] == "fake"


def test_bench_interpreter_is_found_from_the_command(tmp_path):
    path = os.environ.get("PATH")
    exe = sys.executable
    name = Path(exe).name
    assert doctor.bench_interpreter(f"{exe} bench.py", tmp_path, path)[0] == exe
    assert doctor.bench_interpreter(f"FOO=1 env -u BAR {exe} -m pkg", tmp_path, path)[0] == exe
    bindir = str(Path(exe).parent)
    assert doctor.bench_interpreter(f"{name} bench.py", tmp_path, bindir)[0] == str(Path(bindir) / name)
    script = tmp_path / "run_bench"
    script.write_text(f"#!/usr/bin/env {name}\nprint(1)\n")
    script.chmod(0o755)
    found, how = doctor.bench_interpreter("./run_bench --fast", tmp_path, bindir)
    assert found == str(Path(bindir) / name) and "#!" in how
    sh = tmp_path / "bench.sh"
    sh.write_text("#!/bin/sh\necho\n")
    sh.chmod(0o755)
    found, how = doctor.bench_interpreter("./bench.sh", tmp_path, path)
    assert found is None and "not a Python interpreter" in how
    assert doctor.bench_interpreter("nosuchprogram-xyz --x", tmp_path, path)[0] is None


def test_probe_reports_the_interpreter_and_its_packages(tmp_path):
    got = doctor.probe_python(sys.executable, tmp_path, {})
    assert got["version"] == platform.python_version() and got["executable"] == sys.executable
    for pkg in ("torch", "numpy"):
        try:
            want = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            want = None
        assert got[pkg] == want
    bad = doctor.probe_python(str(tmp_path / "no-python"), tmp_path, {})
    assert "error" in bad


# -- rendering what the loop recorded ------------------------------------------------------------


def test_generic_tables_render_any_recorded_roofline_shape():
    rec = {
        "configs": {"a": {"flops": 2.0, "bytes": 8.0, "bound": "memory"}, "b": {"flops": 4.0, "pct_of_peak": 61.5}},
        "classes": {"k": {"pct_of_peak": 61.5}},
        "peak_source": "wiki",
    }
    text = "\n".join(generic_tables(rec))
    assert "| key | value |" in text and "| peak_source | wiki |" in text
    assert "|  | flops | bytes | bound | pct_of_peak |" in text
    assert "| a | 2 | 8 | memory | — |" in text and "| b | 4 | — | — | 61.5 |" in text
    assert "*classes*" in text


def test_gpu_state_line_says_what_the_gate_saw():
    ev = {
        "util_pct": 3.0,
        "mem_used_mib": 512.0,
        "foreign_processes": [{"pid": 7}],
        "throttle": ["sw_thermal"],
        "temp_c": 61.0,
        "time": "T",
    }
    assert _gpu_state(ev) == "util 3%, mem 512 MiB, 1 foreign process(es), throttle sw_thermal, 61 °C, at T"
    assert _gpu_state(None) == "not read" and _gpu_state({"missing": True}) == "the GPU vanished"


# -- profiles and recorded rooflines in the rendered report ---------------------------------------


def test_profiles_and_a_recorded_roofline_are_rendered():
    from kopt_supervisor.engine.config.toml_io import loads
    from kopt_supervisor.engine.profile.summary import Launch, summarize
    from kopt_supervisor.engine.report.inputs import ReportInputs, RooflineView
    from kopt_supervisor.engine.report.render import render_results

    def prof(ns: float):
        launches = [
            Launch("gemm_kernel<128, 64>", ns, registers_per_thread=96, occupancy_pct=41.5),
            Launch("reduce_kernel", 100.0),
        ]
        return summarize(launches * 4, "gemm|reduce", tool="ncu").to_dict()

    cfg = loads('[target]\nbench = "python b.py"\nmetric = "us"\n')
    configs = {"c1": {"cls": "k=1", "production": True, "row": {"n": 1}}}
    its = [
        it(0, "baseline", commit="B", before="B", record={"configs": configs, "profile": {"best": prof(1000.0)}}),
        Iteration(
            1,
            "keep",
            commit="C",
            best_commit_before="B",
            target_class="k=1",
            scope="class",
            hypothesis="tile 128x64",
            started_at=0.0,
            record={
                "profile": {"best": prof(1000.0), "cand": prof(800.0)},
                "roofline": {
                    "gpu": "G",
                    "specs": {"hbm_bandwidth": "hbm_bandwidth: 1 TB/s <- w:1"},
                    "configs": {"c1": {"bytes": 4096.0, "pct_of_peak": 55.0}},
                    "classes": {"k=1": {"cls": "k=1", "bound": "memory", "pct_geomean": 55.0}},
                    "production": ["c1"],
                    "target_pct": 90.0,
                },
                "classes": {
                    "k=1": {
                        "best": 10.0,
                        "cand": 8.0,
                        "ratio": 0.8,
                        "lo": 0.78,
                        "hi": 0.82,
                        "delta_pct": -20.0,
                        "verdict": "improved",
                    }
                },
            },
        ),
    ]
    rows = [row(0, "baseline", "best", 10.0), row(1, "eval", "best", 10.2), row(1, "eval", "cand", 8.0)]

    def render() -> str:
        data = inputs.collect({"repo": "/r", "state": "stopped"}, its, rows)
        return render_results(
            ReportInputs(
                data=data,
                cfg=cfg,
                tag="t",
                environment={},
                environment_when="at report time",
                roofline=RooflineView(False, "no formulas"),
                chart_text="chart",
                png_name=None,
                chart_note="",
                final_tree_sha=None,
                config_text="",
            )
        )

    text = render()
    prof_text = text.split("## Profiler")[1].split("## GPU")[0]
    assert "- baseline: target kernels 1100 ns per call" in prof_text
    assert "- final: target kernels 900 ns per call" in prof_text
    assert "| `gemm_kernel<128, 64>` | yes | 4 | 800 | 3200 | 96 | 41.5 |" in prof_text
    dispatch = text.split("## Dispatch")[1].split("## Roofline")[0]
    assert "| k=1 | 1 | v1 `C`: tile 128x64 | gemm_kernel<128, 64> |" in dispatch
    roof = text.split("## Roofline")[1].split("## Profiler")[0]
    assert "Not measured: no formulas." in roof
    assert "roofline record of v1 (from that iteration's own samples): % of peak per class: `k=1` 55% (memory)" in roof
    kept = text.split("## Kept iterations")[1].split("## Dispatch")[0]
    assert "| (all classes) 1100 → 900 (-18.18%) |" in kept  # both sides profiled, never compared
    its[1].record["profile"]["comparison"] = {"best_per_call_ns": 1000.0, "cand_per_call_ns": 850.0, "delta_pct": -15.0}
    its[1].record["roofline"] = {"configs": {"c1": {"bytes": 4096.0, "pct_of_peak": 55.0}}}  # any other shape
    text = render()
    assert "| (all classes) 1000 → 850 (-15.00%) |" in text  # the whole-run comparison of an older kopt
    assert "| c1 | 4096 | 55 |" in text.split("## Roofline")[1]


def test_performance_md_reads_the_profilers_time_per_call():
    from kopt_supervisor.engine.config.toml_io import loads
    from kopt_supervisor.engine.profile.summary import Launch, summarize
    from kopt_supervisor.engine.projections import counters, render_performance
    from tests.report.conftest import table

    summary = summarize([Launch("k", 900.0)] * 3, "k", tool="ncu").to_dict()
    assert "target_per_call_ns" in summary
    cfg = loads('[target]\nbench = "python b.py"\nmetric = "us"\n')
    its = [
        it(
            0,
            "baseline",
            commit="B",
            before="B",
            record={"classes": {"a": {"best": 2.0}}, "profile": {"best": summary}},
        ),
        it(
            1,
            "keep",
            commit="C",
            before="B",
            record={"classes": {"a": {"cand": 1.5, "ratio": 0.75}}, "profile": {"cand": {"target_ns_per_call": 700.0}}},
        ),
    ]
    rows = table(render_performance(cfg, {"tag": "t"}, its, counters(its)), "Date")
    assert [r["Profiler time (ns/call)"] for r in rows] == ["900", "700"]


def test_the_runs_notice_is_in_the_summary():
    from kopt_supervisor.engine.config.toml_io import loads
    from kopt_supervisor.engine.report.inputs import ReportInputs, RooflineView
    from kopt_supervisor.engine.report.render import render_results

    cfg = loads('[target]\nbench = "python b.py"\nmetric = "us"\n')
    its = [it(0, "baseline", commit="B", before="B", record={"configs": {"c1": {"cls": "k", "production": True}}})]
    data = inputs.collect({"notice": "CPU timings (Triton interpreter)"}, its, [row(0, "baseline", "best", 1.0)])
    text = render_results(
        ReportInputs(
            data=data,
            cfg=cfg,
            tag="t",
            environment={},
            environment_when="now",
            roofline=RooflineView(False, "x"),
            chart_text="",
            png_name=None,
            chart_note="",
            final_tree_sha=None,
            config_text="",
        )
    )
    summary = text.split("## Summary")[1].split("## Speedup per config")[0]
    assert "> **Note:** CPU timings (Triton interpreter)" in summary
    assert "Nothing was kept" in summary and "1.000×" in summary


# -- the per-class profiler comparison, agent costs and the sandbox in results.md ------------------


def report_of(its, meta=None, cfg_text='[target]\nbench = "python b.py"\nmetric = "us"\n'):
    from kopt_supervisor.engine.config.toml_io import loads
    from kopt_supervisor.engine.report.inputs import ReportInputs, RooflineView
    from kopt_supervisor.engine.report.render import render_results

    rows = [row(0, "baseline", "best", 10.0), row(1, "eval", "best", 10.2), row(1, "eval", "cand", 8.0)]
    data = inputs.collect({"repo": "/r", "state": "stopped", **(meta or {})}, its, rows)
    return render_results(
        ReportInputs(
            data=data,
            cfg=loads(cfg_text),
            tag="t",
            environment={},
            environment_when="at report time",
            roofline=RooflineView(False, "no formulas"),
            chart_text="chart",
            png_name=None,
            chart_note="",
            final_tree_sha=None,
            config_text="",
        )
    )


def two_iterations(record: dict) -> list[Iteration]:
    configs = {"c1": {"cls": "k=1", "production": True, "row": {"n": 1}}}
    return [
        it(0, "baseline", commit="B", before="B", record={"configs": configs}),
        Iteration(
            1,
            "keep",
            commit="C" * 40,
            best_commit_before="B",
            hypothesis="tile 128x64",
            started_at=0.0,
            record={
                "classes": {
                    "k=1": {
                        "best": 10.0,
                        "cand": 8.0,
                        "ratio": 0.8,
                        "lo": 0.78,
                        "hi": 0.82,
                        "delta_pct": -20.0,
                        "verdict": "improved",
                    }
                },
                **record,
            },
        ),
    ]


def test_the_profilers_per_class_word_is_shown_beside_the_benchs():
    """A comparison and an agreement as engine/profile/classes.py writes them (to_dict of the
    real types): per class best → candidate per call, the change with its interval, the
    bench's change, the agreement with its reason, kernels that appeared or disappeared, and
    the time outside the ranges that grew."""
    from kopt_supervisor.engine.profile import (
        Agreement,
        ClassAgreement,
        ClassChange,
        ClassComparison,
        Unattributed,
        UnattributedGroup,
    )

    cmp = ClassComparison(
        per_class=True,
        confidence=0.99,
        noise="launch spread and a 0.3% run-to-run term",
        classes=(
            ClassChange(
                "k=1", 1000.0, 800.0, 0.8, 0.78, 0.82, appeared=("fused_kernel",), disappeared=("copy_kernel",)
            ),
            ClassChange("k=2", 500.0, 505.0, 1.01, 0.99, 1.03, problems=("config c9: none in the candidate",)),
        ),
        unattributed=Unattributed(
            50.0, 400.0, True, (UnattributedGroup("cand", "precompute", 1, 350.0, "outside any kopt range"),)
        ),
    )
    agreement = Agreement(
        (
            ClassAgreement("k=1", "agrees", "improved", 0.79, 0.77, 0.81, 0.8, 0.78, 0.82, "the profiler sees a gain"),
            ClassAgreement(
                "k=2", "disagrees", "improved", 0.9, 0.88, 0.92, 1.01, 0.99, 1.03, "the profiler rules out a gain of 1%"
            ),
        ),
        True,
    )
    text = report_of(two_iterations({"profile": {"comparison": cmp.to_dict(), "agreement": agreement.to_dict()}}))
    kept = text.split("## Kept iterations")[1].split("## Dispatch")[0]
    assert (
        "k=1 1000 → 800 (-20.00%, agrees); k=2 500 → 505 (+1.00%, **disagrees**); work outside the config "
        "ranges grew" in kept
    )
    prof = text.split("## Profiler")[1].split("## GPU")[0]
    rows = {r["class"]: r for r in _table_rows(prof, "class")}
    assert rows["k=1"]["best ns/call"] == "1000" and rows["k=1"]["cand ns/call"] == "800"
    assert rows["k=1"]["profiler change"] == "-20.00%" and rows["k=1"]["99% interval"] == "[-22.0, -18.0]"
    assert rows["k=1"]["bench change [interval]"] == "-21.00% [-23.0, -19.0]"
    assert rows["k=1"]["agreement"] == "agrees: the profiler sees a gain"
    assert rows["k=1"]["kernels appeared"] == "`fused_kernel`" and rows["k=1"]["kernels disappeared"] == "`copy_kernel`"
    assert rows["k=2"]["agreement"] == "**disagrees**: the profiler rules out a gain of 1%"
    assert "- Outside every config's range: 50 → 400 ns per profile; **grew beyond noise**" in prof
    assert "- k=2: config c9: none in the candidate" in prof
    assert "- Noise: launch spread and a 0.3% run-to-run term" in prof
    assert "**v1** `CCCCCCCCCC`: tile 128x64" in prof
    failed = report_of(two_iterations({"profile": {"error": "ncu: ERR_NVGPUCTRPERM"}}))
    assert "| failed: ncu: ERR_NVGPUCTRPERM |" in failed.split("## Kept iterations")[1]
    assert "| not profiled |" in report_of(two_iterations({})).split("## Kept iterations")[1]


def _table_rows(text: str, first: str) -> list[dict[str, str]]:
    from tests.report.conftest import table

    return table(text, first)


def agent_record(
    agent: str, cost: float | None, tokens: tuple[int, int] | None, repair_cost: float | None = None
) -> dict:
    from kopt_supervisor.engine.records import AgentRun

    def run(c: float | None, sid: str) -> dict:
        i, o = tokens or (None, None)
        return AgentRun(
            agent=agent,
            cost_usd=c,
            input_tokens=i,
            output_tokens=o,
            session_id=sid,
            wall_s=61.5,
            transcript_path="logs/v1/proposer.out",
            transcript_bytes=2048,
            transcript_cut=True,
        ).to_dict()

    rec = {"proposal": {"command": agent, "exit": 0, "agent": run(cost, "s-1")}}
    if repair_cost is not None or agent in ("codex", "gemini"):
        rec["repairs"] = [{"command": agent, "exit": 0, "agent": run(repair_cost, "s-1")}]
    return rec


def test_agent_costs_name_the_clis_that_report_no_cost_and_the_budget():
    cfg = (
        '[target]\nbench = "python b.py"\nmetric = "us"\n[propose]\nkind = "command"\ncommand = "x"\n'
        "budget_usd = 2.0\nbudget_tokens = 100000\n"
    )
    its = two_iterations(agent_record("claude-code", 0.5, (20000, 1000), repair_cost=0.25))
    its.append(
        Iteration(
            2,
            "regression",
            best_commit_before="C" * 40,
            masked=True,
            started_at=0.0,
            record=agent_record("codex", None, (5000, 500)),
        )
    )
    text = report_of(its, cfg_text=cfg)
    s = text.split("## Agent costs")[1].split("## Commands")[0]
    assert (
        "- Cost: $0.75 (+ 2 run(s) that reported none) over 4 agent run(s); [propose].budget_usd = $2.00 "
        "(37.5% spent)" in s
    )
    assert "- Tokens: 53,000 (input 50,000" in s and "[propose].budget_tokens = 100,000 (53% spent)" in s
    assert (
        "- Reported no cost: `codex` (2 run(s)); their dollars are unknown, not zero (Codex CLI and Gemini "
        "CLI print tokens, not prices)" in s
    )
    rows = _table_rows(s, "iteration")
    assert [(r["iteration"], r["run"], r["cost"]) for r in rows] == [
        ("v1", "proposal", "$0.50"),
        ("v1", "repair 1", "$0.25"),
        ("v2 (masked)", "proposal", "not reported"),
        ("v2 (masked)", "repair 1", "not reported"),
    ]
    assert rows[0]["transcript"] == "`logs/v1/proposer.out` (2.0 KiB, cut)" and rows[0]["wall"] == "61.5 s"
    assert rows[0]["tokens in / cached / out"] == "20k / — / 1k"
    summary = text.split("## Summary")[1].split("## Speedup")[0]
    assert (
        "- Agent: $0.75 (+ 2 run(s) that reported none) of a budget of $2.00 over 4 agent run(s), 53k tokens "
        "of a budget of 100k" in summary
    )
    none = report_of(two_iterations({}))
    assert "No agent ran in this run (proposer `manual`)" in none.split("## Agent costs")[1]
    assert "- Agent:" not in none


@pytest.mark.parametrize(
    "sandbox,warned",
    [
        ({"confined": True, "summary": "sandboxed: bubblewrap 0.9.0", "ever_unconfined": False}, False),
        (
            {
                "confined": False,
                "summary": "UNSANDBOXED (--no-sandbox): every bench ran without confinement",
                "ever_unconfined": True,
            },
            True,
        ),
        # the latest session was confined, an earlier one was not: still said, first
        ({"confined": True, "summary": "sandboxed: bubblewrap 0.9.0", "ever_unconfined": True}, True),
        # a forged or damaged record that only says it was unconfined
        ({"confined": False}, True),
    ],
)
def test_a_run_without_the_sandbox_says_so_in_results_and_performance_md(sandbox, warned):
    from kopt_supervisor.engine.config.toml_io import loads
    from kopt_supervisor.engine.projections import counters, render_performance

    its = two_iterations({})
    text = report_of(its, meta={"sandbox": sandbox})
    summary = text.split("## Summary")[1].split("## Speedup")[0]
    perf = render_performance(
        loads('[target]\nbench = "b"\nmetric = "us"\n'), {"tag": "t", "sandbox": sandbox}, its, counters(its)
    )
    line = next(ln for ln in perf.splitlines() if ln.startswith("Sandbox: "))
    if warned:
        assert "> **Warning:** proposers and candidate code of this run ran without kopt's sandbox" in summary
        assert "- Sandbox: **UNSANDBOXED" in summary and line.startswith("Sandbox: **UNSANDBOXED")
    else:
        assert "Warning" not in summary and "- Sandbox: sandboxed: bubblewrap 0.9.0" in summary
        assert line == "Sandbox: sandboxed: bubblewrap 0.9.0"
    older = report_of(its)  # a run from before the sandbox: said, not guessed
    assert "- Sandbox: not recorded" in older


def test_a_failed_baseline_is_no_candidate():
    """`kopt status` of a run whose baseline failed its bench had said "candidates 1"."""
    from kopt_supervisor.engine.projections import counters
    from kopt_supervisor.engine.records import Status

    c = counters([it(0, Status.FAIL_BENCH)])
    assert (c.candidates, c.consecutive_failures, c.keeps) == (0, 0, 0)
    c = counters([it(0, Status.BASELINE), it(1, Status.FAIL_BENCH), it(2, Status.KEEP)])
    assert (c.candidates, c.keeps) == (2, 1)

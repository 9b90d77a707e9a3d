"""The ncu and rocprofv3 parsers against every input in tests/data and its expectation file.

A capture committed later as tests/data/ncu_h100_*.csv (with its .expect.json written by
tests/device/capture_ncu.sh) is picked up here without editing this file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopt_supervisor.engine.profile.ncu import NcuProfiler, parse_ncu_csv
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler
from kopt_supervisor.engine.profile.summary import ProfileSummary

DATA = Path(__file__).resolve().parents[1] / "data"
NCU_FILES = sorted(DATA.glob("ncu_*.csv"))
ROCPROF_DIRS = sorted(p for p in DATA.glob("rocprofv3_*") if p.is_dir())


def _check(summary: ProfileSummary, expect: dict) -> None:
    for key in ("launches", "calls", "anchor", "hottest"):
        if key in expect:
            assert getattr(summary, key) == expect[key], key
    if "target_total_ns" in expect:
        assert summary.target_total_ns == pytest.approx(expect["target_total_ns"])
        assert summary.target_per_call_ns == pytest.approx(expect["target_total_ns"] / expect["calls"])
    names = {k.name for k in summary.kernels}
    for name, fields in expect.get("kernels", {}).items():
        assert name in names, f"{name} not among {sorted(names)}"
        stat = summary.kernel(name)
        assert stat is not None
        for field, value in fields.items():
            got = getattr(stat, field)
            if isinstance(value, float | int) and not isinstance(value, bool):
                assert got == pytest.approx(value), f"{name}.{field}"
            else:
                assert got == value, f"{name}.{field}"
    # invariants every profile must satisfy
    assert summary.kernels[0].name == summary.hottest
    assert all(a.total_ns >= b.total_ns for a, b in zip(summary.kernels, summary.kernels[1:], strict=False))
    assert all(
        k.calls > 0 and k.total_ns > 0 and k.avg_ns == pytest.approx(k.total_ns / k.calls) for k in summary.kernels
    )
    assert summary.target_total_ns == pytest.approx(sum(k.total_ns for k in summary.target_kernels))


def test_there_is_ncu_data_to_test():
    assert len(NCU_FILES) >= 2 and len(ROCPROF_DIRS) >= 3


@pytest.mark.parametrize("path", NCU_FILES, ids=lambda p: p.name)
def test_ncu_file_parses_to_its_expectation(path: Path):
    expect_path = path.with_suffix(".expect.json")
    assert expect_path.is_file(), f"{path.name} has no {expect_path.name}"
    expect = json.loads(expect_path.read_text())
    summary = parse_ncu_csv(path, expect["kernel_regex"])
    assert summary.tool == "ncu"
    _check(summary, expect)


@pytest.mark.parametrize("folder", ROCPROF_DIRS, ids=lambda p: p.name)
def test_rocprofv3_folder_parses_to_its_expectation(folder: Path):
    expect = json.loads((folder / "expect.json").read_text())
    summary = Rocprofv3Profiler().parse(folder, expect["kernel_regex"])
    assert summary.tool == "rocprofv3"
    _check(summary, expect)


def test_ncu_raw_page_values_in_base_units():
    s = parse_ncu_csv(DATA / "ncu_doc_raw_page.csv", "rmsnorm")
    rms = s.kernel("rmsnorm_fwd_kernel")
    ew = s.kernel("vectorized_elementwise_kernel")
    assert rms.min_ns == 12255 and rms.max_ns == 12400
    # time-weighted averages over launches
    assert rms.occupancy_pct == pytest.approx((85.5 * 12345 + 86.5 * 12400 + 84.0 * 12255) / 37000)
    assert rms.dram_bw_Bps == pytest.approx((2.718e12 * 12345 + 2.706e12 * 12400 + 2.738e12 * 12255) / 37000)
    assert rms.dram_bytes == 3 * 33554432
    # "n/a" in one launch: the rate averages over the launch that reports it
    assert ew.dram_bw_Bps == pytest.approx(1.6e12)
    assert ew.dram_bytes == 2 * 8388608
    assert [k.target for k in s.kernels] == [True, False]


def test_ncu_details_page_converts_scaled_units():
    s = parse_ncu_csv(DATA / "ncu_doc_details_page.csv", "flash")
    flash = s.kernel("flash_fwd_kernel")
    assert flash.min_ns == pytest.approx(1500) and flash.max_ns == pytest.approx(1700)
    assert flash.shared_mem_bytes == pytest.approx(98300)  # 98.30 Kbyte/block + 0 byte/block
    assert flash.occupancy_pct == pytest.approx(12.4)  # reported for one launch only
    # 700 Gbyte/second and 0.70 Tbyte/second are the same rate
    assert flash.dram_bw_Bps == pytest.approx(7e11)
    assert flash.dram_bytes is None  # not reported for every launch: no total
    reduce = s.kernel("reduce_kernel")
    assert reduce.avg_ns == 250 and reduce.registers_per_thread == 32  # section labels


def test_empty_regex_makes_every_kernel_a_target_and_anchors_on_the_least_launched():
    s = parse_ncu_csv(DATA / "ncu_doc_raw_page.csv", "")
    assert all(k.target for k in s.kernels)
    assert s.anchor == "vectorized_elementwise_kernel" and s.calls == 2
    assert s.target_per_call_ns == pytest.approx((37000 + 10200) / 2)


def test_rocprofv3_prefers_the_trace_over_the_stats_file(tmp_path: Path):
    src = DATA / "rocprofv3_sdk_trace" / "node1"
    (tmp_path / "kopt_1_kernel_trace.csv").write_text((src / "kopt_5150_kernel_trace.csv").read_text())
    stats = (src / "kopt_5150_kernel_stats.csv").read_text().replace("80000,20000.000000", "99999,24999.750000")
    (tmp_path / "kopt_1_kernel_stats.csv").write_text(stats)
    s = Rocprofv3Profiler().parse(tmp_path, "pa_decode")
    assert s.kernel("pa_decode_kernel").total_ns == 80000
    assert s.files == (str(tmp_path / "kopt_1_kernel_trace.csv"),)


def test_summary_json_round_trip(tmp_path: Path):
    s = Rocprofv3Profiler().parse(DATA / "rocprofv3_sdk_trace", "^pa_")
    again = ProfileSummary.load(s.save(tmp_path / "summary.json"))
    assert again == s
    assert json.loads((tmp_path / "summary.json").read_text())["kernels"][0]["name"] == "pa_decode_kernel"


def test_summary_table_names_target_time_per_call():
    s = parse_ncu_csv(DATA / "ncu_doc_raw_page.csv", "rmsnorm")
    table = s.table()
    assert "rmsnorm_fwd_kernel" in table and "12.333 us per call" in table
    assert table.splitlines()[2].startswith("| rmsnorm_fwd_kernel | yes | 3 |")


def test_ncu_profiler_parse_reads_the_log_file_in_out_dir(tmp_path: Path):
    (tmp_path / "ncu.csv").write_text((DATA / "ncu_doc_raw_page.csv").read_text())
    s = NcuProfiler().parse(tmp_path, "rmsnorm")
    assert s.calls == 3 and s.files == (str(tmp_path / "ncu.csv"),)

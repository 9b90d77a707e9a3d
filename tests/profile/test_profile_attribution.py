"""Attribution of every launch inside a config's NVTX/roctx range, on the sample files of
tests/data (ncu_nvtx_*, rocprofv3_ranges_*; see tests/data/README.md).

Expected figures are recomputed here from the CSV text with the csv module, never taken
from the code under test.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.profile import agrees
from kopt_supervisor.engine.profile.classes import NO_RANGES_NOTE, ConfigRef, compare_per_class
from kopt_supervisor.engine.profile.ncu import NCU_IMPORT, NCU_NVTX, NcuProfiler
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler
from kopt_supervisor.engine.profile.summary import compare

DATA = Path(__file__).resolve().parents[1] / "data"
REFS = [
    ConfigRef(f"dclass={d},n={n}", f"dclass={d}", {"dclass": d, "n": n})
    for d, n in (("narrow", 1024), ("narrow", 2048), ("wide", 4096))
]
NARROW, WIDE = "dclass=narrow", "dclass=wide"


class Bench:
    """A bench class result, as decide.estimate.ClassResult carries it."""

    def __init__(self, cls: str, verdict: str, ratio: float, lo: float, hi: float) -> None:
        self.cls, self.verdict, self.ratio, self.lo, self.hi = cls, verdict, ratio, lo, hi


def ncu(folder: str | Path, regex: str = "_rms"):
    return NcuProfiler().parse(DATA / folder if isinstance(folder, str) else folder, regex)


def rows(path: Path) -> list[dict[str, str]]:
    lines = [x for x in path.read_text().splitlines() if x.startswith('"')]
    out = list(csv.DictReader(lines))
    return [r for r in out if r["ID"]]  # drop the units row


def ns(row: dict[str, str]) -> float:
    return float(row["gpu__time_duration.sum"].replace(",", ""))


def by_range(folder: str) -> dict[str, dict[str, list[float]]]:
    """range (or "" outside) -> kernel -> durations, from the two CSVs' text."""
    plain, named = rows(DATA / folder / NCU_IMPORT), rows(DATA / folder / NCU_NVTX)
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p, r in zip(plain, named, strict=True):
        rng = "" if p["Kernel Name"] == r["Kernel Name"] else r["Kernel Name"]
        out[rng][p["Kernel Name"]].append(ns(p))
    return out


RANGE_SAMPLES = sorted(p.parent for p in DATA.glob("*/expect.json") if "groups" in p.read_text())


def test_there_are_range_samples_of_both_tools():
    tools = {json.loads((d / "expect.json").read_text())["tool"] for d in RANGE_SAMPLES}
    assert tools == {"ncu", "rocprofv3"}


@pytest.mark.parametrize("folder", RANGE_SAMPLES, ids=lambda p: p.name)
def test_range_sample_reads_back_its_launches_per_range(folder: Path):
    """Every sample with `groups` in its expect.json (synthesised ones, and captures made
    with tests/data/capture_ranges.py) parses to exactly those launches per range."""
    expect = json.loads((folder / "expect.json").read_text())
    profiler = NcuProfiler() if expect["tool"] == "ncu" else Rocprofv3Profiler()
    s = profiler.parse(folder, expect.get("kernel_regex", ""))
    assert sorted([g.range, g.note, g.kernel, g.calls] for g in s.ranged) == expect["groups"]


# ---------------------------------------------------------------------------------------
# ncu


def test_every_launch_in_a_range_is_attributed_to_its_config_whatever_its_name():
    s = ncu("ncu_nvtx_best")
    expected = by_range("ncu_nvtx_best")
    assert s.kopt_ranges == tuple(sorted(r for r in expected if r))
    assert s.range_openings is None  # ncu cannot count openings
    got = {(g.range, g.kernel): (g.calls, g.total_ns) for g in s.ranged}
    for rng, kernels in expected.items():
        for kernel, times in kernels.items():
            assert got[(rng, kernel)] == (len(times), pytest.approx(sum(times)))
    cmp = compare_per_class(s, s, REFS)
    narrow = cmp.by_class()[NARROW]
    # warm-up and timed ranges carry the same name: all 7 launches per config count
    assert [(c.config, c.best_calls) for c in narrow.configs] == [
        ("dclass=narrow,n=1024", 7),
        ("dclass=narrow,n=2048", 7),
    ]
    assert narrow.configs[0].best_ns == pytest.approx(sum(expected["kopt:dclass=narrow,n=1024"]["_rms_kernel"]))
    assert narrow.ratio == 1.0 and narrow.lo < 1.0 < narrow.hi


def test_kernels_outside_any_range_are_listed_not_attributed():
    cmp = compare_per_class(ncu("ncu_nvtx_best"), ncu("ncu_nvtx_renamed"), REFS)
    outside = {(g.side, g.kernel): (g.calls, g.why) for g in cmp.unattributed.groups}
    assert outside[("best", "flush_l2_kernel")] == (18, "outside any kopt range")
    assert outside[("cand", "fill_kernel")] == (3, "outside any kopt range")
    expected = sum(sum(t) for t in by_range("ncu_nvtx_best")[""].values())
    assert cmp.unattributed.best_ns == pytest.approx(expected)
    assert not cmp.unattributed.grew


def test_a_renamed_kernel_does_not_change_the_per_class_comparison(tmp_path: Path):
    renamed = ncu("ncu_nvtx_renamed")
    # the same candidate with the kernel's old name (same work, same times)
    back = tmp_path / "back"
    shutil.copytree(DATA / "ncu_nvtx_renamed", back)
    text = (back / NCU_IMPORT).read_text()
    assert "_rms_whole_tiles" in text
    (back / NCU_IMPORT).write_text(text.replace("_rms_whole_tiles", "_rms_kernel"))
    best = ncu("ncu_nvtx_best")
    a, b = compare_per_class(best, renamed, REFS), compare_per_class(best, ncu(back), REFS)
    for cls in (NARROW, WIDE):
        x, y = a.by_class()[cls], b.by_class()[cls]
        assert (x.ratio, x.lo, x.hi, x.best_ns, x.cand_ns) == pytest.approx((y.ratio, y.lo, y.hi, y.best_ns, y.cand_ns))
    wide = a.by_class()[WIDE]
    assert wide.appeared == ("_rms_whole_tiles",) and wide.disappeared == ("_rms_kernel",)
    assert b.by_class()[WIDE].appeared == () and a.by_class()[NARROW].appeared == ()
    # and the class-targeted gain on narrow is confirmed, the renamed wide class is no obstacle
    bench = [Bench(NARROW, "improved", 0.963, 0.95, 0.975), Bench(WIDE, "tied", 1.0, 0.995, 1.005)]
    ag = agrees(bench, a, min_effect_pct=1.0)
    assert {c.cls: c.status for c in ag.classes}[NARROW] == "agrees"
    assert not ag.disagrees


def test_work_moved_out_of_the_ranges_is_listed_and_blocks_the_gain():
    best, moved = ncu("ncu_nvtx_best"), ncu("ncu_nvtx_moved")
    cmp = compare_per_class(best, moved, REFS)
    narrow = cmp.by_class()[NARROW]
    assert narrow.ratio < 0.7  # inside the ranges the candidate looks 40% faster ...
    assert narrow.disappeared == ("_rms_kernel",) and narrow.appeared == ("_rms_apply",)
    # ... but the work went into a kernel launched outside every range
    assert cmp.unattributed.grew
    assert ("cand", "_rms_precompute") in {(g.side, g.kernel) for g in cmp.unattributed.groups}
    assert ("best", "_rms_precompute") not in {(g.side, g.kernel) for g in cmp.unattributed.groups}
    assert any("outside the config ranges grew" in p for p in cmp.problems)
    ag = agrees([Bench(NARROW, "improved", 0.6, 0.58, 0.62), Bench(WIDE, "tied", 1.0, 0.99, 1.01)], cmp)
    narrow_ag = {c.cls: c for c in ag.classes}[NARROW]
    assert narrow_ag.status == "disagrees" and "outside the config ranges" in narrow_ag.reason
    assert ag.disagrees and "dclass=narrow" in ag.reason() and "-40.00%" in ag.reason()


def _edit(folder: Path, name: str, old: str, new: str, count: int = 1) -> None:
    text = (folder / name).read_text()
    assert text.count(old) >= count
    (folder / name).write_text(text.replace(old, new, count))


def test_a_launch_in_a_range_nested_inside_a_kopt_range_is_not_attributed_by_ncu(tmp_path: Path):
    # ncu shows only the innermost range: a launch inside cub's own range within a kopt
    # range cannot be told apart from one outside every kopt range
    nested = tmp_path / "nested"
    shutil.copytree(DATA / "ncu_nvtx_best", nested)
    _edit(nested, NCU_NVTX, '"kopt:dclass=narrow,n=1024"', '"cub::DeviceReduce::Sum"', count=2)
    s = ncu(nested)
    groups = [g for g in s.ranged if g.range == "cub::DeviceReduce::Sum"]
    assert [g.calls for g in groups] == [2] and "not a kopt range" in groups[0].note
    cmp = compare_per_class(ncu("ncu_nvtx_best"), s, REFS)
    config = cmp.by_class()[NARROW].configs[0]
    assert config.config == "dclass=narrow,n=1024" and config.ratio < 0.75  # 5 of 7 launches left
    assert cmp.unattributed.grew  # the two launches count as work outside the ranges


def test_ncu_range_names_with_a_domain_prefix_stop_the_parse(tmp_path: Path):
    folder = tmp_path / "domain"
    shutil.copytree(DATA / "ncu_nvtx_best", folder)
    _edit(folder, NCU_NVTX, '"kopt:dclass=wide', '"kopt_domain@kopt:dclass=wide')
    with pytest.raises(KoptFailure, match=r"kopt range name not at the start .*docs/profiling.md"):
        ncu(folder)


def test_ncu_csvs_of_different_reports_stop_the_parse(tmp_path: Path):
    folder = tmp_path / "other"
    shutil.copytree(DATA / "ncu_nvtx_best", folder)
    lines = (folder / NCU_NVTX).read_text().splitlines()
    (folder / NCU_NVTX).write_text("\n".join(lines[:-1]) + "\n")  # one launch fewer
    with pytest.raises(KoptFailure, match="not the same launches as .*one ncu report"):
        ncu(folder)


def test_without_the_nvtx_csv_the_comparison_falls_back_and_says_why(tmp_path: Path):
    b, c = tmp_path / "b", tmp_path / "c"
    for src, dst in (("ncu_nvtx_best", b), ("ncu_nvtx_renamed", c)):
        dst.mkdir()
        shutil.copy(DATA / src / NCU_IMPORT, dst / NCU_IMPORT)
    sb = ncu(b, "")
    assert sb.ranged == () and sb.ranges_source.startswith("none: ncu_nvtx.csv missing")
    cmp = compare_per_class(sb, ncu(c, ""), REFS)
    assert not cmp.per_class and cmp.note.startswith(NO_RANGES_NOTE)
    assert "after_commands did not run" in cmp.note
    # whole-run kernel time: every kernel (empty regex), fill and flush included
    all_ns = sum(ns(r) for r in rows(DATA / "ncu_nvtx_best" / NCU_IMPORT))
    assert cmp.classes[0].best_ns == pytest.approx(all_ns / 3)  # fill_kernel, 3 launches, anchors


def test_ranges_on_one_side_only_block_every_gain(tmp_path: Path):
    c = tmp_path / "c"
    c.mkdir()
    shutil.copy(DATA / "ncu_nvtx_renamed" / NCU_IMPORT, c / NCU_IMPORT)
    text = (c / NCU_IMPORT).read_text()
    (c / NCU_NVTX).write_text(text)  # the candidate's launches show no range at all
    cmp = compare_per_class(ncu("ncu_nvtx_best"), ncu(c), REFS)
    assert cmp.per_class and any("candidate's profile has no kopt ranges" in p for p in cmp.problems)
    ag = agrees([Bench(NARROW, "improved", 0.96, 0.95, 0.97)], cmp)
    assert ag.classes[0].status == "disagrees" and ag.disagrees


# ---------------------------------------------------------------------------------------
# rocprofv3


def roc(folder: str | Path):
    return Rocprofv3Profiler().parse(DATA / folder if isinstance(folder, str) else folder, "_rms")


def test_rocprofv3_attributes_dispatches_by_launch_call_and_counts_openings():
    s = roc("rocprofv3_ranges_best")
    assert s.ranges_source.startswith("rocprofv3 marker + HIP API traces")
    # warm-up and six timed calls: seven openings of each range name
    assert dict(s.range_openings or ()) == {r: 7 for r in s.kopt_ranges}
    got = {(g.range, g.kernel, g.note): g.calls for g in s.ranged}
    assert got[("kopt:dclass=wide,n=4096", "_rms_kernel", "")] == 7
    # a dispatch whose launch call is not in the HIP API trace is not guessed at
    assert got[("", "fill_kernel", "its launch call is not in the HIP API trace")] == 3
    assert got[("", "flush_l2_kernel", "")] == 18
    kernel_rows = list(csv.DictReader((DATA / "rocprofv3_ranges_best" / "kopt_7001_kernel_trace.csv").open()))
    wide_ns = {g.range: g.total_ns for g in s.ranged if g.kernel == "_rms_kernel"}["kopt:dclass=wide,n=4096"]
    big = [
        int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
        for r in kernel_rows
        if r["Kernel_Name"] == "_rms_kernel" and int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) > 100000
    ]
    assert wide_ns == sum(big) and len(big) == 7
    cmp = compare_per_class(s, s, REFS)
    assert {c.calls_basis for cl in cmp.classes for c in cl.configs} == {"range openings"}


def test_a_kernel_split_in_two_cannot_look_faster():
    cmp = compare_per_class(roc("rocprofv3_ranges_best"), roc("rocprofv3_ranges_split"), REFS)
    narrow = cmp.by_class()[NARROW]
    assert narrow.appeared == ("_pa_first", "_pa_second") and narrow.disappeared == ("_rms_kernel",)
    assert narrow.ratio == pytest.approx(1.05, abs=0.01) and narrow.lo > 1.0  # 0.55 + 0.5 of the work
    # a foreign range nested inside the wide config's kopt range does not hide its kernels
    assert cmp.by_class()[WIDE].configs[0].cand_calls == 7
    ag = agrees([Bench(NARROW, "improved", 0.9, 0.88, 0.92)], cmp)
    assert ag.classes[0].status == "disagrees" and "sees a loss" in ag.classes[0].reason


def test_nested_kopt_ranges_of_two_configs_are_not_attributed(tmp_path: Path):
    folder = tmp_path / "hostile"
    shutil.copytree(DATA / "rocprofv3_ranges_best", folder)
    marker = folder / "kopt_7001_marker_api_trace.csv"
    lines = marker.read_text().splitlines()
    wide = [x for x in lines if '"kopt:dclass=wide,n=4096"' in x]
    f = wide[3].split(",")  # one wide call also claims to be narrow n=1024
    start, end = int(f[-2]), int(f[-1])
    lines.append(f'"MARKER_CORE_API","kopt:dclass=narrow,n=1024",7001,7001,999999,{start + 10},{end - 10}')
    marker.write_text("\n".join(lines) + "\n")
    s = roc(folder)
    bad = [g for g in s.ranged if g.note.startswith("nested kopt ranges")]
    assert [(g.range, g.calls) for g in bad] == [("kopt:dclass=narrow,n=1024", 1)]
    cmp = compare_per_class(roc("rocprofv3_ranges_best"), s, REFS)
    assert cmp.by_class()[WIDE].configs[0].cand_calls == 6
    assert any("opened 7 times in best, 6 in the candidate" in p for p in cmp.by_class()[WIDE].problems)
    assert cmp.unattributed.grew


def test_rocprofv3_needs_the_hip_trace_beside_a_marker_trace(tmp_path: Path):
    folder = tmp_path / "nohip"
    shutil.copytree(DATA / "rocprofv3_ranges_best", folder)
    (folder / "kopt_7001_hip_api_trace.csv").unlink()
    with pytest.raises(KoptFailure, match="roctx ranges but no kopt_7001_hip_api_trace.csv.*--hip-runtime-trace"):
        roc(folder)


def test_rocprofv3_without_any_marker_trace_holds_no_ranges(tmp_path: Path):
    folder = tmp_path / "nomarker"
    shutil.copytree(DATA / "rocprofv3_ranges_best", folder)
    (folder / "kopt_7001_marker_api_trace.csv").unlink()
    s = roc(folder)
    assert s.ranged == () and "no *marker_api_trace.csv" in s.ranges_source
    cmp = compare_per_class(s, s, REFS)
    assert not cmp.per_class and "rocprofv3 ran without --marker-trace" in cmp.note


def test_a_process_without_roctx_calls_launches_outside_the_ranges(tmp_path: Path):
    folder = tmp_path / "two"
    shutil.copytree(DATA / "rocprofv3_ranges_best", folder)
    worker = (DATA / "rocprofv3_ranges_best" / "kopt_7001_kernel_trace.csv").read_text()
    (folder / "kopt_7002_kernel_trace.csv").write_text(worker)  # a worker process, no roctx
    s = roc(folder)
    outside = sum(g.calls for g in s.ranged if g.range == "")
    assert outside == 3 + 18 + 42  # all 42 of the worker's dispatches count as outside every range


def test_a_regex_that_misses_the_new_kernel_cannot_mislead_the_comparison():
    # issue 17: `[profile] kernel = "_rms_kernel"` missed `_rms_whole_tiles`, which the tuned
    # kernel runs; the whole-run rule then saw only part of the work and "agreed" at -78.6%
    best, cand = ncu("ncu_nvtx_best", "_rms_kernel"), ncu("ncu_nvtx_renamed", "_rms_kernel")
    old = compare(best, cand)
    assert old.delta_pct < -30  # the old target-kernel time: a fake 40%+ gain
    cmp = compare_per_class(best, cand, REFS)
    wide = cmp.by_class()[WIDE]
    assert wide.ratio == pytest.approx(1.0, abs=0.01)  # every kernel in the ranges: the truth
    assert {k.name: k.matches_regex for k in wide.kernels} == {"_rms_kernel": True, "_rms_whole_tiles": False}


def test_the_details_page_of_two_processes_joins_by_process_and_id(tmp_path: Path):
    # the same ID in two processes: the join must use (process, ID), never ID alone
    text = (DATA / "ncu_doc_details_page.csv").read_text()
    (tmp_path / NCU_IMPORT).write_text(text)
    (tmp_path / NCU_NVTX).write_text(
        text.replace('"0","1002","python3","node7","flash_fwd_kernel"', '"0","1002","python3","node7","kopt:n=1"')
    )
    s = NcuProfiler().parse(tmp_path, "flash")
    got = sorted((g.range, g.kernel, g.calls) for g in s.ranged)
    assert got == [("", "flash_fwd_kernel", 2), ("", "reduce_kernel", 1), ("kopt:n=1", "flash_fwd_kernel", 1)]


def test_the_h100_capture_attributes_each_launch_to_its_kopt_range():
    """Captured on the H100 (ncu 2025.3, tests/data/ncu_h100_ranges/command.txt): that ncu
    prints `--print-nvtx-rename kernel` names as "<innermost range>/<kernel>". Both kopt
    ranges are read back with their 4 launches each (warm-up + 3 timed); a library's own
    range nested inside a kopt range (CUB's) hides the kopt range from ncu: those launches
    are listed apart with the reason, never counted in a config."""
    s = NcuProfiler().parse(DATA / "ncu_h100_ranges", "")
    assert s.kopt_ranges == ("kopt:n=1024", "kopt:n=4096")
    in_kopt = {(g.range, g.kernel): g.calls for g in s.ranged if g.range.startswith("kopt:")}
    assert in_kopt == {
        ("kopt:n=1024", "vectorized_elementwise_kernel"): 4,
        ("kopt:n=4096", "vectorized_elementwise_kernel"): 4,
    }
    hidden = [g for g in s.ranged if g.range.startswith("cub::")]
    assert hidden and all("not a kopt range" in g.note for g in hidden)

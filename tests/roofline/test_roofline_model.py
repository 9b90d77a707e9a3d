"""Roofline arithmetic, class aggregation, the stop target, the floor check and the Step 0 text."""

from __future__ import annotations

import math

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.profile.roofline import lookup_specs, render_readme_section
from kopt_supervisor.engine.roofline import (
    Spec,
    aggregate_classes,
    analyze_row,
    analyze_rows,
    floor_metric,
    meets_target,
    peaks_from_specs,
    work_of_row,
)

BW = 3.35e12  # H100 SXM page
FL = 989.4e12


def test_memory_bound_row():
    p = analyze_row(flops=1e9, bytes_=3.35e9, seconds=1.25e-3, peak_bw_Bps=BW, peak_flops=FL)
    assert p.bound == "memory"
    assert p.intensity == pytest.approx(1e9 / 3.35e9)
    assert p.ridge == pytest.approx(FL / BW)
    assert p.floor_s == pytest.approx(1e-3)
    assert p.achieved_Bps == pytest.approx(2.68e12)
    assert p.achieved_flops == pytest.approx(8e11)
    assert p.pct_of_peak == pytest.approx(80.0)
    assert not p.suspicious
    assert p.target_seconds(90) == pytest.approx(1e-3 / 0.9)


def test_compute_bound_gemm():
    n = 8192
    flops, bytes_ = 2 * n**3, 3 * n * n * 2
    p = analyze_row(flops, bytes_, 1.5e-3, BW, FL)
    assert p.bound == "compute" and p.intensity > p.ridge
    assert p.floor_s == pytest.approx(flops / FL)
    assert p.pct_of_peak == pytest.approx(100 * flops / FL / 1.5e-3)


def test_faster_than_the_floor_is_suspicious():
    p = analyze_row(1e9, 3.35e9, 0.9e-3, BW, FL)
    assert p.suspicious and p.pct_of_peak == pytest.approx(100 / 0.9)


def test_unknown_peaks_are_never_used():
    only_bw = analyze_row(1e12, 1e6, 1.0, BW, None)
    assert only_bw.bound == "memory" and only_bw.floor_s == pytest.approx(1e6 / BW) and only_bw.ridge is None
    neither = analyze_row(1e12, 1e6, 1e-9, None, None)
    assert neither.bound == "unknown" and neither.floor_s is None
    assert neither.pct_of_peak is None and not neither.suspicious and neither.target_seconds(90) is None


def test_step0_point_has_no_measurement():
    p = analyze_row(0.0, 4e6, None, BW, FL)
    assert p.intensity == 0 and p.bound == "memory"
    assert p.seconds is None and p.pct_of_peak is None and p.achieved_Bps is None


def test_bad_work_is_bad_input():
    with pytest.raises(BadInput, match="flops per call"):
        analyze_row(-1.0, 10.0, 1.0, BW, FL)
    with pytest.raises(BadInput, match="bytes per call"):
        analyze_row(1.0, math.inf, 1.0, BW, FL)


def test_formulas_evaluate_per_row():
    row = {"rows": 4096, "hidden": 8192, "dtype": "bf16"}
    f, b = work_of_row("4 * rows * hidden", "2 * rows * hidden * 2 + hidden * 2", row)
    assert f == 4 * 4096 * 8192 and b == 2 * 4096 * 8192 * 2 + 8192 * 2
    assert work_of_row("", "rows * 2", row) == (0.0, 8192.0)
    with pytest.raises(BadInput, match="'heads'"):
        work_of_row("rows * heads", "", row)
    with pytest.raises(BadInput, match=r"\[roofline\]\.bytes = 'rows / \(hidden - hidden\)' fails for config c1"):
        work_of_row("", "rows / (hidden - hidden)", row, config="c1")


def _points():
    peaks = peaks_from_specs(lookup_specs("NVIDIA H100 80GB HBM3"))
    rows = {
        "rows=1024,hidden=4096": {"rows": 1024, "hidden": 4096},
        "rows=4096,hidden=4096": {"rows": 4096, "hidden": 4096},
        "rows=4096,hidden=8192": {"rows": 4096, "hidden": 8192},
    }
    bytes_of = {k: 4 * r["rows"] * r["hidden"] for k, r in rows.items()}
    # times chosen at 90%, 95% and 50% of the memory roofline
    frac = {
        "rows=1024,hidden=4096": 0.90,
        "rows=4096,hidden=4096": 0.95,
        "rows=4096,hidden=8192": 0.50,
    }
    seconds = {k: bytes_of[k] / peaks.bandwidth_Bps / frac[k] for k in rows}
    points = analyze_rows(rows, seconds, flops_src="3 * rows * hidden", bytes_src="4 * rows * hidden", peaks=peaks)
    return peaks, points


def test_rows_classes_and_the_stop_target():
    peaks, points = _points()
    assert peaks.bandwidth_Bps == pytest.approx(3.35e12) and peaks.flops_per_s == pytest.approx(989.4e12)
    assert [round(p.pct_of_peak, 6) for p in points.values()] == [90.0, 95.0, 50.0]
    class_of = {k: k.split(",")[1] for k in points}
    classes = aggregate_classes(points, class_of)
    assert set(classes) == {"hidden=4096", "hidden=8192"}
    c = classes["hidden=4096"]
    assert c.configs == 2 and c.bound == "memory"
    assert c.pct_geomean == pytest.approx(math.sqrt(90 * 95)) and c.pct_min == pytest.approx(90)
    small = ["rows=1024,hidden=4096", "rows=4096,hidden=4096"]
    assert meets_target(points, small, 90.0)
    assert not meets_target(points, small, 92.0)
    assert not meets_target(points, list(points), 90.0)
    assert not meets_target(points, [], 10.0)
    assert not meets_target(points, ["no-such-config"], 10.0)


def test_classes_with_an_unknown_percentage_claim_nothing():
    known = analyze_row(1e9, 1e9, 1e-3, BW, FL)
    unknown = analyze_row(1e9, 1e9, None, BW, FL)
    compute = analyze_row(1e15, 1e6, 2.0, BW, FL)
    classes = aggregate_classes({"a": known, "b": unknown, "c": compute}, {"a": "x", "b": "x", "c": "x"})
    assert classes["x"].pct_geomean is None and classes["x"].pct_min is None
    assert classes["x"].bound == "mixed"
    assert not meets_target({"a": known, "b": unknown}, ["a", "b"], 1.0)


def test_floor_in_the_metric_unit():
    p = analyze_row(0.0, 3.35e9, None, BW, FL)
    assert floor_metric(p, 1e-6) == pytest.approx(1000.0)  # microseconds
    assert floor_metric(p, 1e-3) == pytest.approx(1.0)  # milliseconds
    assert floor_metric(p, 1e-6, direction="max") is None
    assert floor_metric(analyze_row(1.0, 1.0, None, None, None), 1e-6) is None


def test_analyze_rows_needs_a_formula():
    peaks, _ = _points()
    with pytest.raises(BadInput, match="neither flops nor bytes"):
        analyze_rows({"a": {}}, {}, flops_src="", bytes_src="", peaks=peaks)


def test_readme_section_cites_every_number_and_states_targets():
    peaks, points = _points()
    specs = lookup_specs("NVIDIA H100 80GB HBM3")
    classes = aggregate_classes(points, {k: k.split(",")[1] for k in points})
    text = render_readme_section(
        specs,
        points,
        classes,
        gpu_name="NVIDIA H100 80GB HBM3",
        flops_expr="3 * rows * hidden",
        bytes_expr="4 * rows * hidden",
        production=["rows=4096,hidden=4096", "rows=4096,hidden=8192"],
    )
    assert "- hbm_bandwidth: 3.35 TB/s <- kopt_supervisor/gpu_wiki/h100-sxm.md:" in text
    assert "- bf16_dense_tflops: 989.4 TFLOPS <- kopt_supervisor/gpu_wiki/h100-sxm.md:" in text
    assert "ridge point F / B = 295.3 FLOP/byte" in text
    assert "`4 * rows * hidden`" in text
    assert "achieved bandwidth >= 90% x 3.35 TB/s = 3.015 TB/s" in text
    assert "achieved >= 90% x 989.4 TFLOPS = 890.5 TFLOPS" in text
    assert "every production config (2) reaches 90%" in text
    row = next(line for line in text.splitlines() if line.startswith("| rows=1024,hidden=4096 |"))
    assert "| memory |" in row and "| 90.0 |" in row and "not production" in row
    floor_us = 4 * 1024 * 4096 / 3.35e12 * 1e6
    assert f"| {floor_us:.4g} | {floor_us / 0.9:.4g} |" in row
    assert "| hidden=4096 | 2 | memory | 92.5 | 90.0 |" in text


def test_readme_section_with_unknown_specs_sets_no_target():
    p = analyze_row(1e9, 1e9, 1e-3, None, None)
    text = render_readme_section({}, {"c": p}, {}, gpu_name="NVIDIA H100 PCIe")
    assert "- hbm_bandwidth: UNKNOWN (no source)" in text
    assert "- bf16_dense_tflops: UNKNOWN (no source)" in text
    assert "peak bandwidth B = hbm_bandwidth: UNKNOWN (no source)" in text
    assert "no roofline target" in text and "ridge point" not in text


def test_readme_section_with_one_peak_says_floors_are_lower_bounds():
    specs = {"hbm_bandwidth": Spec("hbm_bandwidth", 2.0, "TB/s", "wiki/x.md:3", "x")}
    text = render_readme_section(specs, {"c": analyze_row(0, 2e9, 1e-3, 2e12, None)}, {})
    assert "bf16_dense_tflops is UNKNOWN: floors use the other peak only" in text
    assert "= 1.8 TB/s" in text

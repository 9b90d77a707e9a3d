"""The roofline of one tree's measurement, as the loop records it (record["roofline"]).

Given the run's [roofline] config, the GPU the gate chose, the config rows and their
measured metric, returns a JSON-able record (specs with their sources, a point per config,
a summary per class), the README's Step 0 text and the floors in the metric's unit (for the
decision's "faster than its floor" check). Reads the spec wiki; no other side effects.

The Step 0 text (`render_readme_section`) for a run's README.md: sourced specs, formulas,
bound, floor, targets. Rendering only; the numbers come from kopt_supervisor.engine.roofline.model.
Every hardware number in the text is printed with its `<- <path>:<line>` source, and an
UNKNOWN peak is said to be unknown rather than replaced.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.roofline.model import (
    DEFAULT_BANDWIDTH_METRIC,
    DEFAULT_FLOPS_METRIC,
    ClassRoofline,
    Peaks,
    RooflinePoint,
    aggregate_classes,
    analyze_rows,
    floor_metric,
    peaks_from_specs,
)
from kopt_supervisor.engine.roofline.specs import Spec, format_value, get_spec, lookup_specs


@dataclass(frozen=True)
class RunRoofline:
    record: dict[str, Any]
    markdown: str
    floors: dict[str, float] = field(default_factory=dict)


def evaluate(
    cfg: Config,
    *,
    gpu_name: str | None,
    gpu_uuid: str | None,
    rows: Mapping[str, Mapping[str, Any]],
    values: Mapping[str, float],
    class_of: Mapping[str, str],
    production: list[str],
    measured_dir: Path | None,
) -> RunRoofline | None:
    """None when [roofline] has no formulas (nothing to analyse)."""
    rc = cfg.roofline
    if not (rc.flops or rc.bytes):
        return None
    name = rc.gpu or gpu_name or ""
    specs = lookup_specs(name, Path(rc.specs) if rc.specs else None, measured_dir, gpu_uuid=gpu_uuid) if name else {}
    peaks = peaks_from_specs(specs, flops_metric=rc.peak_flops_metric, bandwidth_metric=rc.bandwidth_metric)
    latency = cfg.target.direction == "min"
    seconds = {k: v * rc.unit_scale for k, v in values.items() if latency and v and math.isfinite(v)}
    points = analyze_rows(rows, seconds, flops_src=rc.flops, bytes_src=rc.bytes, peaks=peaks)
    classes = aggregate_classes(points, class_of)
    md = render_readme_section(
        specs,
        points,
        classes,
        gpu_name=name or "no GPU (CPU-only run): no spec applies",
        target_pct=cfg.stop.target_pct_of_peak,
        flops_expr=rc.flops,
        bytes_expr=rc.bytes,
        peaks=peaks,
        flops_metric=rc.peak_flops_metric,
        bandwidth_metric=rc.bandwidth_metric,
        unit_scale=rc.unit_scale,
        metric_unit=cfg.target.metric,
        production=production,
    )
    floors = {k: f for k, p in points.items() if (f := floor_metric(p, rc.unit_scale, cfg.target.direction))}
    record = {
        "gpu": name or None,
        "specs": {m: s.line() for m, s in specs.items()},
        "configs": {k: p.to_dict() for k, p in points.items()},
        "classes": {c: r.to_dict() for c, r in classes.items()},
        "production": list(production),
        "target_pct": cfg.stop.target_pct_of_peak,
    }
    return RunRoofline(record, md, floors)


def target_reached(record: Mapping[str, Any] | None) -> bool:
    """Every production config at or above the target % of its roofline."""
    if not record:
        return False
    configs = record.get("configs") or {}
    prod = record.get("production") or list(configs)
    target = float(record.get("target_pct", 90.0))
    if not prod:
        return False
    for k in prod:
        p = configs.get(k)
        if not p or p.get("pct_of_peak") is None or p["pct_of_peak"] < target:
            return False
    return True


def _g(x: float | None, fmt: str = "{:.3g}") -> str:
    return "—" if x is None else fmt.format(x)


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    scale = {"TB/s": 1e12, "TFLOPS": 1e12}[unit]
    return f"{value / scale:.4g} {unit}"


def render_readme_section(
    specs: Mapping[str, Spec],
    points_by_config: Mapping[str, RooflinePoint],
    classes: Mapping[str, ClassRoofline],
    *,
    gpu_name: str = "",
    target_pct: float = 90.0,
    flops_expr: str = "",
    bytes_expr: str = "",
    peaks: Peaks | None = None,
    flops_metric: str = DEFAULT_FLOPS_METRIC,
    bandwidth_metric: str = DEFAULT_BANDWIDTH_METRIC,
    unit_scale: float = 1e-6,
    metric_unit: str = "us",
    production: Iterable[str] | None = None,
) -> str:
    """Markdown: `## Hardware specs`, `## Roofline analysis (Step 0)`, `## Roofline stop target`."""
    specs = dict(specs)
    peaks = peaks or peaks_from_specs(specs, flops_metric=flops_metric, bandwidth_metric=bandwidth_metric)
    prod = set(production) if production is not None else set(points_by_config)
    out: list[str] = ["## Hardware specs", ""]
    if gpu_name:
        out += [f"GPU: {gpu_name}", ""]
    shown = [bandwidth_metric, flops_metric] + sorted(m for m in specs if m not in (bandwidth_metric, flops_metric))
    out += [f"- {get_spec(specs, m).line()}" for m in shown]
    out += [
        "",
        "A value written `UNKNOWN (no source)` has no source in the spec wiki and is never used.",
        "",
        "## Roofline analysis (Step 0)",
        "",
        f"- FLOPs per call: `{flops_expr or '0 (no [roofline].flops)'}`",
        f"- bytes per call: `{bytes_expr or '0 (no [roofline].bytes)'}` (inputs read once, outputs written once)",
        f"- peak bandwidth B = {_peak(peaks.bandwidth_spec)}",
        f"- peak compute F = {_peak(peaks.flops_spec)}",
    ]
    if peaks.ridge is not None:
        out.append(f"- ridge point F / B = {peaks.ridge:.1f} FLOP/byte")
    out += [
        "- intensity = FLOPs / bytes; memory-bound below the ridge, compute-bound at or above it",
        f"- floor = max(bytes / B, FLOPs / F); target = floor / {target_pct / 100:g} "
        f"(the time at {target_pct:g}% of the roofline)",
        "",
        f"| config | FLOPs | bytes | FLOP/byte | bound | floor {metric_unit} | target {metric_unit} "
        f"| measured {metric_unit} | % of peak | |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for config, p in points_by_config.items():
        floor = None if p.floor_s is None else p.floor_s / unit_scale
        target = p.target_seconds(target_pct)
        measured = None if p.seconds is None else p.seconds / unit_scale
        flags = []
        if config not in prod:
            flags.append("not production")
        if p.suspicious:
            flags.append("**faster than its floor: suspicious**")
        out.append(
            f"| {config} | {_g(p.flops)} | {_g(p.bytes)} | {_g(p.intensity)} | {p.bound} "
            f"| {_g(floor, '{:.4g}')} | {_g(None if target is None else target / unit_scale, '{:.4g}')} "
            f"| {_g(measured, '{:.4g}')} | {_g(p.pct_of_peak, '{:.1f}')} | {', '.join(flags)} |"
        )
    if classes:
        out += [
            "",
            "| class | configs | bound | % of peak (geomean) | lowest % |",
            "|---|---:|---|---:|---:|",
        ]
        for c in classes.values():
            out.append(
                f"| {c.cls} | {c.configs} | {c.bound} | {_g(c.pct_geomean, '{:.1f}')} | {_g(c.pct_min, '{:.1f}')} |"
            )
    out += ["", "## Roofline stop target", ""]
    targets = []
    if peaks.bandwidth_Bps:
        targets.append(
            f"memory-bound configs: achieved bandwidth >= {target_pct:g}% x {_rate(peaks.bandwidth_Bps, 'TB/s')} "
            f"= {_rate(peaks.bandwidth_Bps * target_pct / 100, 'TB/s')}"
        )
    if peaks.flops_per_s:
        targets.append(
            f"compute-bound configs: achieved >= {target_pct:g}% x {_rate(peaks.flops_per_s, 'TFLOPS')} "
            f"= {_rate(peaks.flops_per_s * target_pct / 100, 'TFLOPS')}"
        )
    if targets:
        out += [f"- {t}" for t in targets]
        out.append(
            f"- the run stops when every production config ({len(prod)}) reaches {target_pct:g}% of its "
            "roofline ([stop].target_pct_of_peak); a config faster than its floor is flagged as suspicious "
            "and goes to review"
        )
    else:
        out.append(
            "- no roofline target: neither peak has a source, so no target can be set "
            "(add the values to the spec wiki, or run `kopt ceilings`)"
        )
    if not (peaks.bandwidth_Bps and peaks.flops_per_s) and targets:
        missing = bandwidth_metric if not peaks.bandwidth_Bps else flops_metric
        out.append(f"- {missing} is UNKNOWN: floors use the other peak only and are lower bounds")
    return "\n".join(out) + "\n"


def _peak(spec: Spec) -> str:
    if not spec.known:
        return spec.line()
    return f"{format_value(spec.value)} {spec.unit} ({spec.metric} <- {spec.source})"

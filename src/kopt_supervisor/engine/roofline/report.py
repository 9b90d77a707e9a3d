"""The Step 0 text for a run's README.md: sourced specs, formulas, bound, floor, targets.

Rendering only; the numbers come from kopt_supervisor.engine.roofline.model. Every hardware number in the
text is printed with its `<- <path>:<line>` source, and an UNKNOWN peak is said to be
unknown rather than replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kopt_supervisor.engine.roofline.model import (
    DEFAULT_BANDWIDTH_METRIC,
    DEFAULT_FLOPS_METRIC,
    ClassRoofline,
    Peaks,
    RooflinePoint,
    peaks_from_specs,
)
from kopt_supervisor.engine.roofline.specs import Spec, format_value, get_spec


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

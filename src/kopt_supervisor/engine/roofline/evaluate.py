"""The roofline of one tree's measurement, as the loop records it (record["roofline"]).

Given the run's [roofline] config, the GPU the gate chose, the config rows and their
measured metric, returns a JSON-able record (specs with their sources, a point per config,
a summary per class), the README's Step 0 text and the floors in the metric's unit (for the
decision's "faster than its floor" check). Reads the spec wiki; no other side effects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.roofline.model import (
    aggregate_classes,
    analyze_rows,
    floor_metric,
    peaks_from_specs,
)
from kopt_supervisor.engine.roofline.report import render_readme_section
from kopt_supervisor.engine.roofline.specs import lookup_specs


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

"""The roofline explanation of results.md (pure): engine.roofline applied to the baseline's
and the final tree's median latency per config.

For each config with a row in the baseline record, the [roofline] formulas give FLOPs and
bytes per call; with the sourced peaks of the GPU the run used they give the bound
(memory or compute), the floor, and for each tree the achieved bandwidth, FLOP/s and % of
peak. Only a latency metric (direction "min") has seconds per call ([roofline].unit_scale
seconds per unit). Missing pieces are said, never filled in: no formulas, a throughput
metric, or a GPU with no sourced peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.roofline.model import (
    ClassRoofline,
    Peaks,
    RooflinePoint,
    aggregate_classes,
    analyze_rows,
    peaks_from_specs,
)
from kopt_supervisor.engine.roofline.specs import Spec


@dataclass(frozen=True)
class RooflineView:
    available: bool
    why_not: str = ""
    peaks: Peaks | None = None
    gpu_name: str = ""
    baseline: dict[str, RooflinePoint] = field(default_factory=dict)
    final: dict[str, RooflinePoint] = field(default_factory=dict)
    baseline_classes: dict[str, ClassRoofline] = field(default_factory=dict)
    final_classes: dict[str, ClassRoofline] = field(default_factory=dict)


def build(
    cfg: Config,
    rows: Mapping[str, Mapping[str, object]],
    class_of: Mapping[str, str],
    baseline_median: Mapping[str, float | None],
    final_median: Mapping[str, float | None],
    specs: Mapping[str, Spec],
    gpu_name: str,
) -> RooflineView:
    r = cfg.roofline
    if not (r.flops or r.bytes):
        return RooflineView(False, "no [roofline].flops / [roofline].bytes formulas in kopt.toml")
    if cfg.target.direction != "min":
        return RooflineView(
            False,
            f'the metric `{cfg.target.metric}` is a throughput (direction = "max"): '
            "no time per call to put on a roofline",
        )
    if not rows:
        return RooflineView(False, "the baseline record has no config rows")
    peaks = peaks_from_specs(dict(specs), flops_metric=r.peak_flops_metric, bandwidth_metric=r.bandwidth_metric)

    def seconds(medians: Mapping[str, float | None]) -> dict[str, float | None]:
        return {k: (None if v is None else v * r.unit_scale) for k, v in medians.items()}

    try:
        base = analyze_rows(rows, seconds(baseline_median), flops_src=r.flops, bytes_src=r.bytes, peaks=peaks)
        final = analyze_rows(rows, seconds(final_median), flops_src=r.flops, bytes_src=r.bytes, peaks=peaks)
    except BadInput as e:
        return RooflineView(False, str(e))
    return RooflineView(
        True, "", peaks, gpu_name, base, final, aggregate_classes(base, class_of), aggregate_classes(final, class_of)
    )

"""Roofline: hardware specs with cited sources, FLOP/byte formulas -> % of peak (DESIGN.md §4, §6).

specs = lookup_specs(gpu_name, wiki_dir, measured_dir)        # Spec per metric, with source
peaks = peaks_from_specs(specs, flops_metric=cfg.peak_flops_metric)
points = analyze_rows(rows, seconds, flops_src=cfg.flops, bytes_src=cfg.bytes, peaks=peaks)
classes = aggregate_classes(points, class_of)
text = render_readme_section(specs, points, classes, target_pct=cfg_stop.target_pct_of_peak)
meets_target(points, production_configs, target_pct)           # the roofline stop
floor_metric(point, cfg.unit_scale)                             # decide's "faster than floor"
register_measured(ceilings_json, measured_dir)                  # `kopt ceilings`
"""

from kopt_supervisor.engine.roofline.model import (
    DEFAULT_BANDWIDTH_METRIC,
    DEFAULT_FLOPS_METRIC,
    ClassRoofline,
    Peaks,
    RooflinePoint,
    aggregate_classes,
    analyze_row,
    analyze_rows,
    floor_metric,
    meets_target,
    peaks_from_specs,
    work_of_row,
)
from kopt_supervisor.engine.roofline.report import render_readme_section
from kopt_supervisor.engine.roofline.specs import (
    UNKNOWN,
    Page,
    Spec,
    find_page,
    get_spec,
    load_pages,
    lookup_specs,
    matched_page_name,
    parse_page,
    register_measured,
    shipped_wiki_dir,
)

__all__ = [
    "DEFAULT_BANDWIDTH_METRIC",
    "DEFAULT_FLOPS_METRIC",
    "UNKNOWN",
    "ClassRoofline",
    "Page",
    "Peaks",
    "RooflinePoint",
    "Spec",
    "aggregate_classes",
    "analyze_row",
    "analyze_rows",
    "find_page",
    "floor_metric",
    "get_spec",
    "load_pages",
    "lookup_specs",
    "matched_page_name",
    "meets_target",
    "parse_page",
    "peaks_from_specs",
    "register_measured",
    "render_readme_section",
    "shipped_wiki_dir",
    "work_of_row",
]

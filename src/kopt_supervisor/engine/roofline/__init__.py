"""Roofline: hardware specs with cited sources, FLOP/byte formulas -> % of peak (docs/design.md §4, §6).

The package imports nothing itself (its math is pure, its wiki reader is not): import the
module you need.

specs = specs.lookup_specs(gpu_name, wiki_dir, measured_dir)        # Spec per metric, with source
peaks = model.peaks_from_specs(specs, flops_metric=cfg.peak_flops_metric)
points = model.analyze_rows(rows, seconds, flops_src=cfg.flops, bytes_src=cfg.bytes, peaks=peaks)
classes = model.aggregate_classes(points, class_of)
text = evaluate.render_readme_section(specs, points, classes, target_pct=cfg_stop.target_pct_of_peak)
model.meets_target(points, production_configs, target_pct)           # the roofline stop
model.floor_metric(point, cfg.unit_scale)                             # decide's "faster than floor"
specs.register_measured(ceilings_json, measured_dir)                  # `kopt ceilings`
"""

"""results.md's "Roofline" (pure: the gathered run in, markdown lines out): the peaks and
formulas used, per config and per class the bound, the floor and % of peak of the baseline and
the final tree (computed by engine/report/roofline_view.py), the bound or blocker against the
stop target, and what the loop recorded for the final tree, whatever shape that record has."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.report.collect import ReportInputs, RunData
from kopt_supervisor.engine.report.markdown import table


def section(inp: ReportInputs) -> list[str]:
    rv = inp.roofline
    r = inp.cfg.roofline
    lines = ["## Roofline", ""]
    if not rv.available:
        lines += [f"Not measured: {rv.why_not}.", ""]
    else:
        p = rv.peaks
        assert p is not None
        unit = inp.cfg.target.metric
        lines += [
            f"- GPU: {rv.gpu_name or 'unknown'}",
            f"- FLOPs per call: `{r.flops or '0'}`; bytes per call: `{r.bytes or '0'}` "
            "(inputs read once, outputs written once)",
            f"- peak bandwidth: {p.bandwidth_spec.line()}",
            f"- peak compute: {p.flops_spec.line()}",
            "- floor = max(bytes / peak bandwidth, FLOPs / peak compute); % of peak = floor / measured time",
            "",
        ]
        rows = []
        for key, fp in rv.final.items():
            bp = rv.baseline.get(key)
            floor = None if fp.floor_s is None else fp.floor_s / r.unit_scale
            rows.append(
                [
                    key,
                    fmt.num(fp.flops),
                    fmt.num(fp.bytes),
                    fmt.num(fp.intensity),
                    fp.bound,
                    fmt.num(floor),
                    fmt.rate(bp.achieved_Bps if bp else None, "B/s"),
                    fmt.rate(fp.achieved_Bps, "B/s"),
                    fmt.rate(fp.achieved_flops, "FLOP/s"),
                    fmt.share(bp.pct_of_peak if bp else None),
                    fmt.share(fp.pct_of_peak),
                    "**faster than its floor: suspicious**" if fp.suspicious else "",
                ]
            )
        lines += table(
            [
                "config",
                "FLOPs",
                "bytes",
                "FLOP/byte",
                "bound",
                f"floor {unit}",
                "baseline bandwidth",
                "final bandwidth",
                "final FLOP/s",
                "baseline % of peak",
                "final % of peak",
                "note",
            ],
            rows,
        )
        lines += [""]
        if rv.final_classes:
            crow = []
            for cls, c in rv.final_classes.items():
                b = rv.baseline_classes.get(cls)
                crow.append(
                    [
                        cls,
                        c.bound,
                        fmt.share(b.pct_geomean if b else None),
                        fmt.share(c.pct_geomean),
                        fmt.share(c.pct_min),
                        _blocker(c.bound, c.pct_geomean, inp.cfg.stop.target_pct_of_peak),
                    ]
                )
            lines += table(
                ["class", "bound", "baseline % of peak", "final % of peak", "lowest final %", "bound or blocker"], crow
            )
            lines += [""]
    recorded = _recorded_roofline(inp.data)
    if recorded:
        lines += recorded
    if inp.data.meta.get("roofline_md"):
        lines += ["The Step 0 analysis written at the baseline is in the workspace's README.md.", ""]
    return lines


def _blocker(bound: str, pct: float | None, target: float) -> str:
    if bound in ("unknown", "mixed") or pct is None:
        return (
            "no sourced peak for this GPU: the bound cannot be named"
            if bound == "unknown"
            else "configs of this class have different bounds"
        )
    side = "memory bandwidth" if bound == "memory" else "compute throughput"
    if pct >= target:
        return f"{side}: at {fmt.share(pct)} of its roofline, the stop target ({fmt.share(target)}) is reached"
    return f"{side}: at {fmt.share(pct)} of its roofline, below the {fmt.share(target)} stop target"


def _recorded_roofline(d: RunData) -> list[str]:
    """What the loop recorded for the final tree, from that keep's own samples."""
    rec = d.best.record.get("roofline")
    if not isinstance(rec, Mapping) or not rec:
        return []
    where = f"the loop's roofline record of v{d.best.version} (from that iteration's own samples)"
    if rec.get("error"):
        return [f"- {where}: the analysis failed: {rec['error']}", ""]
    classes = rec.get("classes")
    if isinstance(classes, Mapping) and all(isinstance(c, Mapping) for c in classes.values()):
        parts = [f"`{cls}` {fmt.share(c.get('pct_geomean'))} ({c.get('bound', '—')})" for cls, c in classes.items()]
        return [f"- In {where}: % of peak per class: {', '.join(parts) or '—'}", ""]
    return [f"Recorded in {where}:", "", *generic_tables(rec), ""]


def generic_tables(obj: Any, title: str = "") -> list[str]:
    """A dict of records as markdown tables, whatever keys the records hold."""
    if not isinstance(obj, Mapping):
        return [f"- {title}: {fmt.value(obj)}"] if title else [fmt.value(obj)]
    scalars = {k: v for k, v in obj.items() if not isinstance(v, Mapping | list)}
    records = {k: v for k, v in obj.items() if isinstance(v, Mapping)}
    lines: list[str] = []
    if title:
        lines += [f"*{title}*", ""]
    if scalars:
        lines += table(["key", "value"], [[k, fmt.value(v)] for k, v in scalars.items()]) + [""]
    flat = {k: v for k, v in records.items() if all(not isinstance(x, Mapping | list) for x in v.values())}
    if flat:
        cols: list[str] = []
        for v in flat.values():
            cols += [c for c in v if c not in cols]
        lines += table(["", *cols], [[k, *(fmt.value(v.get(c)) for c in cols)] for k, v in flat.items()]) + [""]
    for k, v in records.items():
        if k not in flat:
            lines += generic_tables(v, str(k))
    return lines

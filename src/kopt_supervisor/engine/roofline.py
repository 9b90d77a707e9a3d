"""Roofline arithmetic: FLOPs and bytes per call -> intensity, bound, floor, % of peak.

For one config row with `flops` useful FLOPs and `bytes` (the fewest bytes: inputs read
once, outputs written once) per call, and peaks `B` (bytes/s) and `F` (FLOP/s):

    intensity  = flops / bytes                       FLOP/byte
    ridge      = F / B                               FLOP/byte
    bound      = "compute" if intensity >= ridge else "memory"
    floor_s    = max(bytes / B, flops / F)           the fastest the call can be
    pct        = floor_s / seconds * 100             % of the roofline reached

A measured time below floor_s is physically impossible for a correct kernel with these
formulas and is flagged `suspicious`. A peak that is UNKNOWN contributes no term: with
one peak known the bound is that side; with neither, bound is "unknown" and there is no
floor, no % and no target (an unsourced value never enters a target).

The arithmetic reads hardware spec values with their sources (`Spec`): a value with no source
is `UNKNOWN (no source)` and never enters a target. Reading the wiki (finding and parsing
pages) is engine/profile/roofline.py's.

Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kopt_supervisor.engine import BadInput, expr
from kopt_supervisor.engine.decide import geomean, positive_finite

UNKNOWN = "UNKNOWN (no source)"

_TO_SI = {
    "TB/s": 1e12,
    "GB/s": 1e9,
    "MB/s": 1e6,
    "B/s": 1.0,
    "PFLOPS": 1e15,
    "TFLOPS": 1e12,
    "GFLOPS": 1e9,
    "FLOP/s": 1.0,
}


@dataclass(frozen=True)
class Spec:
    metric: str
    value: float | None
    unit: str = ""
    source: str = ""
    """`<path>:<line>` of the value in its wiki page; empty when unknown."""
    citation: str = ""
    """What the page cites for it (the document, table or section; or the measurement)."""

    @property
    def known(self) -> bool:
        return self.value is not None and bool(self.source)

    def line(self) -> str:
        if not self.known:
            return f"{self.metric}: {UNKNOWN}"
        return f"{self.metric}: {format_value(self.value)} {self.unit} <- {self.source}"

    def si(self) -> float | None:
        """The value in bytes/s or FLOP/s (for bandwidth and rate units), else None."""
        if not self.known or self.unit not in _TO_SI:
            return None
        assert self.value is not None  # known
        return float(self.value) * _TO_SI[self.unit]


def format_value(value: float | None) -> str:
    if value is None:
        return "UNKNOWN"
    return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"


def unknown(metric: str) -> Spec:
    return Spec(metric, None)


def get_spec(specs: dict[str, Spec], metric: str) -> Spec:
    """The spec for `metric`, or the UNKNOWN one."""
    return specs.get(metric) or unknown(metric)


DEFAULT_FLOPS_METRIC = "bf16_dense_tflops"
DEFAULT_BANDWIDTH_METRIC = "hbm_bandwidth"


@dataclass(frozen=True)
class Peaks:
    bandwidth_Bps: float | None
    flops_per_s: float | None
    bandwidth_spec: Spec
    flops_spec: Spec

    @property
    def ridge(self) -> float | None:
        if self.bandwidth_Bps and self.flops_per_s:
            return self.flops_per_s / self.bandwidth_Bps
        return None


def peaks_from_specs(
    specs: Mapping[str, Spec],
    *,
    flops_metric: str = DEFAULT_FLOPS_METRIC,
    bandwidth_metric: str = DEFAULT_BANDWIDTH_METRIC,
) -> Peaks:
    bw = get_spec(dict(specs), bandwidth_metric)
    fl = get_spec(dict(specs), flops_metric)
    return Peaks(bw.si(), fl.si(), bw, fl)


@dataclass(frozen=True)
class RooflinePoint:
    flops: float
    bytes: float
    intensity: float | None
    ridge: float | None
    bound: str
    """"memory", "compute" or "unknown" (no peak known)."""
    floor_s: float | None
    seconds: float | None
    achieved_Bps: float | None
    achieved_flops: float | None
    pct_of_peak: float | None
    suspicious: bool
    """The measured time is below the floor."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def target_seconds(self, target_pct: float) -> float | None:
        """The time at which this config reaches `target_pct` % of its roofline."""
        return None if self.floor_s is None else self.floor_s / (target_pct / 100.0)


def analyze_row(
    flops: float,
    bytes_: float,
    seconds: float | None,
    peak_bw_Bps: float | None,
    peak_flops: float | None,
) -> RooflinePoint:
    """The roofline point of one config; `seconds` None for Step 0 (before any timing)."""
    for name, v in (("flops", flops), ("bytes", bytes_)):
        if not math.isfinite(v) or v < 0:
            raise BadInput(f"roofline: {name} per call must be a finite number >= 0, not {v!r}")
    if seconds is not None and (not math.isfinite(seconds) or seconds <= 0):
        seconds = None
    intensity = flops / bytes_ if bytes_ > 0 else None
    t_mem = bytes_ / peak_bw_Bps if peak_bw_Bps else None
    t_comp = flops / peak_flops if peak_flops else None
    known = [t for t in (t_mem, t_comp) if t is not None]
    floor = max(known) if known and max(known) > 0 else None
    ridge = peak_flops / peak_bw_Bps if peak_bw_Bps and peak_flops else None
    if floor is None:
        bound = "unknown"
    elif t_mem is not None and t_comp is not None:
        bound = "compute" if t_comp >= t_mem else "memory"
    elif t_mem is not None:
        bound = "memory"
    else:
        bound = "compute"
    return RooflinePoint(
        flops=float(flops),
        bytes=float(bytes_),
        intensity=intensity,
        ridge=ridge,
        bound=bound,
        floor_s=floor,
        seconds=seconds,
        achieved_Bps=bytes_ / seconds if seconds else None,
        achieved_flops=flops / seconds if seconds else None,
        pct_of_peak=100.0 * floor / seconds if floor and seconds else None,
        suspicious=bool(floor and seconds and seconds < floor),
    )


def work_of_row(flops_src: str, bytes_src: str, row: Mapping[str, Any], *, config: str = "") -> tuple[float, float]:
    """FLOPs and bytes per call of one config row from the [roofline] formulas."""
    out = []
    for key, src in (("flops", flops_src), ("bytes", bytes_src)):
        if not src:
            out.append(0.0)
            continue
        try:
            value = float(expr.parse(src, where=f"[roofline].{key}").eval(row))
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise BadInput(f"[roofline].{key} = {src!r} fails for config {config or dict(row)}: {exc}") from None
        out.append(value)
    return out[0], out[1]


def analyze_rows(
    rows: Mapping[str, Mapping[str, Any]],
    seconds: Mapping[str, float | None],
    *,
    flops_src: str,
    bytes_src: str,
    peaks: Peaks,
) -> dict[str, RooflinePoint]:
    """One point per config: `rows` maps config key -> its CSV row, `seconds` its time per call."""
    if not flops_src and not bytes_src:
        raise BadInput("[roofline]: neither flops nor bytes is set; no roofline can be drawn")
    points = {}
    for config, row in rows.items():
        f, b = work_of_row(flops_src, bytes_src, row, config=config)
        points[config] = analyze_row(f, b, seconds.get(config), peaks.bandwidth_Bps, peaks.flops_per_s)
    return points


@dataclass(frozen=True)
class ClassRoofline:
    cls: str
    configs: int
    bound: str
    """The common bound of the class's configs, or "mixed"."""
    pct_geomean: float | None
    """Geometric mean of the configs' % of peak; None unless every config has one."""
    pct_min: float | None
    suspicious: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def aggregate_classes(points: Mapping[str, RooflinePoint], class_of: Mapping[str, str]) -> dict[str, ClassRoofline]:
    """Per config class (class_of: config -> class key): bound, % of peak, suspicious count."""
    groups: dict[str, list[RooflinePoint]] = {}
    for config, point in points.items():
        groups.setdefault(class_of.get(config, config), []).append(point)
    out = {}
    for cls, pts in sorted(groups.items()):
        bounds = {p.bound for p in pts}
        pcts = [p.pct_of_peak for p in pts]
        complete = all(v is not None and v > 0 for v in pcts)
        out[cls] = ClassRoofline(
            cls=cls,
            configs=len(pts),
            bound=bounds.pop() if len(bounds) == 1 else "mixed",
            pct_geomean=geomean(positive_finite(pcts)) if complete else None,
            pct_min=min(pcts) if complete else None,  # type: ignore[type-var]
            suspicious=sum(p.suspicious for p in pts),
        )
    return out


def meets_target(points: Mapping[str, RooflinePoint], production_configs: Iterable[str], target_pct: float) -> bool:
    """True when every production config is at or above `target_pct` % of its roofline.

    False when there is no production config, or any lacks a point or a % (UNKNOWN peaks)."""
    configs = list(production_configs)
    if not configs:
        return False
    for config in configs:
        point = points.get(config)
        if point is None or point.pct_of_peak is None or point.pct_of_peak < target_pct:
            return False
    return True


def floor_metric(point: RooflinePoint, unit_scale: float, direction: str = "min") -> float | None:
    """The floor in the bench metric's unit (for decide's "faster than its floor" check).

    Only latency metrics (direction "min", `unit_scale` seconds per unit) have a floor in
    their own unit; a throughput metric returns None."""
    if direction != "min" or point.floor_s is None or unit_scale <= 0:
        return None
    return point.floor_s / unit_scale

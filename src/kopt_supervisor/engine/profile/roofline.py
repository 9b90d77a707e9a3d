"""Where the roofline meets the machine, beside what the profiler says of the same kernels:
hardware specs read from a spec wiki with their sources (and `kopt ceilings` measurements
written as pages), and one tree's roofline as the loop records it. The arithmetic is
engine/roofline.py's (pure, `roofline` below); this module reads files.

    specs = lookup_specs(gpu_name, wiki_dir, measured_dir)           # Spec per metric, with source
    peaks = roofline.peaks_from_specs(specs, flops_metric=cfg.peak_flops_metric)
    points = roofline.analyze_rows(rows, seconds, flops_src=cfg.flops, bytes_src=cfg.bytes, peaks=peaks)
    classes = roofline.aggregate_classes(points, class_of)
    text = render_readme_section(specs, points, classes, target_pct=cfg_stop.target_pct_of_peak)
    roofline.meets_target(points, production_configs, target_pct)      # the roofline stop
    roofline.floor_metric(point, cfg.unit_scale)                        # decide's "faster than floor"
    register_measured(ceilings_json, measured_dir)                   # `kopt ceilings`

Specs. A wiki is a folder of markdown pages, one per GPU. A page starts with metadata
lines and holds its values under a `## Specs` heading, one value per line:

    name: NVIDIA H100 SXM5 80GB
    vendor: nvidia
    matches: H100 80GB HBM3; H100 SXM
    excludes: NVL; PCIe

    ## Specs

    - hbm_bandwidth: 3.35 TB/s — source: <document title>, <table/section>, <column>

Every bullet under `## Specs` must parse (a typo never silently drops a value). A value
is looked up as `Spec(metric, value, unit, source)` whose `line()` is
`<metric>: <value> <unit> <- <path>:<line>`; a metric no page gives is
`<metric>: UNKNOWN (no source)` and has no value, so it can never enter a target.

The GPU is matched by the name the driver reports ("NVIDIA H100 80GB HBM3"): a page
matches when one of its `matches` phrases occurs in the name (case and punctuation
ignored) and none of its `excludes` does; the longest matching phrase wins. A page can
also be named directly by its file stem ([roofline].gpu = "h100-sxm").

`kopt ceilings` measurements are pages of the same format in a measured folder; their
values take precedence, and the wiki value they replace stays visible as
`<metric> (datasheet)`.

The run's roofline (`evaluate`, record["roofline"]). Given the run's [roofline] config,
the GPU the gate chose, the config rows and their measured metric, returns a JSON-able record
(specs with their sources, a point per config, a summary per class), the README's Step 0 text
and the floors in the metric's unit (for the decision's "faster than its floor" check).
Reads the spec wiki; no other side effects. The Step 0 text (`render_readme_section`) for a
run's README.md: sourced specs, formulas, bound, floor, targets; rendering only, the numbers
come from engine/roofline.py. Every hardware number in the text is printed with its `<- <path>:<line>` source, and an
UNKNOWN peak is said to be unknown rather than replaced.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.roofline import (
    DEFAULT_BANDWIDTH_METRIC,
    DEFAULT_FLOPS_METRIC,
    ClassRoofline,
    Peaks,
    RooflinePoint,
    Spec,
    aggregate_classes,
    analyze_rows,
    floor_metric,
    format_value,
    get_spec,
    peaks_from_specs,
)

_SPEC_LINE = re.compile(
    r"^- (?P<metric>[a-z][a-z0-9_]*): (?P<value>[0-9][0-9,]*(?:\.[0-9]+)?) (?P<unit>\S+)"
    r" (?:—|--) source: (?P<citation>.+)$"
)
_META_LINE = re.compile(r"^(?P<key>name|vendor|matches|excludes|uuid|measured_at): (?P<value>.*)$")

# ---------------------------------------------------------------------------------------
# Pages


@dataclass(frozen=True)
class Page:
    path: Path
    display: str
    """How the page is named in a source: repo-relative for the shipped wiki."""
    name: str
    vendor: str
    matches: tuple[str, ...]
    excludes: tuple[str, ...]
    meta: dict[str, str]
    specs: dict[str, Spec]


def _normalize(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def parse_page(path: Path, display: str | None = None) -> Page:
    """Read one wiki page; BadInput names the file and line of a malformed value."""
    display = display or str(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    meta: dict[str, str] = {}
    specs: dict[str, Spec] = {}
    in_specs = False
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if line.startswith("## "):
            in_specs = line[3:].strip().lower() == "specs"
            continue
        if not in_specs:
            m = _META_LINE.match(line)
            if m and m["key"] not in meta:
                meta[m["key"]] = m["value"].strip()
            continue
        if not line.startswith("- "):
            continue
        m = _SPEC_LINE.match(line)
        if not m:
            raise BadInput(
                f"{display}:{number}: not a spec line "
                "(expected '- <metric>: <value> <unit> — source: <document, section>')"
            )
        if m["metric"] in specs:
            raise BadInput(f"{display}:{number}: {m['metric']} is given twice")
        specs[m["metric"]] = Spec(
            metric=m["metric"],
            value=float(m["value"].replace(",", "")),
            unit=m["unit"],
            source=f"{display}:{number}",
            citation=m["citation"].strip(),
        )
    return Page(
        path=path,
        display=display,
        name=meta.get("name", path.stem),
        vendor=meta.get("vendor", ""),
        matches=tuple(p.strip() for p in meta.get("matches", "").split(";") if p.strip()),
        excludes=tuple(p.strip() for p in meta.get("excludes", "").split(";") if p.strip()),
        meta=meta,
        specs=specs,
    )


def load_pages(folder: Path, display_root: str | None = None) -> list[Page]:
    """Every page of a wiki folder (README.md is the index, not a page)."""
    if not folder.is_dir():
        raise BadInput(f"{folder}: spec wiki folder not found")
    pages = []
    for path in sorted(folder.glob("*.md")):
        if path.name.lower() == "readme.md":
            continue
        display = f"{display_root}/{path.name}" if display_root else str(path)
        pages.append(parse_page(path, display))
    return pages


def match_score(page: Page, gpu_name: str) -> int:
    """Length of the longest `matches` phrase found in `gpu_name`; 0 when it does not match."""
    name = f" {_normalize(gpu_name)} "
    if any(f" {_normalize(x)} " in name for x in page.excludes):
        return 0
    hits = [len(_normalize(p)) for p in page.matches if f" {_normalize(p)} " in name]
    return max(hits, default=0)


def find_page(pages: list[Page], gpu_name: str) -> Page | None:
    """The page for this GPU: by file stem first, else the best `matches` phrase."""
    wanted = gpu_name.strip().lower()
    for page in pages:
        if page.path.stem.lower() == wanted:
            return page
    scored = [(match_score(p, gpu_name), p) for p in pages]
    best = max(scored, key=lambda sp: sp[0], default=(0, None))
    return best[1] if best[0] > 0 else None


SHIPPED_WIKI = "kopt_supervisor/gpu_wiki"
"""Where sources of the shipped wiki point: the package's data folder, under src/ in a checkout
and under site-packages in an install."""


def shipped_wiki_dir() -> Path:
    """The wiki shipped with kopt: $KOPT_GPU_WIKI, else the package's data folder gpu_wiki."""
    env = os.environ.get("KOPT_GPU_WIKI")
    if env:
        return Path(env)
    wiki = resources.files("kopt_supervisor") / "gpu_wiki"
    if not isinstance(wiki, Path):
        raise BadInput(
            f"{wiki}: the shipped spec wiki is not a folder on disk (kopt imported from an "
            "archive?): set KOPT_GPU_WIKI or [roofline].specs to a wiki folder"
        )
    return wiki


def lookup_specs(
    gpu_name: str,
    wiki_dir: Path | None = None,
    measured_dir: Path | None = None,
    *,
    gpu_uuid: str | None = None,
) -> dict[str, Spec]:
    """Every sourced value for this GPU: the wiki page's, then measured ones on top.

    `wiki_dir` None means the shipped wiki (sources read `kopt_supervisor/gpu_wiki/<page>:<line>`).
    Measured pages are matched by GPU name; one with `gpu_uuid` wins over the others,
    then the newest. No matching page: an empty dict (every lookup is UNKNOWN).
    """
    if wiki_dir is None:
        packaged = not os.environ.get("KOPT_GPU_WIKI")
        pages = load_pages(shipped_wiki_dir(), display_root=SHIPPED_WIKI if packaged else None)
    else:
        pages = load_pages(Path(wiki_dir))
    page = find_page(pages, gpu_name)
    specs: dict[str, Spec] = dict(page.specs) if page else {}
    measured = _measured_page(measured_dir, gpu_name, gpu_uuid) if measured_dir else None
    if measured:
        for metric, spec in measured.specs.items():
            if metric in specs:
                old = specs[metric]
                specs[f"{metric} (datasheet)"] = Spec(
                    f"{metric} (datasheet)", old.value, old.unit, old.source, old.citation
                )
            specs[metric] = spec
    return specs


def matched_page_name(gpu_name: str, wiki_dir: Path | None = None) -> str | None:
    """The name of the wiki page `lookup_specs` would use, for the README."""
    folder = shipped_wiki_dir() if wiki_dir is None else Path(wiki_dir)
    page = find_page(load_pages(folder), gpu_name)
    return page.name if page else None


def _measured_page(folder: Path, gpu_name: str, gpu_uuid: str | None) -> Page | None:
    folder = Path(folder)
    if not folder.is_dir():
        return None
    pages = [p for p in load_pages(folder) if match_score(p, gpu_name) > 0]
    if not pages:
        return None

    def rank(p: Page) -> tuple[bool, str]:
        return (bool(gpu_uuid) and p.meta.get("uuid") == gpu_uuid, p.meta.get("measured_at", ""))

    return max(pages, key=rank)


# ---------------------------------------------------------------------------------------
# Measured ceilings


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def register_measured(result: dict[str, Any], measured_dir: Path) -> Path:
    """Write `kernels/ceilings.py --json` output as a wiki page of measured sources.

    The page is named by GPU name and UUID, so measuring the same GPU again replaces it.
    Sources read: measured by `kopt ceilings` (<command>) on <date>, GPU <uuid>.
    """

    def need(key: str) -> Any:
        if result.get(key) in (None, ""):
            raise BadInput(f"ceilings result: missing {key!r}")
        return result[key]

    gpu_name, command, date = need("gpu_name"), need("command"), need("date")
    uuid = result.get("gpu_uuid") or "unknown-uuid"
    origin = f"measured by `kopt ceilings` (`{command}`) on {date}, GPU {uuid}"
    lines = []
    copy = result.get("copy") or {}
    if copy.get("bandwidth_Bps"):
        lines.append(
            f"- hbm_bandwidth: {copy['bandwidth_Bps'] / 1e12:.4g} TB/s — source: {origin}: "
            f"device-to-device copy of {copy.get('buffer_bytes', 0) / 2**20:.0f} MiB, bytes read + written, "
            f"median of {copy.get('iters', '?')}"
        )
    mm = result.get("matmul") or {}
    if mm.get("flops_per_s"):
        lines.append(
            f"- bf16_dense_tflops: {mm['flops_per_s'] / 1e12:.5g} TFLOPS — source: {origin}: "
            f"{mm.get('dtype', 'bf16')} matmul {mm.get('m')}x{mm.get('n')}x{mm.get('k')} (2*m*n*k FLOPs), "
            f"median of {mm.get('iters', '?')}"
        )
    if not lines:
        raise BadInput("ceilings result: neither copy.bandwidth_Bps nor matmul.flops_per_s")
    measured_dir = Path(measured_dir)
    measured_dir.mkdir(parents=True, exist_ok=True)
    path = measured_dir / f"measured-{_slug(gpu_name)}-{_slug(uuid)[:40]}.md"
    text = "\n".join(
        [
            f"# Measured ceilings: {gpu_name}",
            "",
            f"name: {gpu_name} (measured)",
            f"vendor: {result.get('vendor', '')}",
            f"matches: {gpu_name}",
            f"uuid: {uuid}",
            f"measured_at: {date}",
            f"written_at: {datetime.now(UTC).isoformat(timespec='seconds')}",
            "",
            "## Specs",
            "",
            *lines,
            "",
        ]
    )
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------
# A run's roofline


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

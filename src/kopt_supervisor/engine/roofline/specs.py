"""Hardware specs with sources: read a spec wiki, match the GPU, write measured ceilings.

A wiki is a folder of markdown pages, one per GPU. A page starts with metadata lines and
holds its values under a `## Specs` heading, one value per line:

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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.roofline.model import (
    UNKNOWN,
    Spec,
    format_value,
    get_spec,
    unknown,
)

__all__ = ["UNKNOWN", "Spec", "format_value", "get_spec", "unknown"]  # the records live in model

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

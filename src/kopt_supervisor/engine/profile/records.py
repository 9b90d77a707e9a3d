"""A profile's records, tool-independent: one kernel launch, one kernel's stats, the launches
of one kernel inside one range, and a profiled run's summary, with their JSON form and the
summary's markdown table. The arithmetic that fills them (`summarize`) and the whole-run
comparison live in engine/profile/model.py. Pure: no subprocesses (`ProfileSummary.save`
and `load` read and write the one path they are given).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.dataclass_io import known_fields
from kopt_supervisor.engine.errors import BadInput

KOPT_PREFIX = "kopt:"
"""Every range kopt attributes to a config is named `kopt:` + `col=value,col=value`."""


@dataclass(frozen=True)
class Launch:
    """One kernel launch as a profiler reported it, in base units; None where not reported."""

    kernel: str
    duration_ns: float
    registers_per_thread: int | None = None
    """NVIDIA: registers per thread. AMD: architected VGPRs."""
    accum_vgprs: int | None = None
    sgprs: int | None = None
    shared_mem_bytes: float | None = None
    """Per block: static + dynamic shared memory (NVIDIA) or the LDS allocation (AMD)."""
    scratch_bytes: float | None = None
    occupancy_pct: float | None = None
    """Achieved occupancy: active warps as % of the SM's maximum (ncu)."""
    dram_bytes: float | None = None
    dram_bw_Bps: float | None = None
    dram_pct: float | None = None
    """DRAM throughput as % of its peak over the launch's elapsed time (ncu)."""
    block: str | None = None
    grid: str | None = None
    range: str | None = None
    """The NVTX/roctx push/pop range the launch was made in, as far as the tool shows it:
    the innermost kopt range (`kopt:...`), or the innermost other range, or "" outside any
    range. None: the profile holds no range information at all."""
    range_note: str = ""
    """Why the range cannot stand for a config whatever its name (e.g. "the innermost range
    is not a kopt range"); "" when it can."""
    range_instance: str | None = None
    """Identifies one opening of the range (rocprofv3: process, thread and start time), so
    that openings can be counted; None when the tool cannot tell them apart (ncu)."""


@dataclass(frozen=True)
class KernelStat:
    """All launches of one kernel name: GPU time and its launch resources."""

    name: str
    calls: int
    total_ns: float
    avg_ns: float
    min_ns: float | None = None
    max_ns: float | None = None
    m2_ns2: float | None = None
    """Sum of squared deviations of the launches' times from their mean (ns²): the spread
    behind the profiler's noise; None for tools that report aggregates only."""
    target: bool = False
    """True when the name matches the target regex."""
    registers_per_thread: int | None = None
    accum_vgprs: int | None = None
    sgprs: int | None = None
    shared_mem_bytes: float | None = None
    scratch_bytes: float | None = None
    occupancy_pct: float | None = None
    dram_bytes: float | None = None
    """Total over all launches."""
    dram_bw_Bps: float | None = None
    dram_pct: float | None = None
    block: str | None = None
    grid: str | None = None
    """Launch shapes, when every launch had the same one (else 'varies')."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelStat:
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class RangeKernelStat:
    """The launches of one kernel made inside one range name (or outside any range)."""

    range: str
    """A range name as `Launch.range` holds it; "" outside any range."""
    kernel: str
    calls: int
    total_ns: float
    m2_ns2: float
    """Sum of squared deviations of the launches' times from their mean (ns²)."""
    min_ns: float
    max_ns: float
    note: str = ""
    """`Launch.range_note` of these launches."""

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.calls

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RangeKernelStat:
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class ProfileSummary:
    """Per-kernel GPU time of one profiled run and the target kernels' time per call."""

    tool: str
    kernel_regex: str
    kernels: tuple[KernelStat, ...]
    """Every kernel seen, hottest (largest total time) first."""
    calls: int
    anchor: str
    target_total_ns: float
    target_per_call_ns: float
    hottest: str
    launches: int
    files: tuple[str, ...] = field(default=())
    ranged: tuple[RangeKernelStat, ...] = field(default=())
    """The launches grouped by (range, note, kernel); empty when the tool reported no ranges."""
    range_openings: tuple[tuple[str, int], ...] | None = None
    """How many times each range name was opened (rocprofv3); None when the tool cannot
    count openings (ncu shows only which range a launch was made in)."""
    ranges_source: str = ""
    """How the ranges were read (which tool output, which rule); "" when the profile holds
    no range information, with the reason after "none: " when one is known."""
    passes: str = ""
    """How the profile was taken when it took more than one plain run (ncu's two passes, or
    its fallback to one whole-run pass); "" for a single pass."""

    @property
    def target_kernels(self) -> tuple[KernelStat, ...]:
        return tuple(k for k in self.kernels if k.target)

    @property
    def kopt_ranges(self) -> tuple[str, ...]:
        """The distinct kopt range names launches were made in."""
        return tuple(sorted({g.range for g in self.ranged if g.range.startswith(KOPT_PREFIX)}))

    def kernel(self, name: str) -> KernelStat | None:
        return next((k for k in self.kernels if k.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "kernel_regex": self.kernel_regex,
            "calls": self.calls,
            "anchor": self.anchor,
            "target_total_ns": self.target_total_ns,
            "target_per_call_ns": self.target_per_call_ns,
            "hottest": self.hottest,
            "launches": self.launches,
            "files": list(self.files),
            "kernels": [k.to_dict() for k in self.kernels],
            "ranged": [g.to_dict() for g in self.ranged],
            "range_openings": None if self.range_openings is None else dict(self.range_openings),
            "ranges_source": self.ranges_source,
            "passes": self.passes,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileSummary:
        try:
            return cls(
                tool=str(data["tool"]),
                kernel_regex=str(data["kernel_regex"]),
                kernels=tuple(KernelStat.from_dict(k) for k in data["kernels"]),
                calls=int(data["calls"]),
                anchor=str(data["anchor"]),
                target_total_ns=float(data["target_total_ns"]),
                target_per_call_ns=float(data["target_per_call_ns"]),
                hottest=str(data["hottest"]),
                launches=int(data["launches"]),
                files=tuple(data.get("files", ())),
                ranged=tuple(RangeKernelStat.from_dict(g) for g in data.get("ranged", ())),
                range_openings=(
                    None
                    if data.get("range_openings") is None
                    else tuple(sorted((str(k), int(v)) for k, v in data["range_openings"].items()))
                ),
                ranges_source=str(data.get("ranges_source", "")),
                passes=str(data.get("passes", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput(f"profile summary: missing or bad field ({exc})") from None

    def save(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Path) -> ProfileSummary:
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise BadInput(f"{path}: cannot read profile summary: {exc}") from None

    def table(self, limit: int = 10) -> str:
        """A short markdown table of the hottest kernels (for the prompt and the TUI)."""
        total = sum(k.total_ns for k in self.kernels) or 1.0
        rows = [
            "| kernel | target | calls | avg us | total us | share | regs | smem/LDS B | occ % | DRAM GB/s |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for k in self.kernels[:limit]:
            rows.append(
                f"| {short_name(k.name)} | {'yes' if k.target else ''} | {k.calls} | {k.avg_ns / 1e3:.3f} "
                f"| {k.total_ns / 1e3:.1f} | {100 * k.total_ns / total:.1f}% | {_opt(k.registers_per_thread)} "
                f"| {_opt(k.shared_mem_bytes, '{:.0f}')} | {_opt(k.occupancy_pct, '{:.1f}')} "
                f"| {_opt(None if k.dram_bw_Bps is None else k.dram_bw_Bps / 1e9, '{:.1f}')} |"
            )
        if len(self.kernels) > limit:
            rows.append(f"| ... {len(self.kernels) - limit} more | | | | | | | | | |")
        rows.append("")
        if self.passes:
            rows.append(f"Profile: {self.passes}.")
        if not self.calls:
            rows.append(
                f"No kernel matches `{self.kernel_regex}` (it only marks kernels: the ranges decide "
                f"what is compared); hottest: `{short_name(self.hottest)}`."
            )
            return "\n".join(rows)
        rows.append(
            f"Target kernels (`{self.kernel_regex or '.*'}`): {self.target_total_ns / 1e3:.1f} us over "
            f"{self.calls} calls (anchor `{short_name(self.anchor)}`) = "
            f"**{self.target_per_call_ns / 1e3:.3f} us per call**; hottest: `{short_name(self.hottest)}`."
        )
        return "\n".join(rows)


def short_name(name: str, width: int = 60) -> str:
    """A kernel name cut to `width` characters for tables and messages."""
    return name if len(name) <= width else name[: width - 3] + "..."


def _opt(value: Any, fmt: str = "{}") -> str:
    return "" if value is None else fmt.format(value)

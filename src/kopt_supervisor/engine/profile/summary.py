"""A profile, tool-independent: its records (one kernel launch, one kernel's stats, the
launches of one kernel inside one range, a profiled run's summary, with their JSON form and
the summary's markdown table), the arithmetic that fills them (`summarize`: launches ->
per-kernel stats -> a summary), and two summaries -> the whole-run comparison (`compare`),
which the per-class comparison (engine/profile/classes.py) falls back to when the bench
emits no NVTX/roctx ranges. Pure: no subprocesses (`ProfileSummary.save` and `load` read
and write the one path they are given).

Target kernels' time per call (the whole-run number):

    target_total_ns    = sum of GPU time over every launch whose kernel name matches the
                         [profile].kernel regex (re.search; all kernels when it is empty)
    calls              = launches of the *anchor*: the matching kernel launched fewest times
                         (every call of the operation launches each of its kernels at least
                         once, so a helper kernel added to the call cannot inflate the count)
    target_per_call_ns = target_total_ns / calls

Splitting one kernel into two that each run once per call leaves `calls` unchanged and
adds both kernels' time, so it cannot look faster. A candidate that launches the same
kernel more often per call changes `calls` itself; `compare` then also compares total
target time (under KOPT_PROFILE=1 the protected bench runs the same calls for both trees)
and keeps the less favourable of the two ratios.

NVTX/roctx ranges: a launch may carry the name of the range it was launched in
(`Launch.range`). `summarize` keeps, beside the per-kernel table, the launches grouped by
(range, kernel) with their spread (`ProfileSummary.ranged`); engine/profile/classes.py
attributes those groups to configs and classes and compares best and candidate per class.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, KoptFailure
from kopt_supervisor.engine.records import known_fields

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
    l2_bytes: float | None = None
    """Bytes through L2, reads and writes, hits or not (ncu `lts__t_bytes.sum`)."""
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
    """Sum of squared deviations of the launches' times from their mean (ns²); in a kopt range
    from FIRST_APART launches on, that of the launches after the first, scaled to calls - 1
    degrees of freedom."""
    min_ns: float
    max_ns: float
    note: str = ""
    """`Launch.range_note` of these launches."""
    l2_bytes: float | None = None
    """Their bytes through L2 (`Launch.l2_bytes`), None unless every launch has it."""

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
    asked: tuple[tuple[str, int], ...] | None = None
    """Per config key, the calls kopt asked the bench to make in its range (a JSON object in
    KOPT_PROFILE_CALLS, which kopt's harness runs exactly): the calls a config's time is divided
    by, never the tree's own launches (floors.config_calls). None: the bench's own numbers."""

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
            "asked": None if self.asked is None else dict(self.asked),
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
                asked=(
                    None
                    if data.get("asked") is None
                    else tuple(sorted((str(k), int(v)) for k, v in data["asked"].items()))
                ),
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


# ---------------------------------------------------------------------------------------
# Summarizing and the whole-run comparison


def compile_regex(kernel_regex: str) -> re.Pattern[str]:
    try:
        return re.compile(kernel_regex or "")
    except re.error as exc:
        raise BadInput(f"[profile].kernel: {kernel_regex!r} is not a valid regex: {exc}") from None


def summarize(
    launches: list[Launch],
    kernel_regex: str,
    *,
    tool: str,
    files: tuple[str, ...] = (),
    ranges_source: str = "",
) -> ProfileSummary:
    """Group launches by kernel name; the target kernels are those matching the regex.

    When the launches carry ranges (`Launch.range` is not None), they are also grouped by
    (range, note, kernel) into `ranged`, and the openings of each range counted when the
    tool tells them apart."""
    if not launches:
        raise KoptFailure(f"{', '.join(files) or tool}: the profile holds no kernel launches")
    by_name: dict[str, list[Launch]] = defaultdict(list)
    for launch in launches:
        by_name[launch.kernel].append(launch)
    stats = [_kernel_stat(name, ls) for name, ls in by_name.items()]
    ranged_launches = any(x.range and x.range.startswith(KOPT_PREFIX) for x in launches)
    summary = summary_from_stats(
        stats, kernel_regex, tool=tool, files=files, launches=len(launches), display_only=ranged_launches
    )
    with_range = [x for x in launches if x.range is not None]
    if not with_range:
        return replace(summary, ranges_source=ranges_source if ranges_source.startswith("none") else "")
    if len(with_range) != len(launches):
        raise KoptFailure(f"{', '.join(files) or tool}: range information for some launches only")
    groups: dict[tuple[str, str, str], list[Launch]] = defaultdict(list)
    openings: dict[str, set[str]] = defaultdict(set)
    attributable = [x for x in launches if x.range and not x.range_note]
    counted = all(x.range_instance is not None for x in attributable)
    for x in launches:
        groups[(x.range or "", x.range_note, x.kernel)].append(x)
    for x in attributable:
        if x.range_instance is not None:
            openings[x.range or ""].add(x.range_instance)
    ranged = tuple(_range_stat(rng, note, kernel, group) for (rng, note, kernel), group in sorted(groups.items()))
    return replace(
        summary,
        ranged=ranged,
        range_openings=tuple(sorted((r, len(ids)) for r, ids in openings.items())) if counted else None,
        ranges_source=ranges_source,
    )


def _m2(times: list[float]) -> float:
    mean = sum(times) / len(times)
    return sum((t - mean) ** 2 for t in times)


FIRST_APART = 4
"""A kernel launched at least this many times in one range: its spread (`RangeKernelStat.m2_ns2`)
is read from the launches after its first. The first call of a config runs into an L2 that no
call of it prepared (each later call's output is written into the block the call before it
freed, still in L2): on the H200 the RMSNorm demo's sd35-medium config took 16.2 us on its first
call and 14.2 on each of the next eleven, in both runs of the same tree (2026-11-30,
experiments/profile_noise.py). Both trees' first calls pay it, so the totals compare; taken for
noise, it widened that class's A/A interval at 4 calls to +-6.3% (+-3.2% from the later launches)."""


def _range_m2(rng: str, times: list[float]) -> float:
    """The spread of one kernel's launches in one range, as the sum of squared deviations over
    n - 1 degrees of freedom: in a config's (kopt) range, from the launches after the first past
    FIRST_APART; elsewhere (outside every range: launches of many sizes) from all of them."""
    if len(times) < FIRST_APART or not rng.startswith(KOPT_PREFIX):
        return _m2(times)
    rest = times[1:]
    return _m2(rest) * (len(times) - 1) / (len(rest) - 1)


def _range_stat(rng: str, note: str, kernel: str, launches: list[Launch]) -> RangeKernelStat:
    times = [x.duration_ns for x in launches]
    return RangeKernelStat(
        rng,
        kernel,
        len(times),
        sum(times),
        _range_m2(rng, times),
        min(times),
        max(times),
        note,
        _sum_if_all(x.l2_bytes for x in launches),
    )


def summary_from_stats(
    stats: list[KernelStat],
    kernel_regex: str,
    *,
    tool: str,
    files: tuple[str, ...] = (),
    launches: int | None = None,
    display_only: bool = False,
) -> ProfileSummary:
    """The summary of per-kernel stats (for tools that report aggregates, not launches).

    display_only: the regex only marks kernels (the profile has kopt ranges, which decide
    what is compared), so matching no kernel is no error: the target fields are then 0."""
    where = ", ".join(files) or tool
    if not stats:
        raise KoptFailure(f"{where}: the profile holds no kernels")
    pattern = compile_regex(kernel_regex)
    stats = [replace(k, target=bool(pattern.search(k.name))) for k in stats]
    stats.sort(key=lambda k: (-k.total_ns, k.name))
    targets = [k for k in stats if k.target]
    if not targets and display_only:
        return ProfileSummary(
            tool=tool,
            kernel_regex=kernel_regex,
            kernels=tuple(stats),
            calls=0,
            anchor="",
            target_total_ns=0.0,
            target_per_call_ns=0.0,
            hottest=stats[0].name,
            launches=sum(k.calls for k in stats) if launches is None else launches,
            files=files,
        )
    if not targets:
        seen = ", ".join(short_name(k.name, 40) for k in stats[:5])
        raise KoptFailure(f"{where}: no kernel matches [profile].kernel {kernel_regex!r} (seen: {seen})")
    anchor = min(targets, key=lambda k: (k.calls, -k.total_ns))
    target_total = sum(k.total_ns for k in targets)
    return ProfileSummary(
        tool=tool,
        kernel_regex=kernel_regex,
        kernels=tuple(stats),
        calls=anchor.calls,
        anchor=anchor.name,
        target_total_ns=target_total,
        target_per_call_ns=target_total / anchor.calls,
        hottest=stats[0].name,
        launches=sum(k.calls for k in stats) if launches is None else launches,
        files=files,
    )


def _kernel_stat(name: str, launches: list[Launch]) -> KernelStat:
    durations = [x.duration_ns for x in launches]
    total = sum(durations)
    return KernelStat(
        name=name,
        calls=len(launches),
        total_ns=total,
        avg_ns=total / len(launches),
        min_ns=min(durations),
        max_ns=max(durations),
        m2_ns2=_m2(durations),
        registers_per_thread=_max_int(x.registers_per_thread for x in launches),
        accum_vgprs=_max_int(x.accum_vgprs for x in launches),
        sgprs=_max_int(x.sgprs for x in launches),
        shared_mem_bytes=_max(x.shared_mem_bytes for x in launches),
        scratch_bytes=_max(x.scratch_bytes for x in launches),
        occupancy_pct=_time_weighted(launches, "occupancy_pct"),
        dram_bytes=_sum_if_all(x.dram_bytes for x in launches),
        dram_bw_Bps=_time_weighted(launches, "dram_bw_Bps"),
        dram_pct=_time_weighted(launches, "dram_pct"),
        block=_same(x.block for x in launches),
        grid=_same(x.grid for x in launches),
    )


def _max(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _max_int(values: Any) -> int | None:
    m = _max(values)
    return None if m is None else int(m)


def _sum_if_all(values: Any) -> float | None:
    vals = list(values)
    return None if not vals or any(v is None for v in vals) else float(sum(vals))


def _time_weighted(launches: list[Launch], attr: str) -> float | None:
    pairs = [(getattr(x, attr), x.duration_ns) for x in launches if getattr(x, attr) is not None]
    weight = sum(d for _, d in pairs)
    if not pairs or weight <= 0:
        return None
    return sum(v * d for v, d in pairs) / weight


def _same(values: Any) -> str | None:
    vals = {v for v in values if v is not None}
    if not vals:
        return None
    return vals.pop() if len(vals) == 1 else "varies"


# ---------------------------------------------------------------------------------------
# Comparing best and candidate

AGREEMENT_KINDS = ("keep", "accepted", "regression", "likely_regression", "tie", "split")


@dataclass(frozen=True)
class KernelChange:
    name: str
    best_avg_ns: float | None
    cand_avg_ns: float | None
    best_calls: int
    cand_calls: int


@dataclass(frozen=True)
class ProfileComparison:
    """Target kernels' GPU time, best vs candidate; ratio below 1 means the candidate is faster."""

    best_per_call_ns: float
    cand_per_call_ns: float
    per_call_ratio: float
    best_total_ns: float
    cand_total_ns: float
    total_ratio: float
    best_calls: int
    cand_calls: int
    ratio: float
    """The ratio the decision uses: per call when both runs have the same call count, else
    the larger (less favourable to the candidate) of the per-call and total ratios."""
    basis: str
    kernels: tuple[KernelChange, ...] = ()

    @property
    def delta_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    def summary_line(self) -> str:
        return (
            f"target kernels {self.best_per_call_ns / 1e3:.3f} -> {self.cand_per_call_ns / 1e3:.3f} us "
            f"per call ({self.delta_pct:+.2f}%, {self.basis})"
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["delta_pct"] = self.delta_pct
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileComparison:
        kw = known_fields(cls, data)
        kw["kernels"] = tuple(KernelChange(**k) for k in data.get("kernels", ()))
        return cls(**kw)


def compare(best: ProfileSummary, cand: ProfileSummary) -> ProfileComparison:
    if best.target_per_call_ns <= 0 or best.target_total_ns <= 0:
        raise KoptFailure("best profile: target kernels have no GPU time")
    per_call = cand.target_per_call_ns / best.target_per_call_ns
    total = cand.target_total_ns / best.target_total_ns
    if best.calls == cand.calls:
        ratio, basis = per_call, f"{best.calls} calls each"
    else:
        ratio = max(per_call, total)
        basis = (
            f"call counts differ ({best.calls} vs {cand.calls}): the less favourable of "
            f"per-call {per_call:.4f} and total {total:.4f}"
        )
    names = sorted({k.name for k in best.target_kernels} | {k.name for k in cand.target_kernels})
    changes = []
    for name in names:
        b, c = best.kernel(name), cand.kernel(name)
        changes.append(
            KernelChange(
                name,
                b.avg_ns if b else None,
                c.avg_ns if c else None,
                b.calls if b else 0,
                c.calls if c else 0,
            )
        )
    return ProfileComparison(
        best_per_call_ns=best.target_per_call_ns,
        cand_per_call_ns=cand.target_per_call_ns,
        per_call_ratio=per_call,
        best_total_ns=best.target_total_ns,
        cand_total_ns=cand.target_total_ns,
        total_ratio=total,
        best_calls=best.calls,
        cand_calls=cand.calls,
        ratio=ratio,
        basis=basis,
        kernels=tuple(changes),
    )

"""What a profile says, tool-independent: launches -> per-kernel stats -> a summary; two
summaries -> the whole-run comparison (`compare`), which the per-class comparison
(engine/profile/classes.py) falls back to when the bench emits no NVTX/roctx ranges. The
records themselves (`Launch`, `KernelStat`, `ProfileSummary`...) live in
engine/profile/records.py and are re-exported here.

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
and keeps the less favourable of the two ratios. Pure: no files, no subprocesses.

NVTX/roctx ranges: a launch may carry the name of the range it was launched in
(`Launch.range`). `summarize` keeps, beside the per-kernel table, the launches grouped by
(range, kernel) with their spread (`ProfileSummary.ranged`); engine/profile/classes.py
attributes those groups to configs and classes and compares best and candidate per class.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Any

from kopt_supervisor.engine.dataclass_io import known_fields
from kopt_supervisor.engine.errors import BadInput, KoptFailure
from kopt_supervisor.engine.profile.records import (
    KOPT_PREFIX,
    KernelStat,
    Launch,
    ProfileSummary,
    RangeKernelStat,
    short_name,
)

__all__ = [
    "KOPT_PREFIX",
    "KernelChange",
    "KernelStat",
    "Launch",
    "ProfileComparison",
    "ProfileSummary",
    "RangeKernelStat",
    "compare",
    "compile_regex",
    "summarize",
    "summary_from_stats",
]


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
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    openings: dict[str, set[str]] = defaultdict(set)
    attributable = [x for x in launches if x.range and not x.range_note]
    counted = all(x.range_instance is not None for x in attributable)
    for x in launches:
        groups[(x.range or "", x.range_note, x.kernel)].append(x.duration_ns)
    for x in attributable:
        if x.range_instance is not None:
            openings[x.range or ""].add(x.range_instance)
    ranged = tuple(_range_stat(rng, note, kernel, times) for (rng, note, kernel), times in sorted(groups.items()))
    return replace(
        summary,
        ranged=ranged,
        range_openings=tuple(sorted((r, len(ids)) for r, ids in openings.items())) if counted else None,
        ranges_source=ranges_source,
    )


def _m2(times: list[float]) -> float:
    mean = sum(times) / len(times)
    return sum((t - mean) ** 2 for t in times)


def _range_stat(rng: str, note: str, kernel: str, times: list[float]) -> RangeKernelStat:
    return RangeKernelStat(rng, kernel, len(times), sum(times), _m2(times), min(times), max(times), note)


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

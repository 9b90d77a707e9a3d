"""The bytes floor of a keep's profile: what each config's range moved through L2 against what a
call must move ([roofline].bytes: its inputs read once, its outputs written once).

The profiled process can switch the profiler off from inside (cudaProfilerStop or the driver's
cuProfilerStop): ncu, profiling from the start as kopt runs it, then leaves the kernels launched
until the next Start out of its report (measured on the H200, 2026-12-01,
experiments/ncu_profiler_api_probe.py). A candidate could so run its real work unseen and leave a
cheap kernel in its range: its outputs right, its profile as fast as its bench claims. What it
cannot hide is physics: whatever computes a config's outputs inside the range moves the call's
bytes through L2 there (`lts__t_bytes.sum`, reads and writes, hits included), so a range whose
kernels moved fewer than L2_FLOOR x the call's bytes did not do the work ncu timed. Honest
kernels measured on the H200 (the RMSNorm demo's naive tree, experiments/range_bytes_probe.py)
moved 1.51-1.54x the bytes of their 50-1460 MB configs and 1.9-60x those of the small ones.

Pure: the summary, the configs and their bytes in; the configs short of bytes out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.profile.classes import ConfigRef, RangeMatcher
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, ProfileSummary, RangeKernelStat

L2_FLOOR = 0.9
"""The share of a call's bytes its range must move through L2 (rounding in the [roofline].bytes
formula's favour: every byte it counts is read or written at least once)."""


@dataclass(frozen=True)
class BytesShort:
    """A config whose range moved fewer bytes through L2 per call than the call must move."""

    config: str
    cls: str
    per_call: float
    need: float

    def line(self) -> str:
        return f"{self.config} moved {fmt.size(self.per_call)} through L2 a call, under the {fmt.size(self.need)} it reads and writes"


def bytes_short(
    best: ProfileSummary,
    cand: ProfileSummary,
    refs: Sequence[ConfigRef],
    need: Mapping[str, float],
    floor: float = L2_FLOOR,
) -> list[BytesShort] | None:
    """The configs of `refs` (with bytes in `need`, by config key) whose range in `cand` moved
    fewer than `floor` x their bytes through L2 per call; None when `cand` holds no L2 bytes
    for its ranges (not measured: the check cannot be made). A call is counted from `best`'s
    profile of the same calls (its ranges' openings, else its least-launched kernel in the
    range, as the per-class comparison counts them), never from the candidate's launches: one
    extra launch on one call would otherwise divide its bytes by fewer calls. A launch in a
    range without L2 bytes counts as none moved."""
    matcher = RangeMatcher(refs)
    moved = _moved(cand, matcher)
    if moved is None:
        return None
    calls = _calls(best, matcher)
    short = []
    for ref in refs:
        want = need.get(ref.key, 0.0)
        if not math.isfinite(want) or want <= 0 or ref.key not in moved or not calls.get(ref.key):
            continue
        per_call = moved[ref.key] / calls[ref.key]
        if per_call < floor * want:
            short.append(BytesShort(ref.key, ref.cls, per_call, want))
    return short


def _attributed(summary: ProfileSummary, matcher: RangeMatcher) -> list[tuple[str, RangeKernelStat]]:
    """(config key, launches) of each kernel group made inside a config's kopt range."""
    out = []
    for g in summary.ranged:
        if g.range.startswith(KOPT_PREFIX) and not g.note:
            ref, _ = matcher.match(g.range)
            if ref is not None:
                out.append((ref.key, g))
    return out


def _moved(summary: ProfileSummary, matcher: RangeMatcher) -> dict[str, float] | None:
    """Per config, the bytes its range moved through L2 (a group without them: none); None
    when no launch of any range has them."""
    groups = _attributed(summary, matcher)
    if not any(g.l2_bytes is not None for _, g in groups):
        return None
    moved: dict[str, float] = {}
    for key, g in groups:
        moved[key] = moved.get(key, 0.0) + (g.l2_bytes or 0.0)
    return moved


def _calls(summary: ProfileSummary, matcher: RangeMatcher) -> dict[str, int]:
    """Per config, its calls in `summary`: its range's openings where the tool tells them apart,
    else its least-launched kernel in the range."""
    opened: dict[str, int] = {}
    for name, n in summary.range_openings or ():
        ref, _ = matcher.match(name)
        if ref is not None:
            opened[ref.key] = opened.get(ref.key, 0) + n
    least: dict[str, int] = {}
    for key, g in _attributed(summary, matcher):
        least[key] = min(least.get(key, g.calls), g.calls)
    return {key: opened.get(key) or n for key, n in least.items()}

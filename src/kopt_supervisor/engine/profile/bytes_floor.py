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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.profile.classes import ConfigRef, RangeMatcher
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, ProfileSummary

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
    summary: ProfileSummary,
    refs: Sequence[ConfigRef],
    need: Mapping[str, float],
    floor: float = L2_FLOOR,
) -> list[BytesShort] | None:
    """The configs of `refs` (with bytes in `need`, by config key) whose range moved fewer than
    `floor` x their bytes through L2 per call (calls: the range's openings, else its fewest
    launches of one kernel); None when the profile holds no L2 bytes for its ranges (not
    measured: the check cannot be made)."""
    matcher = RangeMatcher(refs)
    moved: dict[str, float] = {}
    launches: dict[str, int] = {}
    unmeasured: set[str] = set()
    measured = False
    for g in summary.ranged:
        if not g.range.startswith(KOPT_PREFIX) or g.note:
            continue
        ref, _ = matcher.match(g.range)
        if ref is None:
            continue
        if g.l2_bytes is None:
            unmeasured.add(ref.key)
            continue
        measured = True
        moved[ref.key] = moved.get(ref.key, 0.0) + g.l2_bytes
        launches[ref.key] = min(launches.get(ref.key, g.calls), g.calls)
    if not measured:
        return None
    openings = {r: n for r, n in summary.range_openings or ()}
    short = []
    for ref in refs:
        want = need.get(ref.key, 0.0)
        if want <= 0 or ref.key not in moved or ref.key in unmeasured:
            continue
        calls = next((n for r, n in openings.items() if matcher.match(r)[0] == ref), launches[ref.key])
        per_call = moved[ref.key] / max(1, calls)
        if per_call < floor * want:
            short.append(BytesShort(ref.key, ref.cls, per_call, want))
    return short

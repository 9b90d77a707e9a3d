"""The floors a keep's profile is held to: the bytes each call must move, and best's own time as
it was shown when its tree was kept.

**The bytes floor** (`bytes_short`): what each config's range moved through L2 against what a
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

**Best's floor** (`slower_than_kept`): a tree's code can always make its own kernels slower
under the profiler, never faster. A kept tree profiled afresh as BEST (a closer profile never
reuses best's; reuse off, or expired) that runs slower per call than the profile taken when it
was kept, on the same GPU, beyond both profiles' noise, slowed itself: a later candidate's gain
measured against it is not shown. It can tell such a profile without knowing its side: a closer
profile is asked for only when a keep's first profile could not tell, which a later no-op makes
happen by being noisy there (tests/security/test_review_s31_floor.py).

Pure: summaries, configs and figures in; what falls short out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from kopt_supervisor.engine import BadInput, fmt
from kopt_supervisor.engine.profile.classes import (
    DEFAULT_RUN_NOISE_PCT,
    ConfigRef,
    LaunchTotals,
    RangeMatcher,
    attribute,
)
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, ProfileSummary, RangeKernelStat
from kopt_supervisor.engine.roofline import work_of_row

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
    profile of the same calls (`_calls`: the calls kopt asked, else its ranges' openings, else
    its least-launched kernel in the range, as the per-class comparison counts them), never
    from the candidate's launches: one extra launch on one call would otherwise divide its
    bytes by fewer calls. A launch in a range without L2 bytes counts as none moved."""
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


def call_bytes(formula: str, refs: Sequence[ConfigRef]) -> dict[str, float]:
    """Per config key, the bytes a call reads and writes by [roofline].bytes (`formula`; none
    without it, nor for a config the formula cannot price)."""
    out: dict[str, float] = {}
    for ref in refs if formula else ():
        try:
            out[ref.key] = work_of_row("", formula, ref.row, config=ref.key)[1]
        except BadInput:
            continue
    return out


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


def _calls(summary: ProfileSummary, matcher: RangeMatcher, asked: bool = True) -> dict[str, int]:
    """Per config, its calls in `summary`: the calls kopt asked for (`ProfileSummary.asked`:
    a count the tree cannot move by launching more or fewer kernels; not with `asked` False),
    else its range's openings where the tool tells them apart, else its least-launched kernel in
    the range."""
    if summary.asked is not None and asked:
        seen = {key for key, _ in _attributed(summary, matcher)}
        return {key: n for key, n in summary.asked if key in seen}
    opened: dict[str, int] = {}
    for name, n in summary.range_openings or ():
        ref, _ = matcher.match(name)
        if ref is not None:
            opened[ref.key] = opened.get(ref.key, 0) + n
    least: dict[str, int] = {}
    for key, g in _attributed(summary, matcher):
        least[key] = min(least.get(key, g.calls), g.calls)
    return {key: opened.get(key) or n for key, n in least.items()}


DRIFT_NS = 250.0
"""How far one call's GPU time moves between two profiles of an unchanged tree taken minutes
apart, whatever the kernel's length: on the H200 (part 28) the one-row config's ~2.7 us call read
+19% and -19% against its keep's profile, the 15-90 us narrow configs up to +-1.7%, the
hundreds-of-us wide ones +-0.3%. Without it the guard class's five small configs sent an
honest keep to review (+3.7% from one-row alone, 2026-12-02)."""


def _at_calls(kernels: Mapping[str, LaunchTotals], calls: int, to: int) -> float:
    """A config's kernels' time in a profile of `calls` calls, as `to` calls would take it: each
    kernel scaled by the calls, but one launched fewer times than there were calls (it cannot run
    in each: made once) counted as it was. Launch counts are read from the kept profile only: a
    fresh one's, the tree's to choose, never excuse its time."""
    return sum(a.total if a.n < calls else a.total * to / calls for a in kernels.values())


@dataclass(frozen=True)
class SlowerThanKept:
    """A class whose kernels, in best's fresh profile, took longer per call than in the profile
    taken when best's tree was kept: `ratio` (fresh / kept, the geometric mean of its configs'),
    `lo` its interval's lower end."""

    cls: str
    ratio: float
    lo: float
    configs: int

    def line(self) -> str:
        return (
            f"{self.cls}: best's kernels {fmt.ratio_pct(self.ratio)} per call against its profile when it was "
            f"kept (at least {fmt.ratio_pct(self.lo)}, {self.configs} config(s))"
        )


def slower_than_kept(
    kept: ProfileSummary,
    fresh: ProfileSummary,
    refs: Sequence[ConfigRef],
    *,
    confidence: float = 0.99,
    run_noise_pct: float = DEFAULT_RUN_NOISE_PCT,
) -> list[SlowerThanKept]:
    """The classes of `refs` whose configs, profiled in both, ran slower per call in `fresh`
    than in `kept` beyond noise: the lower end of the class's interval (geometric mean of its
    configs' per-call ratios; the fresh profile's launch spread for both profiles, never the
    kept one's, DRIFT_NS per call and `run_noise_pct` per profile, two-sided at `confidence`)
    above 1. Calls are each profile's own (`_calls`), so a closer profile's 12 calls a config
    compare with the kept profile's bench's own: the calls kopt asked where the bench said its
    own numbers in the baseline's profile (kopt's harness); else each profile's range
    openings or least-launched kernel, which the tree chooses (one tiny launch once in each
    range of its kept profile made a "call" of all of them, lifting its floor 3-12 times:
    tests/security/test_review_s31_hostile.py)."""
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    matcher = RangeMatcher(refs)
    runs = [attribute(s, matcher) for s in (kept, fresh)]
    asked = kept.asked is not None and fresh.asked is not None
    if asked != (kept.asked is not None or fresh.asked is not None):
        return []  # one counted by the calls asked, one by launches: no common count (a baseline's word lost)
    calls = [_calls(s, matcher, asked) for s in (kept, fresh)]
    by_class: dict[str, list[tuple[float, float]]] = {}
    for ref in refs:
        if not all(ref.key in r.configs and calls[i].get(ref.key) for i, r in enumerate(runs)):
            continue
        totals = [sum(a.total for a in r.configs[ref.key].values()) for r in runs]
        if min(totals) <= 0:
            continue
        n = [c[ref.key] for c in calls]
        # asked: kept's time at the fresh profile's calls, a kernel launched fewer times than its calls
        # (a table, a zeroed workspace made once) counted once (at 12 calls kept and 4 fresh it read +2%)
        kept_at = _at_calls(runs[0].configs[ref.key], n[0], n[1]) if asked else totals[0] * n[1] / n[0]
        per_call = [kept_at / n[1], totals[1] / n[1]]
        # the fresh profile's launch spread stands for both: the kept one's is the tree's own first
        # pass, which it could have made noisy to widen its floor (a noisy fresh profile also
        # widens the keep's own comparison, where it leaves the claim unshown); and a call's time
        # drifts between profiles minutes apart by about DRIFT_NS whatever its length
        rel = 2.0 * sum(runs[1].variance(a) for a in runs[1].configs[ref.key].values()) / totals[1] ** 2
        rel += sum((DRIFT_NS / t) ** 2 for t in per_call)
        log_ratio = math.log(per_call[1] / per_call[0])
        by_class.setdefault(ref.cls, []).append((log_ratio, rel))
    out = []
    floor = run_noise_pct / 100.0
    for cls, got in sorted(by_class.items()):
        m = len(got)
        est = sum(x for x, _ in got) / m
        half = z * math.sqrt(sum(v for _, v in got) / (m * m) + 2.0 * floor * floor)
        if est - half > 0:
            out.append(SlowerThanKept(cls, math.exp(est), math.exp(est - half), m))
    return out

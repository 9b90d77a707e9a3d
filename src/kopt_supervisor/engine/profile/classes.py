"""Best vs candidate per config class, from every kernel launched inside each config's
NVTX/roctx range, with an interval from the profiler's own noise; and whether that agrees
with the bench's per-class verdicts (docs/design.md §5 step 5, §12 layer 3).

    cmp = compare_per_class(best_summary, cand_summary, config_refs(record["configs"]))
    agreement = agrees(verdict.classes, cmp, min_effect_pct=policy.min_effect_pct)
    if agreement.disagrees: ...  # review, with agreement.reason()

What is compared. Every launch inside a range `kopt:col=value,...` belongs to the config
the range names (below), whatever the kernel's name: a renamed kernel, a kernel split in
two or a new helper kernel all count. Per config the profile's GPU time
inside its ranges is compared (the bench runs the same calls for both trees under
KOPT_PROFILE=1; rocprofv3 counts range openings and a difference is reported); per class
the ratio is the geometric mean of its configs' ratios, the bench's own weighting. Kernels
that appear in or disappear from a class are listed. The `[profile].kernel` regex only
marks kernels for display.

Work outside the ranges. Launches outside any kopt range, in a range that names no single
config, or otherwise unattributable are totalled per side. When the candidate's total
grows beyond noise (best's outside spread, counted for both sides, and the run floor: never
the candidate's own spread, which it sets), nothing the candidate gained can be confirmed:
work moved out of the ranged region (precomputed, cached, deferred) would otherwise look
like a gain.

Noise. Each kernel's launches within a config are repeated samples of the same work: their
spread gives the variance of the config's total (n·s², a pooled relative spread for kernels
launched once). The class's log-ratio interval adds both sides' spreads (delta method) and
a run-to-run term: `run_noise_pct` for a single profile per side, or, given two or more
profiles of a side, the spread of the class's time between those profiles (Student's t).

Without ranges (a bench that emits none) the comparison falls back to the whole run's
target-kernel time (`summary.compare`) and says so in `note`. Pure: no files, no subprocesses.

What the comparison holds, how it prints and its agreement with the bench live in
engine/profile/__init__.py.

Range names. The harness (and a user's bench that wants per-class profiling) wraps each
config's timed and checked calls in a push/pop range named

    kopt:col=value,col=value

with the config's identifying CSV columns, values written as `metrics.format_value` writes
them (`format_value(2048.0)` is "2048"). A bench may name only the columns that identify a
config; the range stands for the config row whose columns match all its pairs. A range
that names a column no config has, matches no row, or matches several is not attributed:
`RangeMatcher.match` says why, and the comparison lists its kernels as unattributed.

Attribution of one profile (`attribute`): every (range, kernel) group of launches goes to
the config its kopt range names, whatever the kernel's name; what no config can claim
(outside any kopt range, in a range naming no single config) is kept apart with the reason.
Per config per kernel the launches' count, total and spread are pooled, which the
comparison turns into each config's time and its variance.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.decide import t_quantile
from kopt_supervisor.engine.metrics import format_value
from kopt_supervisor.engine.profile import (
    ALL_CLASSES,
    ClassChange,
    ClassComparison,
    ClassKernel,
    ConfigChange,
    Unattributed,
    UnattributedGroup,
)
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, ProfileSummary, compare, compile_regex

# ---------------------------------------------------------------------------------------
# kopt's range names, and which config a range stands for


@dataclass(frozen=True)
class ConfigRef:
    """One config of the bench: its key (`col=value,...` over all config columns), its class
    and its row (config column -> value as the bench's CSV gave it)."""

    key: str
    cls: str
    row: Mapping[str, Any]


def config_refs(
    record_configs: Mapping[str, Mapping[str, Any]], class_of: Mapping[str, str] | None = None
) -> list[ConfigRef]:
    """ConfigRefs from the iteration record's `configs` ({key: {"cls", "row", ...}}).

    class_of: config key -> the class it votes in, when the decision's classes differ from
    the record's (`decide.voting_classes`: the guard class of non-production configs), so
    that the profiler's classes are the bench's."""
    return [
        ConfigRef(key, str((class_of or {}).get(key, c["cls"])), dict(c.get("row") or {}))
        for key, c in record_configs.items()
    ]


def range_name(row: Mapping[str, Any], columns: Iterable[str]) -> str:
    """The range name a bench emits for the config `row`, naming `columns` in this order."""
    return KOPT_PREFIX + ",".join(f"{c}={format_value(row[c])}" for c in columns)


def parse_range(name: str, columns: Iterable[str]) -> list[tuple[str, str]]:
    """`kopt:a=1,b=x` -> [("a", "1"), ("b", "x")], knowing the config columns.

    A value may itself hold a comma: a piece that does not start with `<known column>=`
    continues the previous value. ValueError (one line) for a name that is not a kopt range
    name, names no pair, names an unknown column first, or names a column twice."""
    if not name.startswith(KOPT_PREFIX):
        raise ValueError(f"not a kopt range name (no {KOPT_PREFIX!r} prefix)")
    known = set(columns)
    pairs: list[tuple[str, str]] = []
    for piece in name[len(KOPT_PREFIX) :].split(","):
        col, eq, value = piece.partition("=")
        if eq and col in known:
            if any(c == col for c, _ in pairs):
                raise ValueError(f"names column {col!r} twice")
            pairs.append((col, value))
        elif pairs:
            last_col, last_value = pairs[-1]
            pairs[-1] = (last_col, f"{last_value},{piece}")
        elif eq:
            raise ValueError(f"names column {col!r}, which no config has")
        else:
            raise ValueError("names no col=value pair")
    return pairs


class RangeMatcher:
    """Which config a kopt range name stands for, against the bench's configs."""

    def __init__(self, configs: Iterable[ConfigRef]) -> None:
        self.configs = list(configs)
        self.columns = sorted({c for ref in self.configs for c in ref.row})
        self._formatted = [(ref, {c: format_value(v) for c, v in ref.row.items()}) for ref in self.configs]
        self._cache: dict[str, tuple[ConfigRef | None, str]] = {}

    def match(self, name: str) -> tuple[ConfigRef | None, str]:
        """(the config, "") or (None, why the range stands for no single config)."""
        if name not in self._cache:
            self._cache[name] = self._match(name)
        return self._cache[name]

    def _match(self, name: str) -> tuple[ConfigRef | None, str]:
        try:
            pairs = parse_range(name, self.columns)
        except ValueError as exc:
            return None, f"range {name!r} {exc}"
        hits = [ref for ref, row in self._formatted if all(row.get(c) == v for c, v in pairs)]
        if not hits:
            return None, f"range {name!r} matches no config"
        if len(hits) > 1:
            return None, (
                f"range {name!r} matches {len(hits)} configs ({hits[0].key}; {hits[1].key}"
                f"{'; ...' if len(hits) > 2 else ''}): it must name more columns"
            )
        return hits[0], ""


@dataclass
class LaunchTotals:
    """Launches of one kernel pooled: their count, total time and spread."""

    n: int = 0
    total: float = 0.0
    m2: float = 0.0
    """Sum of squared deviations, merged over groups of one kernel (Chan et al.)."""

    def add(self, n: int, total: float, m2: float) -> None:
        if self.n == 0:
            self.n, self.total, self.m2 = n, total, m2
            return
        mean_a, mean_b = self.total / self.n, total / n
        delta = mean_b - mean_a
        self.m2 += m2 + delta * delta * self.n * n / (self.n + n)
        self.n += n
        self.total += total


@dataclass
class AttributedProfile:
    """One profile, attributed: per config per kernel, and what no config can claim."""

    configs: dict[str, dict[str, LaunchTotals]] = field(default_factory=dict)
    openings: dict[str, int] | None = None
    asked: dict[str, int] | None = None
    """Per config, the calls kopt asked for (ProfileSummary.asked): the count used first."""
    outside: list[tuple[str, int, float, float, str]] = field(default_factory=list)
    """(kernel, calls, total, m2, why)"""
    cv2: float | None = None
    """Pooled relative variance of one launch, from every group launched twice or more."""

    def variance(self, agg: LaunchTotals) -> float:
        if agg.n >= 2:
            return agg.n * agg.m2 / (agg.n - 1)
        mean = agg.total / agg.n if agg.n else 0.0
        return (self.cv2 or 0.0) * mean * mean


def attribute(summary: ProfileSummary, matcher: RangeMatcher) -> AttributedProfile:
    """One profile's launch groups, attributed to configs (and what none can claim)."""
    run = AttributedProfile(asked=None if summary.asked is None else dict(summary.asked))
    opened = dict(summary.range_openings) if summary.range_openings is not None else None
    run.openings = {} if opened is not None else None
    counted: set[str] = set()
    rel, dof = 0.0, 0
    for g in summary.ranged:
        if g.calls >= 2 and g.total_ns > 0:
            mean = g.total_ns / g.calls
            rel += g.m2_ns2 / (mean * mean)
            dof += g.calls - 1
        why = g.note
        ref = None
        if not why:
            if not g.range:
                why = "outside any kopt range"
            elif not g.range.startswith(KOPT_PREFIX):
                why = f"innermost range {g.range!r} is not a kopt range"
            else:
                ref, why = matcher.match(g.range)
        if ref is None:
            run.outside.append((g.kernel, g.calls, g.total_ns, g.m2_ns2, why))
            continue
        run.configs.setdefault(ref.key, {}).setdefault(g.kernel, LaunchTotals()).add(g.calls, g.total_ns, g.m2_ns2)
        if opened is not None and run.openings is not None and g.range not in counted:
            counted.add(g.range)
            run.openings[ref.key] = run.openings.get(ref.key, 0) + opened.get(g.range, 0)
    run.cv2 = rel / dof if dof else None
    return run


# ---------------------------------------------------------------------------------------
# Best vs candidate per class

NO_RANGES_NOTE = "no NVTX ranges: the profiler compared whole-run kernel time, not per class"
DEFAULT_RUN_NOISE_PCT = 0.3
"""Run-to-run spread of a profile's time (CV, %) when only one profile per side is taken:
five ncu runs of one unchanged tree on an H100 spread by CV 0.16-0.27% (issue 17)."""


def compare_per_class(
    best: ProfileSummary | Sequence[ProfileSummary],
    cand: ProfileSummary | Sequence[ProfileSummary],
    configs: Iterable[ConfigRef],
    *,
    confidence: float = 0.99,
    run_noise_pct: float = DEFAULT_RUN_NOISE_PCT,
) -> ClassComparison:
    """Compare best and candidate per class (see the module docstring).

    `best`/`cand`: one profile per side, or several profiles of the same tree (the
    run-to-run noise is then measured instead of taken from `run_noise_pct`). `configs`:
    the bench's configs (`ranges.config_refs(record["configs"])`)."""
    bests, cands = _as_list(best, "best"), _as_list(cand, "cand")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), not {confidence!r}")
    if run_noise_pct < 0:
        raise ValueError(f"run_noise_pct must be >= 0, not {run_noise_pct!r}")
    refs = list(configs)
    ranged_b = [bool(s.kopt_ranges) for s in bests]
    ranged_c = [bool(s.kopt_ranges) for s in cands]
    if not any(ranged_b) and not any(ranged_c):
        return _fallback(bests, cands, confidence, run_noise_pct)
    matcher = RangeMatcher(refs)
    runs_b = [attribute(s, matcher) for s in bests]
    runs_c = [attribute(s, matcher) for s in cands]
    problems: list[str] = []
    for side, flags, summaries in (("best", ranged_b, bests), ("candidate", ranged_c, cands)):
        for i, (has, s) in enumerate(zip(flags, summaries, strict=True)):
            if not has:
                which = f"{side}'s profile" + (f" {i + 1}" if len(summaries) > 1 else "")
                why = s.ranges_source if s.ranges_source.startswith("none") else "no launch in a kopt range"
                problems.append(f"{which} has no kopt ranges while the other side's has ({why})")
    z_within = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    regex = compile_regex(bests[0].kernel_regex)
    classes: dict[str, list[ConfigRef]] = defaultdict(list)
    for ref in refs:
        classes[ref.cls].append(ref)
    changes = []
    noise_notes: set[str] = set()
    for cls in sorted(classes):
        change, note = _class_change(
            cls, classes[cls], runs_b, runs_c, confidence, z_within, run_noise_pct / 100.0, regex.search
        )
        if change is not None:
            changes.append(change)
        if note:
            noise_notes.add(note)
    outside = _unattributed(runs_b, runs_c, z_within, run_noise_pct / 100.0)
    if outside.grew:
        problems.append(
            f"GPU time outside the config ranges grew from {outside.best_ns / 1e3:.1f} to "
            f"{outside.cand_ns / 1e3:.1f} us per profile, beyond noise (work moved out of the ranges "
            "cannot count as a gain)"
        )
    noise = "; ".join(sorted(noise_notes)) or _within_note(len(bests), len(cands), run_noise_pct)
    return ClassComparison(
        per_class=True,
        classes=tuple(changes),
        unattributed=outside,
        confidence=confidence,
        noise=noise,
        problems=tuple(problems),
        profiles=(len(bests), len(cands)),
        kernel_regex=bests[0].kernel_regex,
    )


def _as_list(x: ProfileSummary | Sequence[ProfileSummary], side: str) -> list[ProfileSummary]:
    items = [x] if isinstance(x, ProfileSummary) else list(x)
    if not items:
        raise KoptFailure(f"no {side} profile to compare")
    return items


def _within_note(kb: int, kc: int, run_noise_pct: float) -> str:
    if kb >= 2 or kc >= 2:
        return f"{kb}+{kc} profiles: run-to-run spread measured"
    return f"launch-to-launch spread within each profile, plus {run_noise_pct:g}% run-to-run ([profile].run_noise_pct)"


def _class_change(
    cls: str,
    refs: list[ConfigRef],
    runs_b: list[AttributedProfile],
    runs_c: list[AttributedProfile],
    confidence: float,
    z: float,
    floor: float,
    is_target: Any,
) -> tuple[ClassChange | None, str]:
    problems: list[str] = []
    present: list[ConfigRef] = []
    for ref in refs:
        in_b = [ref.key in r.configs for r in runs_b]
        in_c = [ref.key in r.configs for r in runs_c]
        if not any(in_b) and not any(in_c):
            continue  # not profiled (the profile command ran a subset)
        if all(in_b) and all(in_c):
            present.append(ref)
        elif all(in_b) and not any(in_c):
            best_ns = _mean([sum(a.total for a in r.configs[ref.key].values()) for r in runs_b])
            problems.append(
                f"config {ref.key}: {best_ns / 1e3:.1f} us of kernels in its ranges in best, none in the candidate"
            )
        elif all(in_c) and not any(in_b):
            problems.append(f"config {ref.key}: kernels in its ranges in the candidate, none in best")
        else:
            problems.append(f"config {ref.key}: in some profiles of a side only")
    if not present and not problems:
        return None, ""
    config_changes: list[ConfigChange] = []
    logs: list[float] = []
    var_within = 0.0
    best_only = 0.0  # best's spread standing for both sides (`ClassChange.lo_best_spread`)
    best_dof = 0
    kernel_b: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    kernel_c: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for ref in present:
        tb, vb = _side_total(runs_b, ref.key)
        tc, vc = _side_total(runs_c, ref.key)
        if tb <= 0 or tc <= 0:
            problems.append(f"config {ref.key}: no GPU time on one side")
            continue
        calls_b, calls_c, basis = _calls(runs_b, runs_c, ref.key)
        if calls_b != calls_c:
            problems.append(
                f"config {ref.key}: its ranges were opened {calls_b} times in best, "
                f"{calls_c} in the candidate (the bench must run the same calls)"
            )
        logs.append(math.log(tc / tb))
        var_within += vb / (tb * tb) + vc / (tc * tc)
        best_only += 2.0 * vb / (tb * tb)
        best_dof += sum(max(a.n - 1, 0) for r in runs_b for a in r.configs[ref.key].values())
        config_changes.append(ConfigChange(ref.key, tb, tc, tc / tb, calls_b, calls_c, basis))
        for runs, acc, calls in ((runs_b, kernel_b, calls_b), (runs_c, kernel_c, calls_c)):
            for r in runs:
                for name, agg in r.configs[ref.key].items():
                    acc[name][0] += agg.total / calls / len(runs)
                    acc[name][1] += agg.n / len(runs)
    kernels = tuple(
        ClassKernel(
            name,
            kernel_b[name][0] if name in kernel_b else 0.0,
            kernel_c[name][0] if name in kernel_c else 0.0,
            round(kernel_b[name][1]) if name in kernel_b else 0,
            round(kernel_c[name][1]) if name in kernel_c else 0,
            bool(is_target(name)),
        )
        for name in sorted(set(kernel_b) | set(kernel_c))
    )
    appeared = tuple(sorted(set(kernel_c) - set(kernel_b)))
    disappeared = tuple(sorted(set(kernel_b) - set(kernel_c)))
    if not logs:
        return ClassChange(cls, None, None, None, None, None, (), kernels, appeared, disappeared, tuple(problems)), ""
    m = len(logs)
    est = sum(logs) / m
    lo, hi, note = _interval(
        est, var_within / (m * m), [ref.key for ref in present], runs_b, runs_c, confidence, z, floor
    )
    half = _best_spread_half(
        best_only / (m * m), best_dof, [ref.key for ref in present], runs_b, len(runs_c), confidence, z, floor
    )
    best_ns = sum(c.best_ns / c.best_calls for c in config_changes)
    cand_ns = sum(c.cand_ns / c.cand_calls for c in config_changes)
    return ClassChange(
        cls,
        best_ns,
        cand_ns,
        math.exp(est),
        lo,
        hi,
        tuple(config_changes),
        kernels,
        appeared,
        disappeared,
        tuple(problems),
        lo_best_spread=math.exp(est - half),
        hi_best_spread=math.exp(est + half),
    ), note


def _best_spread_half(
    var_best: float,
    dof: int,
    keys: list[str],
    runs_b: list[AttributedProfile],
    kc: int,
    confidence: float,
    z: float,
    floor: float,
) -> float:
    """Half the log-interval of a class's ratio from best's spread alone, standing for both sides
    (`ClassChange.lo_best_spread`): best's launches at Student's t on their degrees of freedom
    (a spread from one side's few launches), or, with two or more profiles of best, the
    run-to-run spread of best's profiles (t, their count - 1 df), as `_interval` measures it."""
    p = (1.0 + confidence) / 2.0
    kb = len(runs_b)
    if kb >= 2:
        s2 = _level_ss(runs_b, keys) / (kb - 1)
        return t_quantile(p, kb - 1) * math.sqrt(max(s2 * (1.0 / kb + 1.0 / max(kc, 1)), var_best))
    quantile = t_quantile(p, dof) if dof > 0 else z
    return quantile * math.sqrt(var_best + floor * floor * 2.0)


def _level_ss(runs: list[AttributedProfile], keys: list[str]) -> float:
    """The sum of squared deviations, over one side's profiles, of the class's level (the mean
    log of its configs' totals): the run-to-run spread of two or more profiles of a tree."""
    levels = [sum(math.log(sum(a.total for a in r.configs[k].values())) for k in keys) / len(keys) for r in runs]
    mean = sum(levels) / len(levels)
    return sum((x - mean) ** 2 for x in levels)


def _side_total(runs: list[AttributedProfile], key: str) -> tuple[float, float]:
    """Mean over the side's profiles of the config's total, and the variance of that mean
    from the launches' spread."""
    totals = [sum(a.total for a in r.configs[key].values()) for r in runs]
    variances = [sum(r.variance(a) for a in r.configs[key].values()) for r in runs]
    k = len(runs)
    return sum(totals) / k, sum(variances) / (k * k)


def _calls(runs_b: list[AttributedProfile], runs_c: list[AttributedProfile], key: str) -> tuple[int, int, str]:
    """A config's calls in best's and the candidate's profiles, and how they were counted: the
    calls kopt asked of both (never the tree's own launches, which it chooses) where the tool
    counts no range openings or counts the same; else its ranges' openings (rocprofv3: a side
    that opened fewer than asked ran fewer, which then differs from the other's or is its
    count), else the least-launched kernel in best's ranges for both."""
    ab = [r.asked.get(key) if r.asked is not None else None for r in runs_b]
    ac = [r.asked.get(key) if r.asked is not None else None for r in runs_c]
    ob = [r.openings.get(key) if r.openings is not None else None for r in runs_b]
    oc = [r.openings.get(key) if r.openings is not None else None for r in runs_c]
    opened = all(o for o in ob) and all(o for o in oc)
    if all(ab) and all(ac) and (not opened or (ob, oc) == (ab, ac)):  # the tool's count, where it has one, agrees
        return round(_mean([float(a or 0) for a in ab])), round(_mean([float(a or 0) for a in ac])), "calls kopt asked"
    if opened:
        return round(_mean([float(o or 0) for o in ob])), round(_mean([float(o or 0) for o in oc])), "range openings"
    anchor = min(a.n for a in runs_b[0].configs[key].values())
    return anchor, anchor, "least-launched kernel in best's ranges"


def _interval(
    est: float,
    var_within: float,
    keys: list[str],
    runs_b: list[AttributedProfile],
    runs_c: list[AttributedProfile],
    confidence: float,
    z: float,
    floor: float,
) -> tuple[float, float, str]:
    kb, kc = len(runs_b), len(runs_c)
    if kb >= 2 or kc >= 2:
        ss, dof = 0.0, 0
        for runs in (runs_b, runs_c):
            if len(runs) < 2:
                continue
            ss += _level_ss(runs, keys)
            dof += len(runs) - 1
        s2 = ss / dof
        var = max(s2 * (1.0 / kb + 1.0 / kc), var_within)
        half = t_quantile((1.0 + confidence) / 2.0, dof) * math.sqrt(var)
        note = f"{kb}+{kc} profiles: run-to-run spread measured (t, {dof} df)"
    else:
        var = var_within + floor * floor * 2.0
        half = z * math.sqrt(var)
        note = ""
    return math.exp(est - half), math.exp(est + half), note


def _unattributed(
    runs_b: list[AttributedProfile], runs_c: list[AttributedProfile], z: float, floor: float
) -> Unattributed:
    def side(runs: list[AttributedProfile], name: str) -> tuple[float, float, list[UnattributedGroup]]:
        k = len(runs)
        total = sum(t for r in runs for _, _, t, _, _ in r.outside) / k
        var = 0.0
        merged: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for r in runs:
            for kernel, n, t, m2, why in r.outside:
                var += r.variance(LaunchTotals(n, t, m2)) / (k * k)
                merged[(kernel, why)][0] += n / k
                merged[(kernel, why)][1] += t / k
        groups = [UnattributedGroup(name, kernel, round(n), t, why) for (kernel, why), (n, t) in sorted(merged.items())]
        return total, var, groups

    tb, vb, gb = side(runs_b, "best")
    tc, _, gc = side(runs_c, "cand")
    # the noise is best's (kept code) for both sides, never the candidate's own spread: one long
    # outside launch of its own widened the rule enough to hide a class's work moved outside
    # the ranges (a hostile review, tests/security/test_profile_guard_hostile.py)
    var = 2.0 * vb + floor * floor * (tb * tb + tc * tc)
    grew = tc > tb and (tc - tb) > z * math.sqrt(var)
    return Unattributed(tb, tc, grew, tuple(gb + gc))


def _fallback(
    bests: list[ProfileSummary], cands: list[ProfileSummary], confidence: float, run_noise_pct: float
) -> ClassComparison:
    """No ranges on either side: the whole run's target kernels, as `model.compare`."""
    b, c = bests[0], cands[0]
    old = compare(b, c)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    floor = run_noise_pct / 100.0
    half = z * math.sqrt(2.0 * floor * floor)
    why = next((s.ranges_source[len("none") :].lstrip(": ") for s in (b, c) if s.ranges_source.startswith("none")), "")
    regex = f"; target kernels `{b.kernel_regex}`" if b.kernel_regex else ""
    change = ClassChange(
        ALL_CLASSES,
        old.best_per_call_ns,
        old.cand_per_call_ns,
        old.ratio,
        math.exp(math.log(old.ratio) - half),
        math.exp(math.log(old.ratio) + half),
        kernels=tuple(
            ClassKernel(
                k.name,
                (k.best_avg_ns or 0.0) * k.best_calls / max(old.best_calls, 1),
                (k.cand_avg_ns or 0.0) * k.cand_calls / max(old.cand_calls, 1),
                k.best_calls,
                k.cand_calls,
                True,
            )
            for k in old.kernels
        ),
        appeared=tuple(k.name for k in old.kernels if k.best_calls == 0),
        disappeared=tuple(k.name for k in old.kernels if k.cand_calls == 0),
    )
    return ClassComparison(
        per_class=False,
        classes=(change,),
        unattributed=Unattributed(0.0, 0.0, False),
        confidence=confidence,
        noise=(
            f"whole run: the {run_noise_pct:g}% run-to-run term only ([profile].run_noise_pct; without "
            f"ranges a kernel's launches mix shapes, their spread is no noise measure); {old.basis}"
        ),
        note=NO_RANGES_NOTE + (f" ({why})" if why else "") + regex,
        profiles=(len(bests), len(cands)),
        kernel_regex=b.kernel_regex,
    )


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)

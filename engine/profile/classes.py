"""Best vs candidate per config class, from every kernel launched inside each config's
NVTX/roctx range, with an interval from the profiler's own noise; and whether that agrees
with the bench's per-class verdicts (DESIGN.md §5 step 5, §12 layer 3).

    cmp = compare_per_class(best_summary, cand_summary, config_refs(record["configs"]))
    agreement = agrees(verdict.classes, cmp, min_effect_pct=policy.min_effect_pct)
    if agreement.disagrees: ...  # review, with agreement.reason()

What is compared. Every launch inside a range `kopt:col=value,...` belongs to the config
the range names (engine/profile/ranges.py), whatever the kernel's name: a renamed kernel,
a kernel split in two or a new helper kernel all count. Per config the profile's GPU time
inside its ranges is compared (the bench runs the same calls for both trees under
KOPT_PROFILE=1; rocprofv3 counts range openings and a difference is reported); per class
the ratio is the geometric mean of its configs' ratios, the bench's own weighting. Kernels
that appear in or disappear from a class are listed. The `[profile].kernel` regex only
marks kernels for display.

Work outside the ranges. Launches outside any kopt range, in a range that names no single
config, or otherwise unattributable are totalled per side. When the candidate's total
grows beyond noise, nothing the candidate gained can be confirmed: work moved out of the
ranged region (precomputed, cached, deferred) would otherwise look like a gain.

Noise. Each kernel's launches within a config are repeated samples of the same work: their
spread gives the variance of the config's total (n·s², a pooled relative spread for kernels
launched once). The class's log-ratio interval adds both sides' spreads (delta method) and
a run-to-run term: `run_noise_pct` for a single profile per side, or, given two or more
profiles of a side, the spread of the class's time between those profiles (Student's t).

Without ranges (a bench that emits none) the comparison falls back to the whole run's
target-kernel time (`model.compare`) and says so in `note`. Pure: no files, no subprocesses.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from statistics import NormalDist
from typing import Any, Protocol

from kopt_supervisor.engine.decide.stats import t_quantile
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.profile.model import (
    KOPT_PREFIX,
    ProfileSummary,
    compare,
    compile_regex,
)
from kopt_supervisor.engine.profile.ranges import ConfigRef, RangeMatcher

NO_RANGES_NOTE = "no NVTX ranges: the profiler compared whole-run kernel time, not per class"
ALL_CLASSES = "(all classes)"
DEFAULT_RUN_NOISE_PCT = 0.3
"""Run-to-run spread of a profile's time (CV, %) when only one profile per side is taken:
five ncu runs of one unchanged tree on an H100 spread by CV 0.16-0.27% (issue 17)."""

# ---------------------------------------------------------------------------------------
# What the comparison holds


@dataclass(frozen=True)
class ConfigChange:
    """One config's GPU time inside its ranges, over the whole profile (mean over profiles)."""

    config: str
    best_ns: float
    cand_ns: float
    ratio: float
    best_calls: int
    cand_calls: int
    calls_basis: str
    """"range openings" (counted by the tool) or "least-launched kernel in best's ranges"
    (ncu cannot count openings: both sides use best's count, the bench runs the same calls)."""


@dataclass(frozen=True)
class ClassKernel:
    """One kernel name inside a class's ranges: time per call summed over the class's configs."""

    name: str
    best_ns: float
    cand_ns: float
    best_launches: int
    cand_launches: int
    matches_regex: bool = False


@dataclass(frozen=True)
class ClassChange:
    cls: str
    best_ns: float | None
    """GPU time of one call of each of the class's configs (summed), best."""
    cand_ns: float | None
    ratio: float | None
    """Geometric mean over the class's configs of candidate/best time; below 1: faster."""
    lo: float | None
    hi: float | None
    """The ratio's interval at the comparison's confidence (None: no ratio)."""
    configs: tuple[ConfigChange, ...] = ()
    kernels: tuple[ClassKernel, ...] = ()
    appeared: tuple[str, ...] = ()
    """Kernels in the candidate's ranges of this class and not in best's."""
    disappeared: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    """What makes a gain of this class unconfirmable (a config missing on one side, range
    openings that differ)."""

    @property
    def delta_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    @property
    def hottest(self) -> str:
        ranked = sorted(self.kernels, key=lambda k: (-max(k.best_ns, k.cand_ns), k.name))
        return ranked[0].name if ranked else ""


@dataclass(frozen=True)
class UnattributedGroup:
    side: str
    """"best" or "cand"."""
    kernel: str
    calls: int
    total_ns: float
    """Per profile (mean over the side's profiles)."""
    why: str


@dataclass(frozen=True)
class Unattributed:
    """GPU time no config can claim: outside every kopt range, or in a range that names no
    single config."""

    best_ns: float
    cand_ns: float
    grew: bool
    """The candidate's unattributed time exceeds best's beyond noise."""
    groups: tuple[UnattributedGroup, ...] = ()


@dataclass(frozen=True)
class ClassComparison:
    per_class: bool
    """False: the fallback (no ranges), one entry ALL_CLASSES for the whole run."""
    classes: tuple[ClassChange, ...]
    unattributed: Unattributed
    confidence: float
    noise: str
    """How the intervals were made (launch spread, run-to-run term)."""
    note: str = ""
    """NO_RANGES_NOTE (and why) in the fallback; "" otherwise."""
    problems: tuple[str, ...] = ()
    """Problems that hold for every class (ranges on one side only, unattributed growth)."""
    profiles: tuple[int, int] = (1, 1)
    kernel_regex: str = ""

    def by_class(self) -> dict[str, ClassChange]:
        return {c.cls: c for c in self.classes}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassComparison:
        u = data["unattributed"]
        return cls(
            per_class=bool(data["per_class"]),
            classes=tuple(
                ClassChange(
                    **{k: _tuple(v) for k, v in c.items() if k not in ("configs", "kernels")},
                    configs=tuple(ConfigChange(**x) for x in c.get("configs", ())),
                    kernels=tuple(ClassKernel(**x) for x in c.get("kernels", ())),
                )
                for c in data["classes"]
            ),
            unattributed=Unattributed(
                u["best_ns"], u["cand_ns"], u["grew"],
                tuple(UnattributedGroup(**g) for g in u.get("groups", ())),
            ),
            confidence=float(data["confidence"]),
            noise=str(data["noise"]),
            note=str(data.get("note", "")),
            problems=tuple(data.get("problems", ())),
            profiles=(int(data.get("profiles", (1, 1))[0]), int(data.get("profiles", (1, 1))[1])),
            kernel_regex=str(data.get("kernel_regex", "")),
        )

    def summary_line(self) -> str:
        parts = [f"{c.cls} {_pct(c.ratio)} {_iv(c.lo, c.hi)}" for c in self.classes]
        head = "; ".join(parts) or "no class profiled"
        tail = [self.note] if self.note else []
        if self.unattributed.cand_ns or self.unattributed.best_ns:
            tail.append(f"outside ranges {self.unattributed.best_ns / 1e3:.1f} -> "
                        f"{self.unattributed.cand_ns / 1e3:.1f} us")
        return head + ("" if not tail else f" ({'; '.join(tail)})")

    def table(self) -> str:
        """Markdown: per class the change with its interval, then the kernels of each class."""
        conf = f"{self.confidence:.0%}"
        rows = [f"| class | best us/call | cand us/call | change | {conf} interval | kernels appeared | disappeared |",
                "|---|---:|---:|---:|---|---|---|"]
        for c in self.classes:
            rows.append(f"| {c.cls} | {_us(c.best_ns)} | {_us(c.cand_ns)} | {_pct(c.ratio)} | {_iv(c.lo, c.hi)} "
                        f"| {', '.join(c.appeared) or '-'} | {', '.join(c.disappeared) or '-'} |")
        out = rows + [""]
        for c in self.classes:
            if not c.kernels:
                continue
            out += [f"{c.cls}:", "", "| kernel | best us/call | cand us/call | launches best/cand |",
                    "|---|---:|---:|---:|"]
            for k in sorted(c.kernels, key=lambda k: (-max(k.best_ns, k.cand_ns), k.name)):
                mark = " (regex)" if k.matches_regex else ""
                out.append(f"| {k.name}{mark} | {_us(k.best_ns)} | {_us(k.cand_ns)} "
                           f"| {k.best_launches}/{k.cand_launches} |")
            out.append("")
        u = self.unattributed
        if u.groups:
            out += [f"Outside config ranges: {_us(u.best_ns)} -> {_us(u.cand_ns)} us per profile"
                    f"{' (grew beyond noise)' if u.grew else ''}:", ""]
            out += [f"- {g.side}: {g.kernel} x{g.calls}, {_us(g.total_ns)} us ({g.why})" for g in u.groups]
            out.append("")
        out += [f"- {p}" for p in self.problems]
        if self.note:
            out.append(f"Note: {self.note}.")
        out.append(f"Noise: {self.noise}.")
        return "\n".join(out)


def _tuple(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:.3f}"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1.0) * 100.0:+.2f}%"


def _iv(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "[-]"
    return f"[{(lo - 1) * 100:+.2f}%, {(hi - 1) * 100:+.2f}%]"


# ---------------------------------------------------------------------------------------
# Attribution of one profile


@dataclass
class _Agg:
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
class _Run:
    """One profile, attributed: per config per kernel, and what no config can claim."""

    configs: dict[str, dict[str, _Agg]] = field(default_factory=dict)
    openings: dict[str, int] | None = None
    outside: list[tuple[str, int, float, float, str]] = field(default_factory=list)
    """(kernel, calls, total, m2, why)"""
    cv2: float | None = None
    """Pooled relative variance of one launch, from every group launched twice or more."""

    def variance(self, agg: _Agg) -> float:
        if agg.n >= 2:
            return agg.n * agg.m2 / (agg.n - 1)
        mean = agg.total / agg.n if agg.n else 0.0
        return (self.cv2 or 0.0) * mean * mean


def _attribute(summary: ProfileSummary, matcher: RangeMatcher) -> _Run:
    run = _Run()
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
        run.configs.setdefault(ref.key, {}).setdefault(g.kernel, _Agg()).add(g.calls, g.total_ns, g.m2_ns2)
        if opened is not None and run.openings is not None and g.range not in counted:
            counted.add(g.range)
            run.openings[ref.key] = run.openings.get(ref.key, 0) + opened.get(g.range, 0)
    run.cv2 = rel / dof if dof else None
    return run


# ---------------------------------------------------------------------------------------
# The comparison


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
    runs_b = [_attribute(s, matcher) for s in bests]
    runs_c = [_attribute(s, matcher) for s in cands]
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
        change, note = _class_change(cls, classes[cls], runs_b, runs_c, confidence, z_within,
                                     run_noise_pct / 100.0, regex.search)
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
    return (f"launch-to-launch spread within each profile, plus {run_noise_pct:g}% run-to-run "
            "([profile].run_noise_pct)")


def _class_change(
    cls: str,
    refs: list[ConfigRef],
    runs_b: list[_Run],
    runs_c: list[_Run],
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
            problems.append(f"config {ref.key}: {best_ns / 1e3:.1f} us of kernels in its ranges in best, "
                            "none in the candidate")
        elif all(in_c) and not any(in_b):
            problems.append(f"config {ref.key}: kernels in its ranges in the candidate, none in best")
        else:
            problems.append(f"config {ref.key}: in some profiles of a side only")
    if not present and not problems:
        return None, ""
    config_changes: list[ConfigChange] = []
    logs: list[float] = []
    var_within = 0.0
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
            problems.append(f"config {ref.key}: its ranges were opened {calls_b} times in best, "
                            f"{calls_c} in the candidate (the bench must run the same calls)")
        logs.append(math.log(tc / tb))
        var_within += vb / (tb * tb) + vc / (tc * tc)
        config_changes.append(ConfigChange(ref.key, tb, tc, tc / tb, calls_b, calls_c, basis))
        for runs, acc, calls in ((runs_b, kernel_b, calls_b), (runs_c, kernel_c, calls_c)):
            for r in runs:
                for name, agg in r.configs[ref.key].items():
                    acc[name][0] += agg.total / calls / len(runs)
                    acc[name][1] += agg.n / len(runs)
    kernels = tuple(
        ClassKernel(name, kernel_b[name][0] if name in kernel_b else 0.0,
                    kernel_c[name][0] if name in kernel_c else 0.0,
                    round(kernel_b[name][1]) if name in kernel_b else 0,
                    round(kernel_c[name][1]) if name in kernel_c else 0,
                    bool(is_target(name)))
        for name in sorted(set(kernel_b) | set(kernel_c))
    )
    appeared = tuple(sorted(set(kernel_c) - set(kernel_b)))
    disappeared = tuple(sorted(set(kernel_b) - set(kernel_c)))
    if not logs:
        return ClassChange(cls, None, None, None, None, None, (), kernels, appeared, disappeared,
                           tuple(problems)), ""
    m = len(logs)
    est = sum(logs) / m
    lo, hi, note = _interval(est, var_within / (m * m), [ref.key for ref in present], runs_b, runs_c,
                             confidence, z, floor)
    best_ns = sum(c.best_ns / c.best_calls for c in config_changes)
    cand_ns = sum(c.cand_ns / c.cand_calls for c in config_changes)
    return ClassChange(cls, best_ns, cand_ns, math.exp(est), lo, hi, tuple(config_changes), kernels,
                       appeared, disappeared, tuple(problems)), note


def _side_total(runs: list[_Run], key: str) -> tuple[float, float]:
    """Mean over the side's profiles of the config's total, and the variance of that mean
    from the launches' spread."""
    totals = [sum(a.total for a in r.configs[key].values()) for r in runs]
    variances = [sum(r.variance(a) for a in r.configs[key].values()) for r in runs]
    k = len(runs)
    return sum(totals) / k, sum(variances) / (k * k)


def _calls(runs_b: list[_Run], runs_c: list[_Run], key: str) -> tuple[int, int, str]:
    ob = [r.openings.get(key) if r.openings is not None else None for r in runs_b]
    oc = [r.openings.get(key) if r.openings is not None else None for r in runs_c]
    if all(o for o in ob) and all(o for o in oc):
        return round(_mean([float(o or 0) for o in ob])), round(_mean([float(o or 0) for o in oc])), "range openings"
    anchor = min(a.n for a in runs_b[0].configs[key].values())
    return anchor, anchor, "least-launched kernel in best's ranges"


def _interval(
    est: float,
    var_within: float,
    keys: list[str],
    runs_b: list[_Run],
    runs_c: list[_Run],
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
            levels = [sum(math.log(sum(a.total for a in r.configs[k].values())) for k in keys) / len(keys)
                      for r in runs]
            mean = sum(levels) / len(levels)
            ss += sum((x - mean) ** 2 for x in levels)
            dof += len(levels) - 1
        s2 = ss / dof
        var = max(s2 * (1.0 / kb + 1.0 / kc), var_within)
        half = t_quantile((1.0 + confidence) / 2.0, dof) * math.sqrt(var)
        note = f"{kb}+{kc} profiles: run-to-run spread measured (t, {dof} df)"
    else:
        var = var_within + floor * floor * 2.0
        half = z * math.sqrt(var)
        note = ""
    return math.exp(est - half), math.exp(est + half), note


def _unattributed(runs_b: list[_Run], runs_c: list[_Run], z: float, floor: float) -> Unattributed:
    def side(runs: list[_Run], name: str) -> tuple[float, float, list[UnattributedGroup]]:
        k = len(runs)
        total = sum(t for r in runs for _, _, t, _, _ in r.outside) / k
        var = 0.0
        merged: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for r in runs:
            for kernel, n, t, m2, why in r.outside:
                var += r.variance(_Agg(n, t, m2)) / (k * k)
                merged[(kernel, why)][0] += n / k
                merged[(kernel, why)][1] += t / k
        groups = [UnattributedGroup(name, kernel, round(n), t, why) for (kernel, why), (n, t) in sorted(merged.items())]
        return total, var, groups

    tb, vb, gb = side(runs_b, "best")
    tc, vc, gc = side(runs_c, "cand")
    var = vb + vc + floor * floor * (tb * tb + tc * tc)
    grew = tc > tb and (tc - tb) > z * math.sqrt(var)
    return Unattributed(tb, tc, grew, tuple(gb + gc))


def _fallback(bests: list[ProfileSummary], cands: list[ProfileSummary], confidence: float,
              run_noise_pct: float) -> ClassComparison:
    """No ranges on either side: the whole run's target kernels, as `model.compare`."""
    b, c = bests[0], cands[0]
    old = compare(b, c)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    floor = run_noise_pct / 100.0
    half = z * math.sqrt(2.0 * floor * floor)
    why = next((s.ranges_source[len("none"):].lstrip(": ") for s in (b, c) if s.ranges_source.startswith("none")),
               "")
    regex = f"; target kernels `{b.kernel_regex}`" if b.kernel_regex else ""
    change = ClassChange(
        ALL_CLASSES, old.best_per_call_ns, old.cand_per_call_ns, old.ratio,
        math.exp(math.log(old.ratio) - half), math.exp(math.log(old.ratio) + half),
        kernels=tuple(ClassKernel(k.name, (k.best_avg_ns or 0.0) * k.best_calls / max(old.best_calls, 1),
                                  (k.cand_avg_ns or 0.0) * k.cand_calls / max(old.cand_calls, 1),
                                  k.best_calls, k.cand_calls, True) for k in old.kernels),
        appeared=tuple(k.name for k in old.kernels if k.best_calls == 0),
        disappeared=tuple(k.name for k in old.kernels if k.cand_calls == 0),
    )
    return ClassComparison(
        per_class=False,
        classes=(change,),
        unattributed=Unattributed(0.0, 0.0, False),
        confidence=confidence,
        noise=(f"whole run: the {run_noise_pct:g}% run-to-run term only ([profile].run_noise_pct; without "
               f"ranges a kernel's launches mix shapes, their spread is no noise measure); {old.basis}"),
        note=NO_RANGES_NOTE + (f" ({why})" if why else "") + regex,
        profiles=(len(bests), len(cands)),
        kernel_regex=b.kernel_regex,
    )


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


# ---------------------------------------------------------------------------------------
# Agreement with the bench


class BenchClass(Protocol):
    """What `agrees` reads of the bench's per-class result (decide.ClassResult has it)."""

    @property
    def cls(self) -> str: ...
    @property
    def verdict(self) -> str: ...
    @property
    def ratio(self) -> float: ...
    @property
    def lo(self) -> float: ...
    @property
    def hi(self) -> float: ...


AGREES, DISAGREES, CANNOT_TELL, NOT_JUDGED = "agrees", "disagrees", "cannot_tell", "not_judged"


@dataclass(frozen=True)
class ClassAgreement:
    cls: str
    status: str
    """agrees | disagrees | cannot_tell | not_judged (the bench reached no verdict on it)."""
    bench_verdict: str
    bench_ratio: float | None
    bench_lo: float | None
    bench_hi: float | None
    profiler_ratio: float | None
    profiler_lo: float | None
    profiler_hi: float | None
    reason: str

    def numbers(self) -> str:
        """'bench -3.70% [-5.00%, -2.40%], profiler +1.00% [+0.60%, +1.40%]'"""
        return (f"bench {_pct(self.bench_ratio)} {_iv(self.bench_lo, self.bench_hi)}, "
                f"profiler {_pct(self.profiler_ratio)} {_iv(self.profiler_lo, self.profiler_hi)}")


@dataclass(frozen=True)
class Agreement:
    classes: tuple[ClassAgreement, ...]
    per_class: bool
    note: str = ""
    problems: tuple[str, ...] = ()

    @property
    def disagrees(self) -> bool:
        """True when the candidate must go to review: some class disagrees."""
        return any(c.status == DISAGREES for c in self.classes)

    def reason(self) -> str:
        """One line for the verdict: each disagreeing class with both numbers and why."""
        parts = [f"{c.cls}: {c.numbers()} ({c.reason})" for c in self.classes if c.status == DISAGREES]
        text = "profiler disagrees on " + "; ".join(parts) if parts else "profiler agrees"
        return text + (f" [{self.note}]" if self.note else "")

    def summary_line(self) -> str:
        parts = [f"{c.cls} {c.status.replace('_', ' ')} ({_pct(c.profiler_ratio)})" for c in self.classes
                 if c.status != NOT_JUDGED]
        return "; ".join(parts) + (f" [{self.note}]" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Agreement:
        known = {f.name for f in fields(ClassAgreement)}
        return cls(
            classes=tuple(ClassAgreement(**{k: v for k, v in c.items() if k in known}) for c in data["classes"]),
            per_class=bool(data["per_class"]),
            note=str(data.get("note", "")),
            problems=tuple(data.get("problems", ())),
        )


def agrees(bench_classes: Iterable[BenchClass], comparison: ClassComparison, *,
           min_effect_pct: float = 1.0) -> Agreement:
    """Per class: does the profiler's change agree with the bench's verdict?

    With e = min_effect_pct, the profiler's interval [lo, hi] for the class's ratio and the
    bench's [b_lo, b_hi]:
    - bench improved: agrees when hi < 1 (the profiler sees a gain); disagrees when lo > 1
      (it sees a loss), lo > 1/(1+e) (it rules out the gain of e the bench claims), or
      lo > b_hi (its interval lies wholly above the bench's: it rules out the gain the bench
      measured, whether it straddles 1 or sees a smaller gain of its own: a lying timer);
    - bench regressed: the mirror image (agrees when lo > 1; disagrees when hi < 1, hi < 1+e
      or hi < b_lo);
    - bench tied: agrees when [lo, hi] lies within [1/(1+e), 1+e]; disagrees when lo > 1+e
      (the profiler sees a loss beyond e the bench missed);
    - otherwise, or with too wide an interval: cannot_tell; no bench verdict: not_judged.
    Only intervals decide, so another class's noise never makes a class disagree. A class
    with problems (a config missing on one side, range openings that differ) and every
    class when a problem holds for all (ranges on one side only, work outside the ranges
    grown beyond noise) cannot be confirmed: an improved class then disagrees, others
    cannot tell. In the fallback (no ranges) the whole-run change stands for every class,
    and it cannot refute a class when the bench's classes did not all move alike."""
    bench = list(bench_classes)
    e = min_effect_pct / 100.0
    up, down = 1.0 + e, 1.0 / (1.0 + e)
    changes = comparison.by_class()
    uniform = len({b.verdict for b in bench}) <= 1
    out = []
    for b in sorted(bench, key=lambda x: x.cls):
        ch = changes.get(ALL_CLASSES) if not comparison.per_class else changes.get(b.cls)
        ratio, lo, hi = (ch.ratio, ch.lo, ch.hi) if ch is not None else (None, None, None)
        problems = list(comparison.problems) + (list(ch.problems) if ch is not None else [])
        status, reason = _judge(b.verdict, lo, hi, up, down, e, bench=(_finite(b.lo), _finite(b.hi)))
        if ch is None:
            status, reason = (NOT_JUDGED if b.verdict not in _JUDGED else CANNOT_TELL,
                              "not profiled: no kernel in its configs' ranges on either side")
        elif problems and status != NOT_JUDGED:
            status = DISAGREES if b.verdict == "improved" else CANNOT_TELL
            reason = "; ".join(problems)
        elif not comparison.per_class and status == DISAGREES and not uniform:
            status, reason = CANNOT_TELL, f"{reason}, but the whole run cannot judge one class"
        out.append(ClassAgreement(b.cls, status, b.verdict, _finite(b.ratio), _finite(b.lo), _finite(b.hi),
                                  ratio, lo, hi, reason))
    return Agreement(tuple(out), comparison.per_class, comparison.note, comparison.problems)


_JUDGED = ("improved", "regressed", "tied")


def _judge(verdict: str, lo: float | None, hi: float | None, up: float, down: float, e: float, *,
           bench: tuple[float | None, float | None] = (None, None)) -> tuple[str, str]:
    """One class's agreement (see `agrees`); bench: the bench's interval (None: not finite)."""
    if verdict not in _JUDGED:
        return NOT_JUDGED, f"the bench's verdict is {verdict!r}"
    if lo is None or hi is None:
        return CANNOT_TELL, "the profiler has no interval"
    effect = f"{e * 100:g}%"
    b_lo, b_hi = bench
    above = b_hi is not None and lo > b_hi
    below = b_lo is not None and hi < b_lo
    smaller_gain = "the profiler's interval lies above the bench's: it rules out the gain the bench measured"
    smaller_loss = "the profiler's interval lies below the bench's: it rules out the loss the bench measured"
    if verdict == "improved":
        if hi < 1.0:
            return (DISAGREES, smaller_gain) if above else (AGREES, "the profiler sees a gain")
        if lo > 1.0:
            return DISAGREES, "the profiler sees a loss"
        if lo > down:
            return DISAGREES, f"the profiler rules out a gain of {effect}"
        if above:
            return DISAGREES, smaller_gain
        return CANNOT_TELL, "the profiler's interval is too wide to tell"
    if verdict == "regressed":
        if lo > 1.0:
            return (DISAGREES, smaller_loss) if below else (AGREES, "the profiler sees a loss")
        if hi < 1.0:
            return DISAGREES, "the profiler sees a gain"
        if hi < up:
            return DISAGREES, f"the profiler rules out a loss of {effect}"
        if below:
            return DISAGREES, smaller_loss
        return CANNOT_TELL, "the profiler's interval is too wide to tell"
    if lo > up:
        return DISAGREES, f"the profiler sees a loss beyond {effect}"
    if down <= lo and hi <= up:
        return AGREES, f"the profiler sees no change beyond {effect}"
    if hi < down:
        return CANNOT_TELL, f"the profiler sees a gain beyond {effect} the bench does not"
    return CANNOT_TELL, "the profiler's interval is too wide to tell"


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)

"""From paired samples to per-class results and a run verdict (DESIGN.md §5).

Per look (a process-level round, or one ab_command run) and per class, the sample is the
mean over the class's configs of log(cost ratio). Across looks, a t interval at the
policy's confidence with alpha split evenly over the looks that may be taken
(max_rounds - min_rounds + 1), so that stopping at the first decisive look keeps its
nominal error rate. Pure functions.
"""

from __future__ import annotations

import math
from collections import defaultdict

from engine.decide.model import ClassResult, Pair, Policy, Verdict, geomean
from engine.decide.stats import mean, stdev, t_quantile


def class_samples(pairs: list[Pair], policy: Policy) -> dict[str, list[float]]:
    """Per class, one log-ratio sample per (round, block): the mean over its configs."""
    cells: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in pairs:
        cells[p.cls][(p.round, p.block)].append(math.log(policy.cost_ratio(p.best, p.cand)))
    return {
        cls: [mean(v) for _, v in sorted(by_look.items())] for cls, by_look in sorted(cells.items())
    }


def class_result(cls: str, pairs: list[Pair], samples: list[float], policy: Policy) -> ClassResult:
    rounds = len({p.round for p in pairs})
    best = geomean([p.best for p in pairs])
    cand = geomean([p.cand for p in pairs])
    n = len(samples)
    m = mean(samples)
    looks = max(1, policy.max_rounds - policy.min_rounds + 1)
    alpha = (1.0 - policy.confidence) / looks
    if n >= 2:
        s = stdev(samples)
        half = t_quantile(1.0 - alpha / 2.0, n - 1) * s / math.sqrt(n) if s > 0 else 0.0
    else:
        half = math.inf
    lo, hi = m - half, m + half
    eff = math.log1p(policy.min_effect_pct / 100.0)
    if rounds < policy.min_rounds:
        verdict = "undecided"
    elif hi < 0 and -m >= eff:
        verdict = "improved"
    elif lo > 0 and m >= eff:
        verdict = "regressed"
    elif lo > -eff and hi < eff:
        verdict = "tied"
    else:
        verdict = "undecided"
    return ClassResult(cls, rounds, n, best, cand, math.exp(m), math.exp(lo), math.exp(hi), verdict)


def evaluate(
    pairs: list[Pair],
    policy: Policy,
    *,
    target_class: str | None = None,
    gpu_seconds: float = 0.0,
    floors: dict[str, float] | None = None,
    previous_subthreshold_gain: bool = False,
) -> Verdict:
    """The verdict after the looks in `pairs`; kind "undecided" asks for another round."""
    by_class: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_class[p.cls].append(p)
    samples = class_samples(pairs, policy)
    results = tuple(class_result(c, by_class[c], samples[c], policy) for c in sorted(by_class))
    rounds = len({p.round for p in pairs})
    out_of_budget = rounds >= policy.max_rounds or gpu_seconds >= policy.budget_gpu_s

    def verdict(kind: str, reason: str, *flags: str) -> Verdict:
        return Verdict(kind, reason, results, rounds, gpu_seconds, tuple(flags))

    if not results:
        return verdict("borderline", "no comparable samples", "no_samples")
    targets = [r for r in results if target_class is None or r.cls == target_class]
    if not targets:
        return verdict("borderline", f"target class {target_class!r} has no samples", "no_target")
    others = [r for r in results if r not in targets]

    fast = [r for r in results if r.ratio > 0 and 1.0 / r.ratio > policy.suspicious_speedup]
    if fast:
        return verdict("borderline", f"{fast[0].cls} is {1 / fast[0].ratio:.1f}x faster: suspicious", "suspicious_speedup")
    if floors:
        below = [p for p in pairs if p.config in floors and _beats_floor(p.cand, floors[p.config], policy)]
        if below:
            return verdict("borderline", f"{below[0].config} beats its roofline floor: suspicious", "faster_than_floor")

    undecided = [r for r in results if r.verdict == "undecided"]
    if undecided and not out_of_budget:
        return verdict("undecided", f"{len(undecided)} class(es) undecided after {rounds} rounds")

    regressed = [r for r in results if r.verdict == "regressed"]
    improved_targets = [r for r in targets if r.verdict == "improved"]
    bad_others = [r for r in others if r.delta_pct > policy.max_other_regression_pct and r.verdict == "regressed"]
    if regressed and any(r.verdict == "improved" for r in results):
        return verdict(
            "split",
            f"{', '.join(r.cls for r in results if r.verdict == 'improved')} improved while "
            f"{', '.join(r.cls for r in regressed)} regressed: specialise by dispatch",
        )
    if any(r.verdict == "regressed" for r in targets):
        worst = max(targets, key=lambda r: r.ratio)
        return verdict("regression", f"{worst.cls} slower by {worst.delta_pct:+.2f}%")
    if improved_targets and len(improved_targets) == len(targets) and not bad_others:
        gain = min(improved_targets, key=lambda r: r.ratio)
        return verdict("keep", f"{gain.cls} faster by {gain.delta_pct:+.2f}% (all targets improved)")
    if all(r.verdict == "tied" for r in targets) and not regressed:
        return verdict("tie", f"every target class within ±{policy.min_effect_pct}%")
    sub = [r for r in targets if r.hi < 1.0]
    if sub and not regressed:
        if policy.two_in_a_row and previous_subthreshold_gain:
            return verdict("keep", "a same-direction sub-threshold gain twice in a row (policy)", "two_in_a_row")
        return verdict("borderline", f"significant gain smaller than {policy.min_effect_pct}%", "subthreshold_gain")
    return verdict("borderline", f"undecided after {rounds} rounds", "undecided_at_max_rounds")


def _beats_floor(value: float, floor: float, policy: Policy) -> bool:
    return value < floor if policy.direction == "min" else value > floor

"""Monte Carlo of the run's pooled spread ([decide].pooled_noise) when an earlier decision of the
run was much noisier than the rest: kopt's pool (`verdict.pooled_spreads`: every earlier
decision, less the looks each one dropped) against one that leaves such a decision out (a
decision whose spread exceeds the rest's by the F test a decision's own spread is held to,
SPREAD_F_ALPHA). Not adopted (2026-12-04): the hostile review of the pool
(tests/security/test_review_s27_hostile.py, "spiked looks shrink the pool no further than a
steady candidate") fails with it: earlier candidates whose spikes the ESD test keeps in some
decisions and drops (with a natural tail look) in others are left out where kept, so the pool is
made of the decisions biased low: 0.86-0.89 of a steady candidate's, under that test's bound of
0.9 (also with the F test split over the decisions, Bonferroni). It shrinks the pool an attacker
may shrink; the looks it saves (below) are not worth that.

On the H200 (docs/h100-wave3/part35) one decision with a large change (wide +29%, a split:
1.38% a look on 2 degrees of freedom, the others 0.01-0.22%) made the pool 0.633% a look, and a
later keep's untouched class took 10 looks to rule out a 1% slowdown that its own looks (0.25%)
would have ruled out in about half as many.

    python -m experiments.pooled_spread_sim                 # 800 trials a cell, seed 1
    python -m experiments.pooled_spread_sim --trials 3000

A trial is a run: PREV earlier decisions of two classes (two configs each, paired ABBA looks,
3-6 looks each), each one with a chance `--large-p` of a large change in class a whose
candidate's looks are `--large-noise` times noisier; then the decision under test, decided look
by look with kopt's `evaluate` and each pool. Per-run noise `--sigma` a side (0.25%: the H200's
served looks). The decision under test is one of:

  aa          no change in either class (a tie is right; anything else is a false verdict)
  aa-noisy    no change, the candidate's looks 3x noisier in class a (a candidate whose
              timing wanders: the case a too-small pool would call wrongly)
  gain2       class a 2% faster (its target), class b untouched (a keep is right)
  gain3-noisy class a 3% faster with 2x noisier looks, b untouched

Stdlib only (kopt's decide room), one process.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from kopt_supervisor.engine.decide import f_quantile
from kopt_supervisor.engine.decide.estimate import (
    SPREAD_F_ALPHA,
    Pair,
    Policy,
    Spread,
    class_samples,
    drop_outliers,
    residual_ss,
)
from kopt_supervisor.engine.decide.verdict import evaluate, judged_pairs, pooled_spreads

CLASSES = ("a", "b")
CONFIGS = 2
PREV = 6
SCENARIOS = {
    # name: (true ratio per class, candidate noise factor per class, target class)
    "aa": ({"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, None),
    "aa-noisy": ({"a": 1.0, "b": 1.0}, {"a": 3.0, "b": 1.0}, None),
    "gain2": ({"a": 0.98, "b": 1.0}, {"a": 1.0, "b": 1.0}, "a"),
    "gain3-noisy": ({"a": 0.97, "b": 1.0}, {"a": 2.0, "b": 1.0}, "a"),
}


def leave_noisier_out(
    decisions: Iterable[Sequence[Pair]], policy: Policy, guard_configs: frozenset[str] = frozenset()
) -> dict[str, Spread]:
    """`verdict.pooled_spreads`, leaving out, one at a time and the largest first, a decision
    whose spread exceeds the rest's by the F test at SPREAD_F_ALPHA (the test a decision's own
    spread is held to against the pool). Not adopted: see the module's docstring."""
    parts: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for pairs in decisions:
        judged = judged_pairs(list(pairs), guard_configs)
        for cls, samples in class_samples(judged, policy).items():
            kept, _ = drop_outliers([x for x in samples if not x.flagged])
            s, d = residual_ss(kept)
            if d > 0:
                parts[cls].append((s, d))
    out = {}
    for cls, ps in parts.items():
        ps = list(ps)
        while len(ps) > 1:
            total_s, total_d = sum(s for s, _ in ps), sum(d for _, d in ps)
            over = [
                ((s / d) / ((total_s - s) / (total_d - d)), i)
                for i, (s, d) in enumerate(ps)
                if total_s - s > 0
                and s / d > (total_s - s) / (total_d - d) * f_quantile(1 - SPREAD_F_ALPHA, d, total_d - d)
            ]
            if not over:
                break
            ps.pop(max(over)[1])
        out[cls] = Spread(sum(s for s, _ in ps) / sum(d for _, d in ps), sum(d for _, d in ps))
    return out


def look(rng: random.Random, r: int, ratio: dict[str, float], noisy: dict[str, float], sigma: float) -> list[Pair]:
    """One paired look: per class and config, best's and the candidate's value (log-normal)."""
    order = "AB" if r % 2 == 0 else "BA"
    out = []
    for cls in CLASSES:
        for i in range(CONFIGS):
            base = 100.0 * (i + 1)
            best = base * math.exp(sigma * rng.gauss(0, 1))
            cand = base * ratio[cls] * math.exp(sigma * noisy[cls] * rng.gauss(0, 1))
            out.append(Pair(f"{cls}{i}", cls, best, cand, r, order))
    return out


def earlier(rng: random.Random, sigma: float, large_p: float, large_noise: float) -> list[list[Pair]]:
    decisions = []
    for _ in range(PREV):
        large = rng.random() < large_p
        ratio = {"a": rng.choice((0.55, 0.7, 1.3)) if large else 1.0, "b": 1.0}
        noisy = {"a": large_noise if large else 1.0, "b": 1.0}
        n = rng.randint(3, 6)
        decisions.append([p for r in range(n) for p in look(rng, r, ratio, noisy, sigma)])
    return decisions


def decide(
    rng: random.Random, scenario: str, spreads: dict[str, Spread], policy: Policy, sigma: float
) -> tuple[str, int]:
    ratio, noisy, target = SCENARIOS[scenario]
    pairs: list[Pair] = []
    for r in range(policy.max_rounds):
        pairs += look(rng, r, ratio, noisy, sigma)
        if r + 1 >= policy.min_rounds:
            v = evaluate(pairs, policy, target_class=target, spreads=spreads)
            if v.final:
                return v.kind, r + 1
    raise AssertionError("evaluate is final at max_rounds")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=800)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sigma", type=float, default=0.0025)
    ap.add_argument("--large-p", type=float, default=0.3)
    ap.add_argument("--large-noise", type=float, default=5.0)
    a = ap.parse_args(argv)
    policy = Policy(pooled_noise=True, max_rounds=12)  # the demos' [decide] (docs/h100-wave3/part35)
    print(
        f"# {a.trials} trials a cell, seed {a.seed}; sigma {a.sigma:.2%} a side and run; "
        f"{PREV} earlier decisions, each with a large change (noise x{a.large_noise:g}) at p={a.large_p}"
    )
    print("| decision | pool | verdicts | right % | looks mean | looks median |")
    print("|---|---|---|---|---|---|")
    for scenario in SCENARIOS:
        for name, rule in (("kopt's", pooled_spreads), ("noisier left out", leave_noisier_out)):
            kinds: Counter[str] = Counter()
            looks = []
            for t in range(a.trials):  # each trial's runs and looks the same for both pools
                prev = earlier(random.Random(f"{a.seed}/{scenario}/{t}/prev"), a.sigma, a.large_p, a.large_noise)
                rng = random.Random(f"{a.seed}/{scenario}/{t}/looks")
                kind, n = decide(rng, scenario, rule(prev, policy), policy, a.sigma)
                kinds[kind] += 1
                looks.append(n)
            right = kinds["tie"] if scenario.startswith("aa") else kinds["keep"]
            shown = ", ".join(f"{k} {v}" for k, v in kinds.most_common())
            print(
                f"| {scenario} | {name} | {shown} | {100 * right / a.trials:.1f} | "
                f"{statistics.mean(looks):.2f} | {statistics.median(looks):g} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

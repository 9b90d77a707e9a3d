"""Replay a run's decisions look by look with the noise pooled over the run's other decisions.

A served look's noise on the H200 is now 0.14-0.35% per config (the spin after the flush,
docs/h100-wave3/part22), yet a comment-only decision still takes 5-9 looks and a keep of a
small gain 7: each decision estimates its class's spread from its own few looks (t with
n - 1 or n - 2 degrees of freedom), at an error rate spent over up to max_rounds looks
(`alpha_at_look`: 0.01 x k / 75 at look k of 3..12), so t's quantile is ~8-12 at looks 5-7.

This script asks what a decision would cost if a class's spread came instead from the run's
other decisions (leave-one-out: the residuals around each decision's order means, pooled),
used only when the decision's own spread is not larger (an F test at 1%), else its own.
It replays, with kopt's own `evaluate` and only `estimate.interval` replaced, every decision
of a run.db as it was measured (the same pairs, look by look) and prints per decision the
looks and verdict kopt took, the looks and verdict the pooled rule would have taken, and
whether the replay of kopt's rule reproduces what kopt did (the replay's check).

    python3 -m experiments.pooled_noise_replay /work/device-results/s26-call2/part2/x/raw/ws_wave3-aa

It reads the workspace's run.db, kopt.toml, records.json and each version's
logs/vN/eval_r0_best.csv (for the production column). Nothing is written.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sqlite3
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.decide import estimate, t_quantile, verdict
from kopt_supervisor.engine.decide.estimate import Interval, Pair, Policy, Sample
from kopt_supervisor.engine.decide.verdict import evaluate

F_ALPHA = 0.01
"""The decision's own spread replaces the pooled one when an F test at this level says it is
larger (a candidate, or a process pair, noisier than the run so far)."""


def read_pairs(db: Path, stage: str = "eval") -> dict[int, list[Pair]]:
    """version -> its decision's pairs, as the engine builds them from the samples table."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    cells: dict[tuple[int, int, int, str], dict[str, object]] = defaultdict(dict)
    for version, rnd, block, side, config, cls, value, order, flagged in con.execute(
        "select version, round, block, side, config, cls, value, ord, flagged from samples where stage = ?",
        (stage,),
    ):
        cell = cells[(version, rnd, block, config)]
        cell[side] = value
        cell["cls"], cell["order"] = cls, order or "AB"
        cell["flagged"] = bool(cell.get("flagged")) or bool(flagged)
    out: dict[int, list[Pair]] = defaultdict(list)
    for (version, rnd, block, config), c in sorted(cells.items()):
        if "best" in c and "cand" in c:
            out[version].append(
                Pair(
                    config,
                    str(c["cls"]),
                    float(c["best"]),  # type: ignore[arg-type]
                    float(c["cand"]),  # type: ignore[arg-type]
                    rnd,
                    str(c["order"]),
                    block,
                    flagged=bool(c["flagged"]),
                )
            )
    return dict(out)


def guard_configs(ws: Path, config_cols: list[str], version: int) -> frozenset[str]:
    """Configs whose `prod` column is 0 in the version's first look (the regression grid)."""
    path = ws / "logs" / f"v{version}" / "eval_r0_best.csv"
    if not path.is_file():
        return frozenset()
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return frozenset(
        ",".join(f"{k}={r[k]}" for k in config_cols) for r in rows if r.get("prod", "1").strip() in ("0", "0.0")
    )


def as_judged(pairs: list[Pair], guard: frozenset[str]) -> list[Pair]:
    """The pairs in the classes `evaluate` judges them in (`verdict.voting_classes`: the
    guard's configs in GUARD_CLASS)."""
    votes = verdict.voting_classes({p.config: p.cls for p in pairs}, guard)
    return [dataclasses.replace(p, cls=votes[p.config]) for p in pairs]


def residuals(samples: list[Sample]) -> tuple[float, int]:
    """Sum of squares around the order means, and its degrees of freedom (as
    `_balanced_mean_se` computes them once each order has 3 samples)."""
    by_order: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        by_order[s.order].append(s.value)
    ss = sum((v - statistics.fmean(g)) ** 2 for g in by_order.values() for v in g)
    return ss, len(samples) - len(by_order)


def f_quantile(p: float, d1: int, d2: int) -> float:
    """The F distribution's p quantile, by bisection on its CDF (regularised incomplete beta
    through math.lgamma and a continued fraction): the standard library has no F."""

    def betacf(a: float, b: float, x: float) -> float:
        qab, qap, qam = a + b, a + 1.0, a - 1.0
        c, d = 1.0, 1.0 - qab * x / qap
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        h = d
        for m in range(1, 300):
            m2 = 2 * m
            aa = m * (b - m) * x / ((qam + m2) * (a + m2))
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + aa / c if abs(c) > 1e-300 else 1.0 + aa / 1e-300
            h *= d * c
            aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + aa / c if abs(c) > 1e-300 else 1.0 + aa / 1e-300
            de = d * c
            h *= de
            if abs(de - 1.0) < 1e-12:
                break
        return h

    def ibeta(a: float, b: float, x: float) -> float:
        if x <= 0.0:
            return 0.0
        if x >= 1.0:
            return 1.0
        lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
        if x < (a + 1.0) / (a + b + 2.0):
            return math.exp(lbt) * betacf(a, b, x) / a
        return 1.0 - math.exp(lbt) * betacf(b, a, 1.0 - x) / b

    def cdf(f: float) -> float:
        return ibeta(d1 / 2.0, d2 / 2.0, d1 * f / (d1 * f + d2))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2.0


@contextmanager
def pooled_intervals(prior: dict[str, tuple[float, int]]) -> Iterator[None]:
    """kopt's `evaluate` with each class's spread from `prior` (its pooled variance and degrees
    of freedom), unless the decision's own residual variance is larger by the F test. Only
    `estimate.interval` changes; `verdict.estimate_class` is wrapped to say whose class it is."""
    real_interval: Callable[..., Interval] = estimate.interval
    real_estimate_class = verdict.estimate_class
    current: list[str] = []

    def interval(samples: list[Sample], alpha: float, unit: str = "sample") -> Interval:
        own = real_interval(samples, alpha, unit)
        if not current or len(samples) < 2 or current[-1] not in prior:
            return own
        var, df = prior[current[-1]]
        ss, own_df = residuals(samples)
        if df < 1 or (own_df >= 1 and ss / own_df > var * f_quantile(1.0 - F_ALPHA, own_df, df)):
            return own
        by_order: dict[str, int] = defaultdict(int)
        for s in samples:
            by_order[s.order] += 1
        inv = sum(1.0 / k for k in by_order.values()) / len(by_order) ** 2
        half = t_quantile(1.0 - alpha / 2.0, df) * math.sqrt(var * inv)
        return Interval(own.mean, own.mean - half, own.mean + half, len(samples), unit)

    def estimate_class(cls: str, *args: Any, **kwargs: Any) -> Any:
        current.append(cls)
        try:
            return real_estimate_class(cls, *args, **kwargs)
        finally:
            current.pop()

    estimate.interval = interval  # type: ignore[assignment]
    verdict.estimate_class = estimate_class  # type: ignore[assignment]
    try:
        yield
    finally:
        estimate.interval = real_interval  # type: ignore[assignment]
        verdict.estimate_class = real_estimate_class  # type: ignore[assignment]


def replay(
    pairs: list[Pair],
    policy: Policy,
    target: str | None,
    guard: frozenset[str],
    prior: dict[str, tuple[float, int]],
    looks: int,
) -> tuple[str, int, Any]:
    """The decision look by look from min_rounds on, with kopt's rule (`prior` empty) or the
    pooled one: its kind, the look it ended at, and its verdict there."""
    v = None
    for k in range(policy.min_rounds, looks + 1):
        done = [p for p in pairs if p.round < k]
        with pooled_intervals(prior):
            v = evaluate(done, policy, target_class=target, guard_configs=guard)
        if v.final:
            return v.kind, k, v
    return "undecided", looks, v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workspace", type=Path, help="a run's workspace folder (run.db, kopt.toml, records.json, logs/)")
    ap.add_argument("--stage", default="eval")
    a = ap.parse_args(argv)
    ws: Path = a.workspace
    cfg = load_config(ws / "kopt.toml", past=True)
    policy = Policy.from_config(cfg.decide, cfg.target.direction)
    records = {r["version"]: r for r in json.loads((ws / "records.json").read_text())}
    decisions = read_pairs(ws / "run.db", a.stage)
    cols = list(cfg.target.config)

    # each decision's residual sum of squares per class, over all its looks (the pool), its
    # classes as `evaluate` forms them (the guard's configs in GUARD_CLASS)
    guards = {version: guard_configs(ws, cols, version) for version in decisions}
    pool: dict[int, dict[str, tuple[float, int]]] = {}
    for version, pairs in decisions.items():
        per_class = estimate.class_samples(as_judged(pairs, guards[version]), policy)
        pool[version] = {cls: residuals(s) for cls, s in per_class.items()}

    print(
        f"# {ws}: {len(decisions)} decisions ({a.stage}); policy: confidence {policy.confidence}, "
        f"min_effect {policy.min_effect_pct}%, rounds {policy.min_rounds}..{policy.max_rounds}"
    )
    print("| v | kopt: status (looks) | replay of kopt's rule | pooled rule | per-class pooled sd % (df) |")
    print("|---|---|---|---|---|")
    same = 0
    saved: list[int] = []
    differ: list[str] = []
    for version, pairs in sorted(decisions.items()):
        rec = records.get(version, {})
        looks = max(p.round for p in pairs) + 1
        guard = guards[version]
        target = rec.get("target_class")
        prior: dict[str, tuple[float, int]] = {}
        for cls in {p.cls for p in as_judged(pairs, guard)}:
            ss = sum(pool[v].get(cls, (0.0, 0))[0] for v in pool if v != version)
            df = sum(pool[v].get(cls, (0.0, 0))[1] for v in pool if v != version)
            prior[cls] = (ss / df if df else math.inf, df)

        kind_k, looks_k, _ = replay(pairs, policy, target, guard, {}, looks)
        kind_p, looks_p, vp = replay(pairs, policy, target, guard, prior, looks)
        if kind_p != kind_k and vp is not None:
            differ.append(f"v{version}: kopt {kind_k}, pooled {kind_p} at look {looks_p}: {vp.reason}")
        same += looks_k == looks
        saved.append(looks - looks_p)
        sds = ", ".join(
            f"{c.split('=')[-1]} {100 * math.sqrt(prior[c][0]):.2f} ({prior[c][1]})"
            for c in sorted(prior)
            if prior[c][1]
        )
        print(f"| v{version} | {rec.get('status')} ({looks}) | {kind_k} ({looks_k}) | {kind_p} ({looks_p}) | {sds} |")
    print(f"\nkopt's rule replayed: the same look count in {same} of {len(decisions)} decisions")
    if saved:
        print(f"looks saved by the pooled rule: median {statistics.median(saved)}, total {sum(saved)}")
    for line in differ:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

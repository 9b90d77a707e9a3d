"""Simulate thousands of keep/discard decisions: kopt's decision against the naive 1% rule.

    python -m experiments.simulate_decisions                       # the default table (all models)
    python -m experiments.simulate_decisions --noise spike --sigma 2.5 --trials 4000 --seed 7
    python -m experiments.simulate_decisions --json out.json       # also write every figure
    python -m experiments.simulate_decisions --blocks 8 --sigma 3  # the ab_command path

The Monte Carlo check of the decision procedure (engine/decide/), run from the repository's
root; it runs its trials in worker processes, so it lives beside the pure room, not in it.

Each trial is one decision between a best tree and a candidate whose true cost ratio is
known (no change; gains of 0.5, 1, 2, 5%; regressions of 1, 8 and 10%). Each bench run's value is
the true value times a noise factor drawn from a model shaped like GPU timings:

  normal  log-normal, sigma per run (sigma = 1%: two runs of the same tree differ by more
          than 1% about half the time)
  heavy   Student's t with 3 degrees of freedom in the log, scaled to the same sigma:
          rare large deviations both ways
  drift   normal plus a linear drift of --drift % per run (sign random per trial), as a
          GPU warming up or a clock settling: 24 runs at 0.1% drift by 2.4%
  spike   normal plus, with probability --spike-p per run, a run 20% slower (a throttling
          spike or a stray process on the GPU)

kopt runs paired rounds in ABBA order (AB, BA, AB, ...) and calls `evaluate` after each
one, as the loop does; with --blocks B each look is one ab_command run of B paired blocks
(AB, BA, AB, ... within the run), optionally with a per-process offset (--look-sigma). The naive rule reads best once, then the candidate once, and keeps
when the candidate is more than 1% faster; its "twice in a row" variant (the reference
program's) also keeps when a sub-threshold gain is followed by a second reading pair that
shows a gain again; "confirm" keeps only when two reading pairs both show > 1%.

A row's "kopt review" is the share sent to the engineer (borderline). Stdlib only; cells
run in parallel over the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass

from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.verdict import evaluate

NOISE_MODELS = ("normal", "heavy", "drift", "spike")
SCENARIOS: tuple[tuple[str, float, str], ...] = (
    # (label, true cost ratio candidate/best, the target for kopt's keep rate)
    ("no change", 1.000, "kept <= 1%"),
    ("0.5% gain", 0.995, ""),
    ("1% gain", 0.990, "kept or review >= 80%"),
    ("2% gain", 0.980, "kept >= 95%"),
    ("5% gain", 0.950, ""),
    ("1% regression", 1.010, "kept <= 0.1%"),
    ("8% regression", 1.080, "never a tie"),
    ("10% regression", 1.100, "never a tie"),
)
SPIKE_SIZE = 0.20


@dataclass(frozen=True)
class Noise:
    model: str
    sigma: float
    """Per-run noise as a fraction (0.01 = 1%)."""
    drift: float = 0.001
    """Drift per run as a fraction (model "drift")."""
    spike_p: float = 0.02
    """Chance that a run is 20% slower (model "spike")."""
    blocks: int = 1
    """Paired blocks per look: 1 is the process-level path (one AB or BA round per look);
    more is the ab_command path (one process times that many blocks, ABBA order)."""
    look_sigma: float = 0.0
    """ab_command path: a per-process offset of the candidate (log-normal sigma), the same
    for every block of one look."""


def run_noise(noise: Noise, rng: random.Random) -> Callable[[int], float]:
    """A trial's noise: run index -> the factor its measured value is multiplied by."""
    sign = rng.choice((-1.0, 1.0))

    def factor(t: int) -> float:
        if noise.model == "heavy":
            chi2 = rng.gammavariate(1.5, 2.0)  # chi-square with 3 degrees of freedom
            z = rng.gauss(0.0, 1.0) / math.sqrt(chi2 / 3.0) / math.sqrt(3.0)
        else:
            z = rng.gauss(0.0, 1.0)
        f = math.exp(noise.sigma * z)
        if noise.model == "drift":
            f *= 1.0 + sign * noise.drift * t
        if noise.model == "spike" and rng.random() < noise.spike_p:
            f *= 1.0 + SPIKE_SIZE
        return f

    return factor


def kopt_trial(ratio: float, noise: Noise, policy: Policy, rng: random.Random) -> tuple[str, int]:
    """One decision by kopt: (verdict kind, looks it took)."""
    factor = run_noise(noise, rng)
    pairs: list[Pair] = []
    best_true, cand_true = 100.0, 100.0 * ratio
    t = 0
    for r in range(policy.max_rounds):
        offset = math.exp(noise.look_sigma * rng.gauss(0.0, 1.0)) if noise.look_sigma else 1.0
        for b in range(noise.blocks):
            order = "AB" if (r if noise.blocks == 1 else b) % 2 == 0 else "BA"
            t_best, t_cand = (t, t + 1) if order == "AB" else (t + 1, t)
            t += 2
            pairs.append(
                Pair("cfg", "all", best_true * factor(t_best), cand_true * offset * factor(t_cand), r, order, b)
            )
        if r + 1 >= policy.min_rounds:
            v = evaluate(pairs, policy)
            if v.final:
                return v.kind, r + 1
    raise AssertionError("evaluate must be final at max_rounds")


def naive_trial(ratio: float, noise: Noise, rng: random.Random, threshold: float = 0.01) -> tuple[bool, bool, bool]:
    """The naive rule on fresh readings: (keep, keep twice-in-a-row, keep confirmed)."""
    factor = run_noise(noise, rng)
    g1 = 1.0 - ratio * factor(1) / factor(0)
    g2 = 1.0 - ratio * factor(3) / factor(2)
    keep = g1 > threshold
    twice = keep or (g1 > 0 and g2 > 0)
    confirm = keep and g2 > threshold
    return keep, twice, confirm


@dataclass
class Cell:
    model: str
    scenario: str
    ratio: float
    trials: int
    kopt: dict[str, float]
    """Share of trials per verdict kind."""
    kopt_rounds: float
    naive: float
    naive_twice: float
    naive_confirm: float

    @property
    def kopt_keep(self) -> float:
        return self.kopt.get("keep", 0.0)

    @property
    def kopt_review(self) -> float:
        return self.kopt.get("borderline", 0.0)

    @property
    def kopt_tie(self) -> float:
        return self.kopt.get("tie", 0.0)

    @property
    def kopt_regression(self) -> float:
        """Counted as a regression: measured, or likely (estimated beyond min_effect_pct at the final look)."""
        return self.kopt.get("regression", 0.0) + self.kopt.get("likely_regression", 0.0)


def run_cell(args: tuple[Noise, str, float, int, int, Policy]) -> Cell:
    noise, label, ratio, trials, seed, policy = args
    rng = random.Random(f"{seed}:{noise.model}:{label}")
    kinds: dict[str, int] = {}
    rounds = 0
    naive = [0, 0, 0]
    for _ in range(trials):
        kind, r = kopt_trial(ratio, noise, policy, rng)
        kinds[kind] = kinds.get(kind, 0) + 1
        rounds += r
        for i, kept in enumerate(naive_trial(ratio, noise, rng)):
            naive[i] += kept
    return Cell(
        noise.model,
        label,
        ratio,
        trials,
        {k: v / trials for k, v in sorted(kinds.items())},
        rounds / trials,
        naive[0] / trials,
        naive[1] / trials,
        naive[2] / trials,
    )


def simulate(
    models: tuple[str, ...] = NOISE_MODELS,
    *,
    sigma: float = 0.01,
    trials: int = 1000,
    seed: int = 1,
    policy: Policy | None = None,
    drift: float = 0.001,
    spike_p: float = 0.02,
    blocks: int = 1,
    look_sigma: float = 0.0,
    scenarios: tuple[tuple[str, float, str], ...] = SCENARIOS,
    workers: int | None = None,
) -> list[Cell]:
    """Every (model, scenario) cell; deterministic for a given seed."""
    policy = policy or Policy()
    jobs = [
        (Noise(m, sigma, drift, spike_p, blocks, look_sigma), label, ratio, trials, seed, policy)
        for m in models
        for label, ratio, _ in scenarios
    ]
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        return [run_cell(j) for j in jobs]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(run_cell, jobs))


def table(cells: list[Cell], scenarios: tuple[tuple[str, float, str], ...] = SCENARIOS) -> str:
    """A markdown table: one row per (model, scenario), kopt beside the naive rules."""
    target = {label: t for label, _, t in scenarios}
    head = (
        "| noise | true change | kopt kept | kopt review | kopt tie | kopt regression (likely) | kopt rounds "
        "| naive 1% kept | naive twice-in-a-row kept | naive confirm kept | target (kopt) |"
    )
    lines = [head, "|" + "---|" * 11]
    for c in cells:
        likely = c.kopt.get("likely_regression", 0.0)
        lines.append(
            f"| {c.model} | {c.scenario} | {c.kopt_keep:.1%} | {c.kopt_review:.1%} | {c.kopt_tie:.1%} "
            f"| {c.kopt_regression:.1%} ({likely:.1%}) | {c.kopt_rounds:.1f} "
            f"| {c.naive:.1%} | {c.naive_twice:.1%} | {c.naive_confirm:.1%} | {target.get(c.scenario, '')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.simulate_decisions",
        description="kopt's decision vs the naive 1%% rule, simulated.",
    )
    ap.add_argument("--noise", default="all", help="normal, heavy, drift, spike, or all (default)")
    ap.add_argument("--sigma", type=float, default=1.0, help="per-run noise in %% (default 1.0)")
    ap.add_argument("--trials", type=int, default=1000, help="decisions per cell (default 1000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--drift", type=float, default=0.1, help="drift model: %% per run (default 0.1)")
    ap.add_argument("--spike-p", type=float, default=0.02, help="spike model: chance per run (default 0.02)")
    ap.add_argument(
        "--blocks",
        type=int,
        default=1,
        help="paired blocks per look: 1 = process-level rounds (default), more = the ab_command path",
    )
    ap.add_argument(
        "--look-sigma",
        type=float,
        default=0.0,
        help="ab_command path: per-process offset of the candidate in %% (default 0)",
    )
    ap.add_argument(
        "--pool-blocks",
        action="store_true",
        help="ab_command path: every block a sample (Policy.pool_blocks) instead of one mean per look",
    )
    ap.add_argument(
        "--scenario",
        default="all",
        help="comma-separated labels of the true changes to run (default all: "
        + ", ".join(label.replace("%", "%%") for label, _, _ in SCENARIOS)
        + ")",
    )
    ap.add_argument("--max-rounds", type=int, default=Policy.max_rounds)
    ap.add_argument("--min-rounds", type=int, default=Policy.min_rounds)
    ap.add_argument("--confidence", type=float, default=Policy.confidence)
    ap.add_argument("--min-effect", type=float, default=Policy.min_effect_pct, help="min_effect_pct")
    ap.add_argument("--workers", type=int, default=0, help="processes (default: one per core)")
    ap.add_argument("--json", default="", help="also write every cell to this JSON file")
    a = ap.parse_args(argv)
    models = NOISE_MODELS if a.noise == "all" else tuple(a.noise.split(","))
    bad = [m for m in models if m not in NOISE_MODELS]
    if bad:
        ap.error(f"--noise: unknown model {bad[0]!r} (choose from {', '.join(NOISE_MODELS)} or all)")
    scenarios = (
        SCENARIOS
        if a.scenario == "all"
        else tuple(sc for label in a.scenario.split(",") for sc in SCENARIOS if sc[0] == label.strip())
    )
    if a.scenario != "all" and len(scenarios) != len(a.scenario.split(",")):
        ap.error(f"--scenario: choose among {', '.join(label for label, _, _ in SCENARIOS)}")
    if a.trials < 1 or a.sigma < 0 or a.blocks < 1:
        ap.error("--trials and --blocks must be >= 1 and --sigma >= 0")
    policy = Policy(
        confidence=a.confidence,
        min_effect_pct=a.min_effect,
        min_rounds=a.min_rounds,
        max_rounds=a.max_rounds,
        budget_gpu_s=math.inf,
        pool_blocks=a.pool_blocks,
    )
    t0 = time.monotonic()
    cells = simulate(
        models,
        sigma=a.sigma / 100.0,
        trials=a.trials,
        seed=a.seed,
        policy=policy,
        drift=a.drift / 100.0,
        spike_p=a.spike_p,
        blocks=a.blocks,
        look_sigma=a.look_sigma / 100.0,
        scenarios=scenarios,
        workers=a.workers or None,
    )
    took = time.monotonic() - t0
    path = "process-level rounds" if a.blocks == 1 else f"ab_command looks of {a.blocks} blocks"
    if a.look_sigma:
        path += f" with a {a.look_sigma:g}% per-process offset"
    if a.blocks > 1:
        path += ", every block a sample" if a.pool_blocks else ", one sample per look"
    print(
        f"# {a.trials} decisions per row, {path}, per-run noise {a.sigma:g}%, seed {a.seed}, "
        f"min_rounds {policy.min_rounds}, max_rounds {policy.max_rounds}, confidence {policy.confidence:g}, "
        f"min_effect {policy.min_effect_pct:g}% ({took:.1f} s)"
    )
    print(table(cells, scenarios))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "seconds": took, "cells": [asdict(c) for c in cells]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Replay a run's decisions look by look with the noise pooled over the run's other decisions.

A served look's noise on the H200 is now 0.14-0.35% per config (the spin after the flush,
docs/h100-wave3/part22), yet a comment-only decision still takes 5-9 looks and a keep of a
small gain 7: each decision estimates its class's spread from its own few looks (t with
n - 1 or n - 2 degrees of freedom), at an error rate spent over up to max_rounds looks
(`alpha_at_look`: 0.01 x k / 75 at look k of 3..12), so t's quantile is ~8-12 at looks 5-7.

This script asks what a decision would cost if a class's spread came instead from the run's
other decisions (leave-one-out by default; `--earlier` takes the ones before each decision, as
the engine's [decide].pooled_noise does: `verdict.pooled_spreads`), used only when the
decision's own spread is not larger (an F test at 1%, `estimate.SPREAD_F_ALPHA`). It replays, with kopt's own `evaluate`, every decision of a
run.db as it was measured (the same pairs, look by look) and prints per decision the looks and
verdict kopt took, the looks and verdict the pooled rule would have taken, and whether the
replay of kopt's rule reproduces what kopt did (the replay's check).

    python3 -m experiments.pooled_noise_replay /work/device-results/s26-call2/part2/x/raw/ws_wave3-aa
    python3 -m experiments.pooled_noise_replay --earlier /work/device-results/s27-call2/part4/x/raw/ws_wave3-power

"Replay of kopt's rule" is the rule the run had: each decision's own spread, or (the run's
kopt.toml with pooled_noise on) the spread of the decisions before it.

It reads the workspace's run.db, kopt.toml, records.json and each version's
logs/vN/eval_r0_best.csv (for the production column). Nothing is written.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.decide.estimate import Pair, Policy, Spread, Verdict
from kopt_supervisor.engine.decide.verdict import evaluate, pooled_spreads
from kopt_supervisor.engine.loop.measure import pairs_of
from kopt_supervisor.engine.records import Stage
from kopt_supervisor.engine.store import Store


def read_pairs(db: Path, stage: str = "eval") -> dict[int, list[Pair]]:
    """version -> its decision's pairs, read as the engine reads them (`measure.pairs_of`)."""
    with Store(db, readonly=True) as store:
        ctx = SimpleNamespace(store=store)
        decisions = {row.version: pairs_of(ctx, row.version, Stage(stage)) for row in store.rows()}  # type: ignore[arg-type]
    return {v: ps for v, ps in decisions.items() if ps}


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


def replay(
    pairs: list[Pair],
    policy: Policy,
    target: str | None,
    guard: frozenset[str],
    spreads: dict[str, Spread] | None,
    looks: int,
) -> tuple[str, int, Verdict | None]:
    """The decision look by look from min_rounds on, with kopt's rule (`spreads` None) or the
    pooled one: its kind, the look it ended at, and its verdict there."""
    v = None
    for k in range(policy.min_rounds, looks + 1):
        done = [p for p in pairs if p.round < k]
        v = evaluate(done, policy, target_class=target, guard_configs=guard, spreads=spreads)
        if v.final:
            return v.kind, k, v
    return "undecided", looks, v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workspace", type=Path, help="a run's workspace folder (run.db, kopt.toml, records.json, logs/)")
    ap.add_argument("--stage", default="eval")
    ap.add_argument(
        "--earlier",
        action="store_true",
        help="the pooled rule pools the decisions before each one, as the engine does (default: leave-one-out)",
    )
    a = ap.parse_args(argv)
    ws: Path = a.workspace
    cfg = load_config(ws / "kopt.toml", past=True)
    policy = Policy.from_config(cfg.decide, cfg.target.direction)
    records = {r["version"]: r for r in json.loads((ws / "records.json").read_text())}
    decisions = read_pairs(ws / "run.db", a.stage)
    cols = list(cfg.target.config)

    guards = {version: guard_configs(ws, cols, version) for version in decisions}

    print(
        f"# {ws}: {len(decisions)} decisions ({a.stage}); policy: confidence {policy.confidence}, "
        f"min_effect {policy.min_effect_pct}%, rounds {policy.min_rounds}..{policy.max_rounds}"
    )
    rule = "pooled over the decisions before" if policy.pooled_noise else "each decision's own spread"
    print(f"kopt's rule in this run: {rule}; the pooled rule: {'earlier' if a.earlier else 'leave-one-out'}")
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
        before = pooled_spreads((ps for v, ps in decisions.items() if v < version), policy, guard)
        others = (ps for v, ps in decisions.items() if v != version)  # leave-one-out
        spreads = before if a.earlier else pooled_spreads(others, policy, guard)

        kopts = before if policy.pooled_noise else None  # the rule the run itself had
        kind_k, looks_k, _ = replay(pairs, policy, target, guard, kopts, looks)
        kind_p, looks_p, vp = replay(pairs, policy, target, guard, spreads, looks)
        if kind_p != kind_k and vp is not None:
            differ.append(f"v{version}: kopt {kind_k}, pooled {kind_p} at look {looks_p}: {vp.reason}")
        same += looks_k == looks
        saved.append(looks - looks_p)
        sds = ", ".join(
            f"{c.split('=')[-1]} {100 * math.sqrt(sp.var):.2f} ({sp.df})" for c, sp in sorted(spreads.items())
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

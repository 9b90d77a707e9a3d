"""One tree's profiles minutes apart, compared as kopt compares a keep's pair: how often the
profiler's 99% interval excludes no change when nothing changed, per run-to-run term
(docs/h100-wave3/part31-profiler-shows-half-h200.md; profiler.REUSED_RUN_NOISE_PCT).

A part4 run (experiments/h100_wave3.sh part4) tries one change from v0 again and again, so
every try profiles the same best tree, and the same candidate tree: its run folder's
profiles/v*/<side>/summary.json are profiles of one unchanged tree minutes apart. Replayed
here without a GPU, from a packed run folder (the run's raw/ws_<tag> in part4.tgz):

    python -m experiments.profile_drift_replay WS best cand [best_more cand_more] [--noise 0.3,0.6,0.8,1.0]

prints, per side and class, every ordered pair's estimate and interval at each run-to-run term,
then per class the count of intervals that exclude 1 and the median half-width.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path

from kopt_supervisor.engine.decide.verdict import voting_classes
from kopt_supervisor.engine.profile.classes import ConfigRef, compare_per_class, config_refs
from kopt_supervisor.engine.profile.summary import ProfileSummary
from kopt_supervisor.engine.store import Store


def baseline_refs(ws: Path) -> list[ConfigRef]:
    """The baseline's configs and the classes the decisions vote in, as the loop builds them."""
    with Store(ws / "run.db", readonly=True) as store:
        base = next(it for it in store.iterations() if it.version == 0)
    configs = base.record.get("configs") or {}
    return config_refs(configs, class_of=voting_classes({k: c["cls"] for k, c in configs.items()}, set()))


def side_profiles(ws: Path, side: str) -> dict[str, ProfileSummary]:
    return {
        p.parent.parent.name: ProfileSummary.load(p) for p in sorted((ws / "profiles").glob(f"v*/{side}/summary.json"))
    }


def excluded(
    profiles: dict[str, ProfileSummary], refs: list[ConfigRef], noise_pct: float
) -> dict[str, list[tuple[float, float, float]]]:
    """class -> (ratio, lo, hi) of every ordered pair of the profiles."""
    out: dict[str, list[tuple[float, float, float]]] = {}
    for a, b in itertools.permutations(profiles, 2):
        cmp = compare_per_class(profiles[a], profiles[b], refs, confidence=0.99, run_noise_pct=noise_pct)
        for cls, ch in cmp.by_class().items():
            if ch.ratio is not None and ch.lo is not None and ch.hi is not None:
                out.setdefault(cls, []).append((ch.ratio, ch.lo, ch.hi))
    return out


def tally(rows: list[tuple[float, float, float]]) -> tuple[int, int, float]:
    """(intervals excluding 1, pairs, median half-width in %)."""
    out = sum(1 for _, lo, hi in rows if lo > 1.0 or hi < 1.0)
    return out, len(rows), statistics.median((hi - lo) / 2.0 * 100.0 for _, lo, hi in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ws", type=Path, help="a part4 run's folder (holds run.db and profiles/)")
    ap.add_argument("sides", nargs="+", help="profile folders of one tree: best, cand, best_more, cand_more")
    ap.add_argument("--noise", default="0.3,0.6,0.8,1.0", help="run-to-run terms to replay, % per profile")
    a = ap.parse_args(argv)
    refs = baseline_refs(a.ws)
    for noise in (float(x) for x in a.noise.split(",")):
        by_cls: dict[str, list[tuple[float, float, float]]] = {}
        for side in a.sides:
            for cls, rows in excluded(side_profiles(a.ws, side), refs, noise).items():
                by_cls.setdefault(cls, []).extend(rows)
        for cls, rows in sorted(by_cls.items()):
            out, n, half = tally(rows)
            print(
                f"run-to-run {noise:g}%: {cls:28s} {out} of {n} intervals exclude no change; median half-width {half:.2f}%"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

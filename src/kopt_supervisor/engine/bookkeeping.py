"""The reference program's bookkeeping, derived from the iteration history (pure).

BEST_COMMIT, CONSECUTIVE_REGRESSIONS and RECENT_REGRESSIONS are not stored as counters
that a crash could leave half-updated: they are recomputed from the unmasked iterations
every time, so they are right after any crash, mask or restart by construction. Which
keeps the run's seals vouch for is decided outside (engine.history.chain) and passed in as
`trusted`: BEST is never a keep the engine did not seal.

Rules (kernel-opt program): a measured regression adds one and is remembered (last five);
a keep or a tie resets both; a benchmark failure, a correctness give-up, a protected-file
violation and a failed proposal reset them too (no comparable regression was formed). A
borderline awaiting review and an interrupted iteration change nothing.

The functions read rows (`IterationRow`: no record) or full `Iteration`s alike; the few
records a summary needs (the last five regressions) are asked for through `records`, so a
history of thousands of iterations costs one light query.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kopt_supervisor.engine.records import (
    FAILURES,
    Iteration,
    IterationRecord,
    IterationRow,
    Status,
    in_end_order,
)

RESETS = frozenset({Status.KEEP, Status.ACCEPTED, Status.TIE, Status.SPLIT, Status.REJECTED, *FAILURES})
REGRESSIONS = frozenset({Status.REGRESSION, Status.LIKELY_REGRESSION})
"""Measured regressions: +1 to CONSECUTIVE_REGRESSIONS, remembered in RECENT_REGRESSIONS."""
NOT_COUNTED = frozenset({Status.BASELINE, Status.RUNNING, Status.INTERRUPTED, Status.BORDERLINE})

Row = Iteration | IterationRow
R = TypeVar("R", Iteration, IterationRow)


@dataclass(frozen=True)
class Counters:
    consecutive_regressions: int = 0
    recent_regressions: list[dict[str, Any]] = field(default_factory=list)
    consecutive_failures: int = 0
    candidates: int = 0
    """Candidate iterations that ended (baseline and interrupted ones excluded)."""
    keeps: int = 0


def best_row(rows: Sequence[Row], trusted: Collection[int] | None = None) -> Row | None:
    """BEST: the keep that ended last (keeps are committed one at a time, each on the one
    before). `trusted`: the kept versions whose seal verifies (engine.history.chain); a keep
    outside it is never BEST. None: every keep counts (a caller without the run's secret)."""
    kept = in_end_order([it for it in rows if not it.masked and it.kept and (trusted is None or it.version in trusted)])
    return kept[-1] if kept else None


def best_iteration(iterations: Sequence[Iteration], trusted: Collection[int] | None = None) -> Iteration | None:
    kept = in_end_order(
        [it for it in iterations if not it.masked and it.kept and (trusted is None or it.version in trusted)]
    )
    return kept[-1] if kept else None


def best_commit(rows: Sequence[Row], trusted: Collection[int] | None = None) -> str | None:
    it = best_row(rows, trusted)
    return it.commit if it else None


def trusted_rows(rows: Sequence[R], trusted: Collection[int] | None) -> list[R]:
    """The history a reader derives from: every row but the keeps the run's seals do not
    vouch for (a forged keep counts for nothing: not BEST, not a keep, not a baseline)."""
    return [it for it in rows if trusted is None or not it.kept or it.version in trusted]


def baseline(iterations: Sequence[Iteration]) -> Iteration | None:
    for it in iterations:
        if it.status == Status.BASELINE and not it.masked:
            return it
    return None


def baseline_version(rows: Sequence[Row]) -> int | None:
    for it in rows:
        if it.status == Status.BASELINE and not it.masked:
            return it.version
    return None


def counters(rows: Sequence[Row], records: Callable[[list[int]], dict[int, Iteration]] | None = None) -> Counters:
    """The counters over `rows`. RECENT_REGRESSIONS needs the records of up to five
    regressions: taken from the rows when they are full Iterations, else from `records`
    (versions -> iterations; without it the summaries carry only what a row has)."""
    regs = 0
    recent: list[Row] = []
    fails = 0
    candidates = keeps = 0
    for it in in_end_order(list(rows)):  # in the order they ended: with lanes, not their version order
        if it.masked or it.status in NOT_COUNTED:
            continue
        candidates += 1
        if it.status in REGRESSIONS:
            regs += 1
            recent = (recent + [it])[-5:]
        elif it.status in RESETS:
            regs = 0
            recent = []
        fails = fails + 1 if it.status in FAILURES else 0
        if it.status in (Status.KEEP, Status.ACCEPTED):
            keeps += 1
    full = [it for it in recent if isinstance(it, Iteration)]
    if len(full) < len(recent) and records is not None:
        loaded = records([it.version for it in recent])
        full = [loaded[it.version] for it in recent if it.version in loaded]
    summaries = (
        [regression_summary(it) for it in full]
        if len(full) == len(recent)
        else [
            regression_summary(
                Iteration(
                    it.version,
                    it.status,
                    target_class=it.target_class,
                    best_commit_before=it.best_commit_before,
                    finished_at=it.finished_at,
                )
            )
            for it in recent
        ]
    )
    return Counters(regs, summaries, fails, candidates, keeps)


def regression_summary(it: Iteration) -> dict[str, Any]:
    """One RECENT_REGRESSIONS entry, with the fields the reference program lists."""
    rec: IterationRecord = it.record
    classes = rec.get("classes", {})
    target = it.target_class or (max(classes, key=lambda c: classes[c].get("ratio", 1.0)) if classes else None)
    c = classes.get(target, {}) if target else {}
    prof = rec.get("profile", {}) or {}
    return {
        "version": it.version,
        "time": it.finished_at,
        "best_commit": it.best_commit_before,
        "candidate": f"v{it.version} (uncommitted tree)",
        "hypothesis": it.hypothesis,
        "files": rec.get("changed_files", []),
        "class": target,
        "metric_best": c.get("best"),
        "metric_cand": c.get("cand"),
        "profiler_best_ns": (prof.get("best") or {}).get("target_per_call_ns"),
        "profiler_cand_ns": (prof.get("cand") or {}).get("target_per_call_ns"),
        "delta_pct": c.get("delta_pct"),
        "notes": (rec.get("decision") or {}).get("reason", ""),
    }

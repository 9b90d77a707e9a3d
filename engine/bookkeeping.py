"""The reference program's bookkeeping, derived from the iteration history (pure).

BEST_COMMIT, CONSECUTIVE_REGRESSIONS and RECENT_REGRESSIONS are not stored as counters
that a crash could leave half-updated: they are recomputed from the unmasked iterations
every time, so they are right after any crash, mask or restart by construction.

Rules (kernel-opt program): a measured regression adds one and is remembered (last five);
a keep or a tie resets both; a benchmark failure, a correctness give-up, a protected-file
violation and a failed proposal reset them too (no comparable regression was formed). A
borderline awaiting review and an interrupted iteration change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.store import Iteration

RESETS = ("keep", "accepted", "tie", "split", "rejected", "fail_bench", "fail_correctness",
          "fail_protected", "fail_propose")
FAILURES = ("fail_bench", "fail_correctness", "fail_protected", "fail_propose")


@dataclass(frozen=True)
class Counters:
    consecutive_regressions: int = 0
    recent_regressions: list[dict[str, Any]] = field(default_factory=list)
    consecutive_failures: int = 0
    candidates: int = 0
    """Candidate iterations that ended (baseline and interrupted ones excluded)."""
    keeps: int = 0


def best_iteration(iterations: list[Iteration]) -> Iteration | None:
    kept = [it for it in iterations if not it.masked and it.kept]
    return kept[-1] if kept else None


def best_commit(iterations: list[Iteration]) -> str | None:
    it = best_iteration(iterations)
    return it.commit if it else None


def baseline(iterations: list[Iteration]) -> Iteration | None:
    for it in iterations:
        if it.status == "baseline" and not it.masked:
            return it
    return None


def counters(iterations: list[Iteration]) -> Counters:
    regs = 0
    recent: list[dict[str, Any]] = []
    fails = 0
    candidates = keeps = 0
    for it in iterations:
        if it.masked or it.status in ("baseline", "running", "interrupted", "borderline"):
            continue
        candidates += 1
        if it.status == "regression":
            regs += 1
            recent = (recent + [regression_summary(it)])[-5:]
        elif it.status in RESETS:
            regs = 0
            recent = []
        if it.status in FAILURES:
            fails += 1
        else:
            fails = 0
        if it.status in ("keep", "accepted"):
            keeps += 1
    return Counters(regs, recent, fails, candidates, keeps)


def regression_summary(it: Iteration) -> dict[str, Any]:
    """One RECENT_REGRESSIONS entry, with the fields the reference program lists."""
    rec = it.record
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

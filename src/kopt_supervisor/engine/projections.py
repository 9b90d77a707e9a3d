"""What run.db's history says, derived and never stored (pure): the rules that read a history,
the bookkeeping derived from it, and the text projections of run.db (memory/vN.json records,
performance.md and README.md) with the readings of a record they share: the run's sandbox
(`sandbox_line`). The typed records themselves are engine/records.py's.

The rules that read a history and are written once here: `in_end_order` (the order iterations
ended), `awaiting_review` (the pending review rule) and `restart_point_problem` (where a
masked restart may start).

Bookkeeping: BEST_COMMIT, CONSECUTIVE_REGRESSIONS and RECENT_REGRESSIONS are not stored as
counters that a crash could leave half-updated: they are recomputed from the unmasked
iterations every time, so they are right after any crash, mask or restart by construction.
Which keeps the run's seals vouch for is decided outside (engine.history.chain) and passed in
as `trusted`: BEST is never a keep the engine did not seal. Rules (kernel-opt program): a
measured regression adds one and is remembered (last five); a keep or a tie resets both; a
benchmark failure, a correctness give-up, a protected-file violation and a failed proposal
reset them too (no comparable regression was formed). A borderline awaiting review and an
interrupted iteration change nothing. The functions read rows (`IterationRow`: no record) or
full `Iteration`s alike; the few records a summary needs (the last five regressions) are asked
for through `records`, so a history of thousands of iterations costs one light query.

Nothing here touches the disk; `engine.loop` writes the projections these functions return,
atomically, after every change to the store. Deleting any of those files loses nothing: the
next write re-creates them from the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import geomean, positive_finite
from kopt_supervisor.engine.metrics import describe_classes
from kopt_supervisor.engine.records import FAILURES, Iteration, IterationRecord, IterationRow, Status

# ---------------------------------------------------------------------------------------
# What the history says: the rules that read it, and the bookkeeping derived from it


class _Ended(Protocol):
    @property
    def version(self) -> int: ...
    @property
    def order(self) -> int: ...


T = TypeVar("T", bound=_Ended)


def in_end_order(iterations: Iterable[T]) -> list[T]:
    """Iterations in the order they ended (with one lane: their version order)."""
    return sorted(iterations, key=lambda it: (it.order, it.version))


def awaiting_review(iterations: Iterable[Iteration | IterationRow]) -> list[int]:
    """The versions awaiting the engineer, oldest first."""
    return [it.version for it in iterations if it.awaiting_review]


def restart_point_problem(it: Iteration | IterationRow | None, version: int) -> str | None:
    """Why vN cannot be a masked restart's starting point (None: it can): it must exist and be
    an unmasked baseline or keep, i.e. a committed best point."""
    if it is None:
        return f"v{version} does not exist"
    if it.masked or not it.kept:
        return (
            f"v{version} is not an unmasked baseline or kept iteration (status {it.status}"
            f"{', masked' if it.masked else ''}); restart needs a committed best point"
        )
    return None


# The bookkeeping: the counters and BEST

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
        if it.masked or it.version == 0 or it.status in NOT_COUNTED:
            continue  # v0 is the baseline, never a candidate, even one whose bench failed
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


# ---------------------------------------------------------------------------------------
# The text projections


def memory_record(it: Iteration) -> dict[str, Any]:
    """memory/vN.json (docs/design.md §10)."""
    rec = it.record
    decision = rec.get("decision") or {}
    return {
        "version": it.version,
        "parent": it.parent,
        "status": it.status,
        "masked": it.masked,
        "hypothesis": it.hypothesis,
        "target_class": it.target_class,
        "scope": it.scope,
        "changed_files": rec.get("changed_files", []),
        "commit": it.commit,
        "best_commit_before": it.best_commit_before,
        "repair_attempts": it.repair_attempts,
        "started_at": _iso(it.started_at),
        "finished_at": _iso(it.finished_at),
        "phase": it.phase,
        "gpu": rec.get("gpu", {}),
        "classes": rec.get("classes", {}),
        "profile": rec.get("profile"),
        "decision": {
            "verdict": decision.get("verdict"),
            "reason": decision.get("reason", ""),
            "by": decision.get("by", "engine"),
            "rounds": decision.get("rounds"),
            "gpu_seconds": decision.get("gpu_seconds"),
            "flags": decision.get("flags", []),
        },
        "proposal": rec.get("proposal", {}),
        "repairs": rec.get("repairs", []),
        "plan": rec.get("plan"),
        "pitfalls_and_fixes": rec.get("pitfalls_and_fixes", []),
    }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def _date(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "—"


def best_per_class(iterations: list[Iteration]) -> dict[str, float]:
    """The latest known metric per class of the current best tree: the keeps in the order they
    ended (with lanes a keep decided against an older BEST and carried to a newer one ends after
    keeps of later versions; its figures are the newest)."""
    out: dict[str, float] = {}
    for it in sorted(iterations, key=lambda i: (i.order, i.version)):
        if it.masked or not it.kept:
            continue
        side = "best" if it.status == "baseline" else "cand"
        for cls, c in (it.record.get("classes") or {}).items():
            if c.get("old_best"):  # a carried keep's figures of the BEST it was decided on (loop/keep.py)
                continue
            v = c.get(side)
            if v is not None:
                out[cls] = v
    return out


def _kernel_name(it: Iteration) -> str:
    prof = it.record.get("profile") or {}
    side = prof.get("cand") or prof.get("best") or {}
    return side.get("hottest") or "—"


def profile_ns_per_call(summary: Mapping[str, Any] | None) -> Any:
    """The target kernels' GPU time per call of a profile summary (engine.profile's
    `target_per_call_ns`; `target_ns_per_call` in records written before it existed)."""
    summary = summary or {}
    value = summary.get("target_per_call_ns")
    return summary.get("target_ns_per_call") if value is None else value


def _profiler_ns(it: Iteration, side: str) -> Any:
    prof = it.record.get("profile") or {}
    return profile_ns_per_call(prof.get(side))


def ran_unsandboxed(meta: Mapping[str, Any]) -> bool:
    """Some session of the run ran its proposers and candidate code without bubblewrap
    (`--no-sandbox`, or `kopt demo` where none works; meta `sandbox`: engine/loop/context.py open_run)."""
    s = meta.get("sandbox")
    return isinstance(s, Mapping) and bool(s.get("ever_unconfined") or s.get("confined") is False)


def sandbox_line(meta: Mapping[str, Any]) -> str:
    """What the run's sandbox was, in one sentence for every place that shows results
    (performance.md, results.md, `kopt status`): an unsandboxed session anywhere in the run
    is said first, whatever the latest session did."""
    s = meta.get("sandbox")
    if not isinstance(s, Mapping):
        return "not recorded (no engine of this kopt version has run it)"
    summary = fmt.one_line(s.get("summary") or "", 400)
    if s.get("confined") is False:
        return summary or "UNSANDBOXED (--no-sandbox): proposers and candidate code ran without confinement"
    if s.get("ever_unconfined"):
        return (
            "UNSANDBOXED for part of the run: an earlier session ran with --no-sandbox (or was the demo where "
            "no sandbox worked): its proposer and benches ran without confinement; the latest session: "
            f"{summary or 'sandboxed'}"
        )
    return summary or "sandboxed"


def render_performance(cfg: Config, meta: dict[str, Any], iterations: list[Iteration], counters: Counters) -> str:
    metric = cfg.target.metric
    sandbox = sandbox_line(meta)
    lines = [
        "# performance.md",
        "",
        f"Run `{meta.get('tag')}` — baseline and kept improvements only (kernel-opt program).",
        "",
        f"Sandbox: **{sandbox}**" if ran_unsandboxed(meta) else f"Sandbox: {sandbox}",
        "",
        *(
            [
                f"**TAMPERED**: {meta['tampered']} Only the keeps the run's seals vouch for are listed; BEST_COMMIT "
                f"is the last of them ({str(meta.get('best_commit') or 'none')[:10]}).",
                "",
            ]
            if meta.get("tampered")
            else []
        ),
        f"Metric: `{metric}` ({'lower' if cfg.target.direction == 'min' else 'higher'} is better), "
        f"geometric mean over the class's configs, as the kept tree measured in its own decision; "
        "Δ is against the previous best, measured paired in that same decision. Two rows come from "
        "different sessions, so their values can differ by drift where Δ cannot.",
        "",
        f"| Date | Commit | Status | Bench command | Class / dispatch condition | Kernel | {metric} | "
        "Profiler time (ns/call) | Δ vs previous best | Bottleneck targeted |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for it in iterations:
        if it.masked or not it.kept:
            continue
        classes = it.record.get("classes") or {}
        if it.status == "baseline":
            value = _geomean([c.get("best") for c in classes.values()])
            cls, delta, what = "all classes", None, "baseline (unmodified)"
        else:
            cls = it.target_class or "all classes (global)"
            chosen = [classes[it.target_class]] if it.target_class in classes else list(classes.values())
            value = _geomean([c.get("cand") for c in chosen])
            delta = _geomean([c.get("ratio") for c in chosen])
            delta = None if delta is None else (delta - 1) * 100
            what = it.hypothesis
            if it.status == "accepted":
                what += " (accepted by the engineer)"
        prof = _profiler_ns(it, "best" if it.status == "baseline" else "cand")
        lines.append(
            f"| {_date(it.finished_at)} | {(it.commit or '')[:10]} | {'baseline' if it.status == 'baseline' else 'keep'} | "
            f"`{cfg.target.bench}` | {cls} | {_kernel_name(it)} | {fmt.num(value)} | {fmt.num(prof)} | "
            f"{fmt.change(delta)} | {_cell(what)} |"
        )
    if meta.get("state") in ("stopped", "finished") and meta.get("stop_reason") and meta.get("stop_time"):
        lines += ["", render_stop_summary(cfg, meta, iterations, counters)]
    return "\n".join(lines) + "\n"


def render_stop_summary(cfg: Config, meta: dict[str, Any], iterations: list[Iteration], counters: Counters) -> str:
    best = best_per_class(iterations)
    lines = [
        "## Stop Summary",
        "",
        f"- Stop time: {_date(meta.get('stop_time'))}",
        f"- Stop reason: {meta.get('stop_reason')}",
        f"- BEST_COMMIT: {meta.get('best_commit') or '—'}",
        "- Current best metrics: " + (", ".join(f"{c}: {fmt.num(v)}" for c, v in sorted(best.items())) or "—"),
        f"- Consecutive regressions: {counters.consecutive_regressions}",
        "",
        "### Recent regressions (last 5)",
        "",
        f"| Attempt | Hypothesis | Changed Files | {cfg.target.metric} best → candidate | GPU Time best → candidate | Delta | Notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in counters.recent_regressions:
        lines.append(
            f"| v{r['version']} | {_cell(r['hypothesis'])} | {_cell(', '.join(r['files']))} | "
            f"{fmt.num(r['metric_best'])} → {fmt.num(r['metric_cand'])} | "
            f"{fmt.num(r['profiler_best_ns'])} → {fmt.num(r['profiler_cand_ns'])} | {fmt.change(r['delta_pct'])} | "
            f"{_cell(r['notes'])} |"
        )
    if not counters.recent_regressions:
        lines.append("| — | no regression since the last keep or tie | | | | | |")
    return "\n".join(lines)


def _cell(text: Any) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")[:300]


def _geomean(values: list[Any]) -> float | None:
    return geomean(positive_finite(values))


def render_readme(
    cfg: Config,
    meta: dict[str, Any],
    *,
    config_columns: list[str] | None = None,
    classes: list[str] | None = None,
    hardware: str | None = None,
    roofline: str | None = None,
) -> str:
    t = cfg.target
    s = cfg.stop
    cols = ", ".join(f"`{c}`" for c in config_columns) if config_columns else "not yet measured (after the baseline)"
    class_list = "\n".join(f"  - `{c}`" for c in classes) if classes else "  - not yet measured (after the baseline)"
    stops = [
        f"- {s.consecutive_regressions} consecutive measured regressions",
        f"- no idle GPU for {cfg.gpu.wait_max_s / 60:.0f} minutes",
        f"- every production config at ≥ {s.target_pct_of_peak:g}% of its roofline"
        + ("" if cfg.roofline.bytes or cfg.roofline.flops else " (no roofline formulas configured: inactive)"),
        f"- {s.consecutive_failures} failed proposals in a row",
    ]
    if s.max_iters:
        stops.append(f"- {s.max_iters} candidate iterations")
    if s.max_hours:
        stops.append(f"- {s.max_hours:g} hours")
    stops.append("- a request from the engineer (`kopt stop`)")
    return "\n".join(
        [
            f"# kopt run `{meta.get('tag')}`",
            "",
            "## Task context",
            "",
            f"- Target repository: `{meta.get('repo')}`",
            f"- Baseline commit: `{meta.get('baseline_commit')}`",
            f"- Branch: `kopt/{meta.get('tag')}` (worktree `best/` at BEST_COMMIT; the candidate in `cand/`)",
            f"- Benchmark command (fixed): `{t.bench}`",
            f"- CSV: `{t.csv}`" + (" (the bench's stdout)" if t.csv == "-" else ""),
            f"- Metric: `{t.metric}` ({'lower' if t.direction == 'min' else 'higher'} is better)",
            f"- Correctness rule: `{t.correct or 'metric present and finite'}`; NaN/Inf always fail",
            f"- Config columns: {cols}",
            f"- Config classes ({describe_classes(t.class_by) if t.class_by is not None else 'by all config columns: each config its own class'}):",
            class_list,
            f"- Protected files: {', '.join(f'`{p}`' for p in t.protected) or 'none declared'}",
            f"- Proposer: `{cfg.propose.kind}`"
            + (f" (`{cfg.propose.command}`)" if cfg.propose.kind == "command" else ""),
            "",
            *(
                [roofline.rstrip(), ""]
                if roofline
                else [
                    "## Hardware specs",
                    "",
                    hardware or "Not yet measured: written once the GPU is known (values only with a source).",
                    "",
                    "## Roofline analysis (Step 0)",
                    "",
                    "Not yet measured: needs `[roofline] bytes`/`flops` formulas, the baseline and the hardware spec.",
                    "",
                ]
            ),
            "## Stop conditions",
            "",
            *stops,
            "",
        ]
    )


def best_speedup(iterations: list[Iteration], direction: str = "min") -> float | None:
    """Geometric mean over classes of baseline / best (>1: faster than the baseline)."""
    base = baseline(iterations)
    if base is None:
        return None
    best = best_per_class(iterations)
    ratios = []
    for cls, c in (base.record.get("classes") or {}).items():
        b, now = c.get("best"), best.get(cls)
        if b and now and b > 0 and now > 0:
            ratios.append(b / now if direction == "min" else now / b)
    return geomean(ratios)

"""Text projections of run.db: memory/vN.json records, performance.md and README.md (pure),
and the readings of a record every place that shows results shares: the run's sandbox
(`sandbox_line`) and the profiler's per-class evidence (`profiler_evidence`).

Nothing here touches the disk; `engine.loop` writes what these functions return, atomically,
after every change to the store. Deleting any of these files loses nothing: the next write
re-creates them from the store.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import fmt, records
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import geomean, positive_finite
from kopt_supervisor.engine.metrics import describe_classes
from kopt_supervisor.engine.records import Counters, Iteration


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
    """The latest known metric per class of the current best tree."""
    out: dict[str, float] = {}
    for it in iterations:
        if it.masked or not it.kept:
            continue
        side = "best" if it.status == "baseline" else "cand"
        for cls, c in (it.record.get("classes") or {}).items():
            v = c.get(side)
            if v is not None:
                out[cls] = v
    return out


def _kernel_name(it: Iteration) -> str:
    prof = it.record.get("profile") or {}
    side = prof.get("cand") or prof.get("best") or {}
    return side.get("hottest") or "—"


def profile_ns_per_call(summary: dict[str, Any] | None) -> Any:
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


# ---------------------------------------------------------------------------------------
# The profiler's word on a candidate, read from its record (results.md and the TUI)


@dataclass(frozen=True)
class ProfiledClass:
    """One class of record["profile"]: the profiler's change per call and whether it agrees
    with the bench's verdict (engine/profile/classes.py ClassChange and ClassAgreement)."""

    cls: str
    best_ns: float | None
    """GPU time of one call of each of the class's configs (summed), best."""
    cand_ns: float | None
    ratio: float | None
    lo: float | None
    hi: float | None
    appeared: tuple[str, ...] = ()
    disappeared: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    agreement: str = ""
    """agrees | disagrees | cannot_tell | not_judged; "" when no agreement was recorded."""
    agreement_reason: str = ""
    bench_verdict: str = ""
    bench_ratio: float | None = None
    bench_lo: float | None = None
    bench_hi: float | None = None


@dataclass(frozen=True)
class ProfilerEvidence:
    classes: tuple[ProfiledClass, ...] = ()
    per_class: bool = True
    """False: no NVTX ranges; one entry for the whole run (`note` says so)."""
    note: str = ""
    problems: tuple[str, ...] = ()
    """Problems that hold for every class (ranges on one side only, work outside the ranges)."""
    outside_best_ns: float | None = None
    outside_cand_ns: float | None = None
    """GPU time outside every config's range, per profile (None: none recorded)."""
    outside_grew: bool = False
    noise: str = ""
    confidence: float | None = None
    error: str = ""
    """The profiler's run failed (then nothing else is set)."""


def profiler_evidence(profile: Any) -> ProfilerEvidence | None:
    """record["profile"] as per-class evidence: its `comparison` (ClassComparison.to_dict())
    beside its `agreement` (Agreement.to_dict()); a record of an older kopt (one whole-run
    `comparison` with best_per_call_ns) becomes one entry for all classes. None when the
    iteration was not profiled as best vs candidate."""
    if not isinstance(profile, Mapping):
        return None
    if profile.get("error"):
        return ProfilerEvidence(error=fmt.one_line(profile["error"], 600))
    cmp = profile.get("comparison")
    if not isinstance(cmp, Mapping):  # both sides profiled, never compared (an older kopt): their target kernels
        cmp = {
            "best_per_call_ns": profile_ns_per_call(_mapping(profile.get("best"))),
            "cand_per_call_ns": profile_ns_per_call(_mapping(profile.get("cand"))),
        }
    agreement = _mapping(profile.get("agreement"))
    judged = {str(a.get("cls")): a for a in agreement.get("classes") or () if isinstance(a, Mapping)}
    if not isinstance(cmp.get("classes"), list | tuple):  # a whole-run comparison of an older kopt
        best, cand = _number(cmp.get("best_per_call_ns")), _number(cmp.get("cand_per_call_ns"))
        if best is None or cand is None:
            return None
        ratio = cand / best if best and cand is not None else None
        return ProfilerEvidence(
            (ProfiledClass("(all classes)", best, cand, ratio, None, None),),
            per_class=False,
            note="the whole run's target kernels, not per class (recorded by an older kopt)",
        )
    classes = []
    for c in cmp["classes"]:
        if not isinstance(c, Mapping):
            continue
        a = judged.get(str(c.get("cls")), {})
        classes.append(
            ProfiledClass(
                str(c.get("cls")),
                _number(c.get("best_ns")),
                _number(c.get("cand_ns")),
                _number(c.get("ratio")),
                _number(c.get("lo")),
                _number(c.get("hi")),
                _names(c.get("appeared")),
                _names(c.get("disappeared")),
                _names(c.get("problems")),
                str(a.get("status") or ""),
                str(a.get("reason") or ""),
                str(a.get("bench_verdict") or ""),
                _number(a.get("bench_ratio")),
                _number(a.get("bench_lo")),
                _number(a.get("bench_hi")),
            )
        )
    outside = _mapping(cmp.get("unattributed"))
    return ProfilerEvidence(
        tuple(classes),
        bool(cmp.get("per_class", True)),
        str(cmp.get("note") or ""),
        _names(cmp.get("problems")),
        _number(outside.get("best_ns")),
        _number(outside.get("cand_ns")),
        bool(outside.get("grew")),
        str(cmp.get("noise") or ""),
        _number(cmp.get("confidence")),
    )


def _mapping(v: Any) -> dict[str, Any]:
    return dict(v) if isinstance(v, Mapping) else {}


def _number(v: Any) -> float | None:
    return float(v) if fmt.is_num(v) else None


def _names(v: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in v) if isinstance(v, list | tuple) else ()


def best_speedup(iterations: list[Iteration], direction: str = "min") -> float | None:
    """Geometric mean over classes of baseline / best (>1: faster than the baseline)."""
    base = records.baseline(iterations)
    if base is None:
        return None
    best = best_per_class(iterations)
    ratios = []
    for cls, c in (base.record.get("classes") or {}).items():
        b, now = c.get("best"), best.get(cls)
        if b and now and b > 0 and now > 0:
            ratios.append(b / now if direction == "min" else now / b)
    return geomean(ratios)

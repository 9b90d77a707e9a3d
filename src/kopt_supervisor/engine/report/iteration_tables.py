"""results.md's tables of iterations one by one (pure: the gathered run in, markdown lines
out): "Kept iterations" (the keeps the final tree is made of, each with its per-class change,
the profiler's word and what confirmed it), "All iterations" and "Masked iterations"."""

from __future__ import annotations

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.decide.external_truth import TIMER_ONLY, truth_line
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report import profiler_view
from kopt_supervisor.engine.report.collect import ReportInputs
from kopt_supervisor.engine.report.markdown import table


def _class_deltas(it: Iteration) -> str:
    parts = []
    for cls, c in sorted((it.record.get("classes") or {}).items()):
        delta = c.get("delta_pct")
        lo, hi = c.get("lo"), c.get("hi")
        if delta is None:
            continue
        interval = f" {fmt.interval(lo, hi)}" if fmt.is_num(lo) and fmt.is_num(hi) else ""
        parts.append(f"{cls} {fmt.change(delta)}{interval} {c.get('verdict', '')}".rstrip())
    return "; ".join(parts) or "—"


def kept_iterations(inp: ReportInputs) -> list[str]:
    d = inp.data
    rows = []
    for it in d.chain:
        dec = it.record.get("decision") or {}
        rows.append(
            [
                f"v{it.version}",
                fmt.sha(it.commit),
                it.hypothesis,
                it.target_class or "global",
                f"{it.status} ({dec.get('by', 'engine')})",
                _class_deltas(it),
                profiler_view.change_cell(it),
                truth_line(dict(it.record), str(it.status)),
                dec.get("rounds") or "—",
                fmt.num(dec.get("gpu_seconds")),
                ", ".join(it.record.get("changed_files") or []) or "—",
            ]
        )
    lines = [
        "## Kept iterations",
        "",
        "The keeps the final tree is made of, oldest first. Δ per class is the candidate against the "
        "best of that moment, measured paired; the interval is the decision's, at "
        f"{inp.cfg.decide.confidence:g} confidence, valid under its repeated looks.",
        "",
    ]
    timer_only = [
        f"v{it.version}" for it in d.chain if truth_line(dict(it.record), str(it.status)).startswith(TIMER_ONLY)
    ]
    if timer_only:
        lines += [
            f"{TIMER_ONLY.capitalize()}: {', '.join(timer_only)} ({len(timer_only)} of {len(rows)} keeps: no "
            "profiler on the GPU, or without a GPU no OS accounting that could tell).",
            "",
        ]
    if rows:
        lines += table(
            [
                "iteration",
                "commit",
                "hypothesis",
                "target",
                "verdict (by)",
                "Δ per class [interval]",
                "profiler per class: ns/call best → cand (change, agreement)",
                "confirmed by (external truth)",
                "rounds",
                "GPU-s",
                "files",
            ],
            rows,
        )
    else:
        lines.append("None: no candidate was kept.")
    stray = d.stray_keeps
    if stray:
        lines += [
            "",
            "Kept but not part of the final tree (left out of the statistics): "
            + ", ".join(f"v{it.version} ({it.hypothesis})" for it in stray),
        ]
    return [*lines, ""]


def all_iterations(inp: ReportInputs) -> list[str]:
    d = inp.data
    counts: dict[str, int] = {}
    for it in d.unmasked:
        counts[it.status] = counts.get(it.status, 0) + 1
    rows = [
        [
            f"v{it.version}",
            it.status,
            it.hypothesis,
            it.target_class or "global",
            _class_deltas(it),
            (it.record.get("decision") or {}).get("reason", ""),
        ]
        for it in d.unmasked
    ]
    return [
        "## All iterations",
        "",
        "Unmasked iterations by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        "",
        "<details><summary>Every unmasked iteration</summary>",
        "",
        *table(["iteration", "status", "hypothesis", "target", "Δ per class [interval]", "reason"], rows),
        "",
        "</details>",
        "",
    ]


def masked_iterations(inp: ReportInputs) -> list[str]:
    masked = inp.data.masked
    lines = ["## Masked iterations", ""]
    if not masked:
        return [*lines, "None.", ""]
    rows = [
        [
            f"v{it.version}",
            it.status,
            it.hypothesis,
            fmt.sha(it.commit) if it.commit else "—",
            (it.record.get("decision") or {}).get("reason", ""),
        ]
        for it in masked
    ]
    return [
        *lines,
        "Masked (by `kopt memory mask` or a restart): kept in run.db and memory/, left out of every number above.",
        "",
        *table(["iteration", "status (masked)", "hypothesis", "commit", "reason"], rows),
        "",
    ]

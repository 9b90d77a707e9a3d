"""results.md's "Profiler": the baseline's and the final tree's kernels, and for each keep of
the final tree the profiler's per-class word beside the bench's (pure: records in, markdown
lines out).

Per class (engine/profile/classes.py, read through engine.projections.profiler_evidence): the
GPU time of one call of each of the class's configs, best → candidate, the change with its
interval, the bench's change with its interval and whether the two agree, the kernels that
appeared in or disappeared from the class's ranges, and the time outside every config's
range (work moved out of the ranged region cannot be a confirmed gain).
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.projections import (
    ProfilerEvidence,
    profile_ns_per_call,
    profiler_evidence,
)
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.collect import RunData
from kopt_supervisor.engine.report.markdown import code, table

KERNEL_COLUMNS = (
    ("name", "kernel"),
    ("target", "target"),
    ("calls", "calls"),
    ("avg_ns", "avg ns"),
    ("total_ns", "total ns"),
    ("registers_per_thread", "registers"),
    ("registers", "registers"),
    ("shared_mem_bytes", "shared mem B"),
    ("occupancy_pct", "occupancy %"),
    ("dram_pct", "DRAM % of peak"),
    ("dram_bw_Bps", "DRAM B/s"),
)
AGREEMENT = {"agrees": "agrees", "disagrees": "**disagrees**", "cannot_tell": "cannot tell", "not_judged": "not judged"}


def change_cell(it: Iteration) -> str:
    """The Kept iterations table's cell: per class best → candidate ns per call, the change
    and the agreement; "not profiled" or "failed: why"."""
    ev = profiler_evidence(it.record.get("profile"))
    if ev is None:
        return "not profiled"
    if ev.error:
        return f"failed: {ev.error}"
    parts = []
    for c in ev.classes:
        agreement = f", {AGREEMENT.get(c.agreement, c.agreement)}" if c.agreement else ""
        parts.append(f"{c.cls} {fmt.num(c.best_ns)} → {fmt.num(c.cand_ns)} ({fmt.ratio_pct(c.ratio)}{agreement})")
    if ev.outside_grew:
        parts.append("work outside the config ranges grew")
    return "; ".join(parts) or "no class profiled"


def section(d: RunData, cfg: Config) -> list[str]:
    lines = ["## Profiler", ""]
    base = (d.baseline.record.get("profile") or {}).get("best")
    final = base if d.best.status == "baseline" else (d.best.record.get("profile") or {}).get("cand")
    compared = [it for it in d.chain if profiler_evidence(it.record.get("profile")) is not None]
    if not base and not final and not compared:
        return [
            *lines,
            f'Not measured: no profile was recorded in this run ([profile].kind = "{cfg.profile.kind}").',
            "",
        ]
    for label, summary in (("baseline", base), ("final", final)):
        if not summary:
            lines += [f"- {label}: not profiled"]
            continue
        lines += [
            f"- {label}: target kernels {fmt.num(profile_ns_per_call(summary))} ns per call "
            f"(tool {summary.get('tool', '—')}, regex `{summary.get('kernel_regex', '') or '.*'}`), "
            f"hottest `{summary.get('hottest', '—')}`"
        ]
    lines.append("")
    kernels = (final or base or {}).get("kernels") or []
    if kernels:
        present = [(k, h) for k, h in KERNEL_COLUMNS if any(kr.get(k) is not None for kr in kernels)]
        cols: list[tuple[str, str]] = []
        for k, h in present:  # one column per heading: the first key that has it
            if all(h != heading for _, heading in cols):
                cols.append((k, h))
        lines += [f"Kernels of the {'final' if final else 'baseline'} tree, hottest first:", ""]
        lines += table([h for _, h in cols], [[_kernel_cell(k, kr.get(k)) for k, _ in cols] for kr in kernels[:10]])
        lines.append("")
    lines += _per_class(compared)
    refused = [
        it for it in d.unmasked if "profiler_disagrees" in ((it.record.get("decision") or {}).get("flags") or [])
    ]
    if refused:
        lines += [
            "Candidates the profiler sent to review (its per-class change disagreed with the bench's): "
            + "; ".join(
                f"v{it.version} {it.status}: {fmt.one_line((it.record.get('decision') or {}).get('reason'), 300)}"
                for it in refused
            ),
            "",
        ]
    return lines


def _per_class(keeps: list[Iteration]) -> list[str]:
    if not keeps:
        return []
    lines = [
        "Best against candidate per class, for each keep of the final tree: GPU time of one call of each of the "
        "class's configs (summed) from every kernel launched inside the configs' ranges, the change with "
        "its interval, the bench's change with its interval, and whether the two agree.",
        "",
    ]
    for it in keeps:
        ev = profiler_evidence(it.record.get("profile"))
        assert ev is not None
        lines += [f"**v{it.version}** `{fmt.sha(it.commit)}`: {fmt.one_line(it.hypothesis, 200)}", ""]
        lines += _evidence(ev)
    return lines


def _evidence(ev: ProfilerEvidence) -> list[str]:
    if ev.error:
        return [f"The profiler failed: {ev.error}", ""]
    conf = f"{ev.confidence:.0%} interval" if ev.confidence else "interval"
    rows = [
        [
            c.cls,
            fmt.num(c.best_ns),
            fmt.num(c.cand_ns),
            fmt.ratio_pct(c.ratio),
            fmt.interval(c.lo, c.hi),
            f"{fmt.ratio_pct(c.bench_ratio)} {fmt.interval(c.bench_lo, c.bench_hi)}"
            if c.bench_ratio is not None
            else fmt.DASH,
            AGREEMENT.get(c.agreement, c.agreement or fmt.DASH)
            + (f": {c.agreement_reason}" if c.agreement_reason else ""),
            _kernels(c.appeared),
            _kernels(c.disappeared),
        ]
        for c in ev.classes
    ]
    lines = table(
        [
            "class",
            "best ns/call",
            "cand ns/call",
            "profiler change",
            conf,
            "bench change [interval]",
            "agreement",
            "kernels appeared",
            "kernels disappeared",
        ],
        rows,
    )
    lines.append("")
    if ev.outside_best_ns or ev.outside_cand_ns or ev.outside_grew:
        lines.append(
            f"- Outside every config's range: {fmt.num(ev.outside_best_ns)} → {fmt.num(ev.outside_cand_ns)} "
            "ns per profile"
            + (
                "; **grew beyond noise**: work moved out of the timed ranges, so no gain can be confirmed"
                if ev.outside_grew
                else " (within noise)"
            )
        )
    for c in ev.classes:
        lines += [f"- {c.cls}: {p}" for p in c.problems]
    lines += [f"- {p}" for p in ev.problems]
    if ev.note:
        lines.append(f"- Note: {ev.note}")
    if ev.noise:
        lines.append(f"- Noise: {ev.noise}")
    return [*lines, ""]


def _kernels(names: tuple[str, ...]) -> str:
    if not names:
        return fmt.DASH
    shown = ", ".join(code(n if len(n) <= 60 else n[:59] + "…") for n in names[:5])
    return shown + (f" (+{len(names) - 5})" if len(names) > 5 else "")


def _kernel_cell(key: str, value: Any) -> str:
    if key == "name" and isinstance(value, str):
        return f"`{value if len(value) <= 80 else value[:79] + '…'}`"
    return fmt.value(value)

"""results.md's sections on the iterations one by one (pure: the gathered run in, markdown
lines out): "Kept iterations" (the keeps the final tree is made of, each with its per-class
change, the profiler's word and what confirmed it), "All iterations", "Masked iterations",
"Profiler" and "Agent costs".

Profiler: the baseline's and the final tree's kernels, and for each keep of the final tree the
profiler's per-class word beside the bench's. Per class (engine/profile/classes.py, read
through engine.api.iteration_record.profiler_evidence): the GPU time of one call of each of the class's
configs, best → candidate, the change with its interval, the bench's change with its interval
and whether the two agree, the kernels that appeared in or disappeared from the class's
ranges, and the time outside every config's range (work moved out of the ranged region cannot
be a confirmed gain).

Agent costs: what the agent runs of the run cost, per iteration and in total, against
[propose].budget_usd / budget_tokens. Every iteration counts, masked ones too (their money was
spent; they are marked). The numbers are what each CLI reported (the parsers of
engine/propose/__init__.py read them); a CLI that reports no cost (Codex CLI, Gemini CLI, a plain command that writes no
$KOPT_USAGE) is named, and its runs are counted apart, never as $0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.api.iteration_record import ProfilerEvidence, profiler_evidence
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide.external_truth import TIMER_ONLY, truth_line
from kopt_supervisor.engine.projections import profile_ns_per_call
from kopt_supervisor.engine.records import AgentRun, Iteration, agent_runs, spent
from kopt_supervisor.engine.report.inputs import ReportInputs, RunData, code, table


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
                change_cell(it),
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


def profiler_section(d: RunData, cfg: Config) -> list[str]:
    lines = ["## Profiler", ""]
    anchors = [it for it in d.unmasked if "anchor" in (it.record.get("profile") or {})]  # [profile].baseline
    base = (d.baseline.record.get("profile") or {}).get("best") or next(
        (it.record["profile"].get("baseline") for it in anchors), None
    )
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


AGENTS_TITLE = "Agent costs"


def agent_summary_line(iterations: Sequence[Iteration], cfg: Config) -> str | None:
    """The Summary's line: "$1.23 over 8 agent runs (budget $5.00), 120k tokens, 12 min"; None
    when no agent ran."""
    total = spent((it.version, it.record) for it in iterations)
    if not total.runs:
        return None
    return (
        f"- Agent: {_cost_total(total.cost_usd, total.runs, total.runs_without_cost)}"
        f"{_budget(cfg.propose.budget_usd, fmt.usd)} over {total.runs} agent run(s), "
        f"{fmt.count(total.tokens)} tokens{_budget(cfg.propose.budget_tokens, fmt.count)}, "
        f"{fmt.clock(total.wall_s)} of agent wall time (masked iterations included; *{AGENTS_TITLE}*)"
    )


def agents_section(iterations: Sequence[Iteration], cfg: Config) -> list[str]:
    lines = [f"## {AGENTS_TITLE}", ""]
    runs = [(it, label, run) for it in iterations for label, run in _labelled_runs(it)]
    if not runs:
        kind = cfg.propose.kind + (f", agent `{cfg.propose.agent}`" if cfg.propose.agent else "")
        return [*lines, f"No agent ran in this run (proposer `{kind}`): nothing to count.", ""]
    total = spent((it.version, it.record) for it in iterations)
    silent = sorted({r.agent or "command" for _, _, r in runs if r.cost_usd is None})
    p = cfg.propose
    lines += [
        f"- Cost: {_cost_total(total.cost_usd, total.runs, total.runs_without_cost)} over {total.runs} agent run(s)"
        + (
            f"; [propose].budget_usd = {fmt.usd(p.budget_usd)} ({fmt.share(100 * total.cost_usd / p.budget_usd)} spent)"
            if p.budget_usd
            else "; no dollar budget ([propose].budget_usd = 0)"
        ),
        f"- Tokens: {total.tokens:,} (input {total.input_tokens:,}, of them read from a prompt cache "
        f"{total.cache_read_tokens:,} and written to one {total.cache_write_tokens:,}; output "
        f"{total.output_tokens:,})"
        + (
            f"; [propose].budget_tokens = {p.budget_tokens:,} ({fmt.share(100 * total.tokens / p.budget_tokens)} spent)"
            if p.budget_tokens
            else "; no token budget ([propose].budget_tokens = 0)"
        )
        + (f"; {total.runs_without_tokens} run(s) reported no tokens" if total.runs_without_tokens else ""),
        f"- Agent wall time: {fmt.clock(total.wall_s)} ({fmt.hours(total.wall_s)})",
    ]
    if silent:
        lines.append(
            f"- Reported no cost: {', '.join(f'`{a}`' for a in silent)} "
            f"({total.runs_without_cost} run(s)); their dollars are unknown, not zero"
            + (" (Codex CLI and Gemini CLI print tokens, not prices)" if {"codex", "gemini"} & set(silent) else "")
        )
    lines += [
        "",
        "Every agent run, its proposal and each correctness repair, masked iterations included "
        "(their money was spent). Tokens are in / cached / out; the transcript is kept in the workspace "
        "(size-capped by [propose].transcript_max_kib).",
        "",
    ]
    rows = []
    for it, label, r in runs:
        rows.append(
            [
                f"v{it.version}" + (" (masked)" if it.masked else ""),
                it.status,
                label,
                r.agent or "command",
                r.model or fmt.DASH,
                fmt.usd(r.cost_usd) if r.cost_usd is not None else "not reported",
                _tokens(r),
                fmt.seconds(r.wall_s),
                _session(r),
                _transcript(r),
            ]
        )
    lines += table(
        [
            "iteration",
            "status",
            "run",
            "agent",
            "model",
            "cost",
            "tokens in / cached / out",
            "wall",
            "session",
            "transcript",
        ],
        rows,
    )
    return [*lines, ""]


def _labelled_runs(it: Iteration) -> list[tuple[str, AgentRun]]:
    """(proposal | repair N, the run) for each agent run of the iteration."""
    labelled = [("proposal", it.record.get("proposal"))]
    labelled += [(f"repair {i}", r) for i, r in enumerate(it.record.get("repairs") or (), 1)]
    return [(label, runs[0]) for label, details in labelled if (runs := agent_runs({"proposal": details}))]


def _cost_total(cost: float, runs: int, without: int) -> str:
    if without >= runs:
        return "not reported"
    return fmt.usd(cost) + (f" (+ {without} run(s) that reported none)" if without else "")


def _budget(value: float | int, write: Any) -> str:
    return f" of a budget of {write(value)}" if value else ""


def _tokens(r: AgentRun) -> str:
    if r.input_tokens is None and r.output_tokens is None:
        return "not reported"
    return " / ".join(
        fmt.count(v) if v is not None else fmt.DASH for v in (r.input_tokens, r.cache_read_tokens, r.output_tokens)
    )


def _session(r: AgentRun) -> str:
    if not r.session_id:
        return fmt.DASH
    return f"`{r.session_id}`" + (" (resumed)" if r.resumed else "")


def _transcript(r: AgentRun) -> str:
    if not r.transcript_path:
        return fmt.DASH
    return (
        f"`{r.transcript_path}`"
        + (f" ({fmt.size(r.transcript_bytes)}" if r.transcript_bytes else "")
        + (", cut)" if r.transcript_cut else ")" if r.transcript_bytes else "")
    )

"""The context pack: what a careful kernel engineer hands over before each change
(docs/design.md §14; the reference program, router and diffusion rules).

KOPT_PROMPT (markdown, for the agent) and the same data as JSON beside it (for tools and
for `assess_plan`), built from what the loop has (`PackInputs`):

- the task and the rules (correctness first, one bottleneck-driven hypothesis, no protected
  files, no commits, the plan's format);
- on a repair, the hypothesis under repair and the failing rows with their errors;
- the target: bench, metric, correctness rule, config columns and classes, the source files
  with their sizes (editable, protected, where dispatch seems to happen);
- hardware specs with their cited sources, and per production config bytes, FLOPs, bound,
  floor, % of peak and the stop target (the best tree's record["roofline"]);
- the best value per class against the baseline;
- the latest profile of the best tree: per kernel time, share, registers, shared memory,
  occupancy, DRAM throughput (and what the profile does not report);
- what was already tried from the current BEST, the recent regressions, what other lanes
  are trying now;
- the per-class history of the unmasked iterations: hypothesis, target class, verdict,
  per-class deltas with their intervals and rounds.

Size: the pack is kept under `[propose].prompt_max_kib`; when it is over, the oldest
history entries are summarised to one line each, then into counts. The rules, the repair,
the current evidence and what was tried from BEST are never cut.

`build_pack(inputs) -> Pack` is pure (data in, text out): this module writes the pack as
markdown (KOPT_PROMPT), older history entries summarised to one line each or to counts, and
keeps it within the size budget: the most history in full that fits, found by bisection over
how much is summarised. What it is built from is `context_inputs` (`PackInputs`, and
`list_sources`, the edge that reads the worktree for the source list; the evidence sections
from the records; the citable terms and the rules). The pack as data (`_data`, the JSON
beside KOPT_PROMPT: every section put together) is put together here too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from kopt_supervisor.engine import fmt, projections
from kopt_supervisor.engine.metrics import class_columns, describe_classes
from kopt_supervisor.engine.projections import best_per_class
from kopt_supervisor.engine.propose.context_inputs import (
    Pack,
    PackInputs,
    _evidence,
    _history_entry,
    _num,
    _profile_of_best,
    _profile_section,
    _roofline_section,
    _short,
    rules,
)


def _fmt_delta(d: Mapping[str, Any]) -> str:
    if d.get("delta_pct") is None:
        return str(d.get("verdict") or "—")
    iv = (
        f" [{d['lo_pct']:+.1f}, {d['hi_pct']:+.1f}]"
        if d.get("lo_pct") is not None and d.get("hi_pct") is not None
        else ""
    )
    rounds = f", {d['rounds']} rounds" if d.get("rounds") else ""
    return f"{d['delta_pct']:+.1f}%{iv} {d.get('verdict') or ''}{rounds}".rstrip()


def _opt(v: Any, pattern: str = "{:.0f}") -> str:
    return "—" if v is None else pattern.format(v)


def _md(data: Mapping[str, Any], collapsed: int, detail_from: int) -> tuple[str, list[str]]:
    """The markdown, with the history entries before index `collapsed` summarised as counts
    and those before `detail_from` as one line each. Returns the text and the summary lines."""
    g, t = data["goal"], data["target"]
    metric = g["metric"]
    out: list[str] = []
    title = f"# kopt iteration v{data['iteration']}"
    if data.get("repair"):
        title += f" — correctness repair {data['repair']['attempt']} of {data['repair']['of']}"
    out += [title + (f" (run `{data['tag']}`)" if data.get("tag") else ""), ""]
    out += [
        f"Goal: make `{metric}` {'lower' if g['direction'] == 'min' else 'higher'} for `{g['bench']}` "
        "without breaking correctness.",
        f"BEST_COMMIT: `{g['best_commit']}`"
        + (f" (v{g['best_version']})" if g.get("best_version") is not None else "")
        + f"; baseline `{g['baseline_commit']}`. This worktree starts at BEST_COMMIT.",
        "",
    ]
    paths = data["paths"]
    out += [
        "## Your task",
        "",
        "1. Read this brief. Pick the config class or kernel that limits performance most, from the evidence below.",
        "2. Choose exactly one hypothesis that points at that bottleneck; say whether it is global or for one class.",
        "3. Make the smallest change that tests it"
        + (f", in `{paths['worktree']}`" if paths.get("worktree") else ", in this worktree")
        + ".",
        f"4. Write the plan to `{paths['plan']}`: first line the hypothesis; then `target_class: <class>` or "
        "`scope: global`; then the evidence it rests on (class, kernel, metric and value from this brief).",
        f"5. Stop. kopt benchmarks, decides, profiles and commits. (This brief as JSON: `{paths['json']}`.)",
        "",
    ]
    out += ["## Rules kopt enforces (you cannot bypass them)", "", *(f"- {r}" for r in data["rules"]), ""]
    rep = data.get("repair")
    if rep:
        out += [
            "## Repair this candidate",
            "",
            f"The hypothesis under repair: {rep['hypothesis'] or '(none recorded)'}"
            + (f" (class `{rep['target_class']}`)" if rep.get("target_class") else ""),
            "Keep the optimisation direction; make the minimal change that restores correctness for every row.",
            "",
            "Failing rows:",
            "",
        ]
        for r in rep["failing_rows"]:
            out.append(f"- `{r['config']}` (class `{r.get('cls')}`): {'; '.join(r['reasons']) or 'failed'}")
        if rep.get("more_failing_rows"):
            out.append(f"- ... and {rep['more_failing_rows']} more rows")
        out.append("")
    out += [
        "## Target",
        "",
        f"- Benchmark (fixed, run by kopt): `{g['bench']}`",
        f"- Metric: `{metric}` ({'lower' if g['direction'] == 'min' else 'higher'} is better); correctness: `{g['correct']}`",
        f"- Config columns: {', '.join(f'`{c}`' for c in t['config_columns']) or '—'}; "
        f"{describe_classes(t['class_by'])}; production configs: `{t['production_rule']}`",
        f"- Protected (read-only): {', '.join(f'`{p}`' for p in t['protected']) or 'none declared'}",
    ]
    if t.get("compile_flags"):
        out.append(f"- Build flags (symmetric for best and candidate): `{t['compile_flags']}`")
    if t["dispatch"]:
        out.append(f"- Dispatch (files that name it): {', '.join(f'`{p}`' for p in t['dispatch'])}")
    out += ["", "Source files (at BEST_COMMIT):", "", "| file | bytes | lines | role |", "|---|---:|---:|---|"]
    for s in t["sources"]:
        role = s["role"] + ("" if s["editable"] else ", read-only")
        out.append(f"| `{s['path']}` | {s['bytes']} | {_opt(s['lines'])} | {role} |")
    if not t["sources"]:
        out.append("| (not listed) | | | |")
    if t.get("more_sources"):
        out.append(f"| ... {t['more_sources']} more | | | |")
    out.append("")
    out += [
        f"## Best per config class (current BEST_COMMIT, `{metric}`)",
        "",
        "| class | configs (production) | best | baseline | vs baseline | % of roofline | bound |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for cls, b in data["best"].items():
        out.append(
            f"| `{cls}` | {b['configs']} ({b['production']}) | {fmt.num(b['value'])} | {fmt.num(b['baseline'])} "
            f"| {_opt(b['vs_baseline_pct'], '{:+.1f}%')} | {_opt(b['pct_of_peak'], '{:.1f}%')} | {b.get('bound') or '—'} |"
        )
    out.append("")
    out += _md_roofline(data.get("roofline"), metric)
    out += _md_profile(data.get("profile"))
    out += ["## Already tried from the current BEST (do not repeat without a new reason)", ""]
    if data["tried_from_best"]:
        for h in data["tried_from_best"]:
            deltas = ", ".join(f"`{c}` {v:+.1f}%" for c, v in h["classes"].items() if v is not None)
            out.append(
                f"- v{h['version']} {h['status']}"
                + (f" (class `{h['target_class']}`)" if h.get("target_class") else " (global)")
                + f": {h['hypothesis']}"
                + (f" → {deltas}" if deltas else "")
                + (f" — {h['reason']}" if h.get("reason") else "")
            )
    else:
        out.append("- nothing yet")
    out += [
        "",
        f"## Recent regressions ({data['consecutive_regressions']} in a row; the run stops at "
        f"{data['stop_after_regressions']})",
        "",
    ]
    if data["recent_regressions"]:
        for r in data["recent_regressions"]:
            prof = ""
            if r.get("profiler_best_ns") and r.get("profiler_cand_ns"):
                prof = f"; GPU time {r['profiler_best_ns'] / 1e3:.3f} → {r['profiler_cand_ns'] / 1e3:.3f} us"
            out.append(
                f"- v{r['version']} `{r.get('class')}`: {r.get('hypothesis')} — {metric} "
                f"{fmt.num(r.get('metric_best'))} → {fmt.num(r.get('metric_cand'))}"
                f" ({_opt(r.get('delta_pct'), '{:+.2f}%')}){prof}"
                + (f"; files {', '.join(r.get('files') or [])}" if r.get("files") else "")
            )
    else:
        out.append("- none")
    out += ["", "## Other lanes are trying now", ""]
    out += [f"- {h}" for h in data["other_lanes"]] or ["- nothing (one lane)"]
    out += ["", "## History of the unmasked iterations (oldest first; per class: change [interval] verdict)", ""]
    hist = data["history"]
    summary = _summaries(hist[:collapsed], True) + _summaries(hist[collapsed:detail_from], False)
    out += summary
    for h in hist[detail_from:]:
        scope = f"class `{h['target_class']}`" if h.get("target_class") else "global"
        out.append(f"- **v{h['version']}** {h['status']} ({scope}): {h['hypothesis']}")
        if h["classes"]:
            out.append("  - " + " · ".join(f"`{c}` {_fmt_delta(d)}" for c, d in h["classes"].items()))
        extra = []
        if h.get("profiler_delta_pct") is not None:
            extra.append(f"profiler {h['profiler_delta_pct']:+.1f}%")
        if h.get("reason"):
            extra.append(h["reason"])
        if h.get("changed_files"):
            extra.append("files " + ", ".join(f"`{f}`" for f in h["changed_files"]))
        if extra:
            out.append("  - " + "; ".join(extra))
    if not hist:
        out.append("- no candidate iteration yet (the baseline is the best)")
    if data["masked_versions"]:
        out += [
            "",
            f"(Masked iterations, left out on purpose: {', '.join(f'v{v}' for v in data['masked_versions'][:30])}.)",
        ]
    out.append("")
    return "\n".join(out), summary


def _md_roofline(roof: Mapping[str, Any] | None, metric: str) -> list[str]:
    out = ["## Hardware and roofline", ""]
    if not roof:
        return out + ["No roofline: [roofline] has no bytes/flops formulas, or the baseline has not run yet.", ""]
    if roof.get("error"):
        return out + [f"The roofline analysis failed: {roof['error']}", ""]
    out.append(f"GPU: {roof.get('gpu') or 'none (CPU-only run): no spec applies'}")
    out += ["", "Specs (only these values, with their sources; never estimate one):", ""]
    out += [f"- {s}" for s in roof["specs"]] or ["- none known (a value without a source is never used)"]
    out += [
        "",
        f"Formulas: bytes `{roof.get('bytes_formula') or '—'}`, FLOPs `{roof.get('flops_formula') or '—'}`. "
        f"Stop target: every production config at ≥ {roof['target_pct']:g}% of its roofline.",
        "",
        f"| config | class | prod | bytes | FLOPs | FLOP/B | bound | floor {metric} | best {metric} | % of peak | "
        f"target {metric} |",
        "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in roof["configs"]:
        out.append(
            f"| `{r['config']}` | `{r.get('cls')}` | {'yes' if r['production'] else 'no'} | {fmt.num(r['bytes'])} "
            f"| {fmt.num(r['flops'])} | {fmt.num(r['intensity'])} | {r.get('bound')} | {fmt.num(r['floor'])} "
            f"| {fmt.num(r['measured'])} | {_opt(r['pct_of_peak'], '{:.1f}%')} | {fmt.num(r['target'])} |"
            + (" suspicious: faster than the floor" if r.get("suspicious") else "")
        )
    if roof.get("classes"):
        out += [
            "",
            "Per class: "
            + "; ".join(
                f"`{c}` {v.get('bound')}-bound, {_opt(v.get('pct_geomean'), '{:.1f}%')} of peak (min {_opt(v.get('pct_min'), '{:.1f}%')})"
                for c, v in roof["classes"].items()
            ),
        ]
    return out + [""]


def _md_profile(prof: Mapping[str, Any] | None) -> list[str]:
    out = ["## Profiler evidence (the best tree)", ""]
    if not prof:
        return out + [
            'No profile of the best tree yet (no profiler on this machine, [profile].kind = "none", '
            "or no keep has been profiled). Reason from the roofline and the per-class history.",
            "",
        ]
    out += [
        f"From {prof['source']} ({prof.get('tool')}; target kernels `{prof.get('kernel_regex') or '.*'}`): "
        f"**{prof['target_per_call_us']:.3f} us per call** over {prof.get('calls')} calls; hottest "
        f"`{prof.get('hottest')}`.",
        "",
        "| kernel | target | calls | avg us | share | regs | smem B | occupancy % | DRAM GB/s | DRAM % peak | block / grid |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for k in prof["kernels"]:
        regs = _opt(k["registers_per_thread"])
        if k.get("accum_vgprs") is not None:
            regs += f" (+{k['accum_vgprs']} acc)"
        shape = f"{k.get('block') or '—'} / {k.get('grid') or '—'}"
        out.append(
            f"| `{k['name'][:90]}` | {'yes' if k['target'] else ''} | {k['calls']} | {k['avg_us']:.3f} "
            f"| {k['share_pct']:.1f}% | {regs} | {_opt(k['shared_mem_bytes'])} | {_opt(k['occupancy_pct'], '{:.1f}')} "
            f"| {_opt(k['dram_gbps'], '{:.1f}')} | {_opt(k['dram_pct'], '{:.1f}')} | {shape} |"
        )
    if prof.get("more_kernels"):
        out.append(f"| ... {prof['more_kernels']} more kernels | | | | | | | | | | |")
    out.append("")
    if prof.get("classes"):
        out.append("Per config class (the launches inside each config's `kopt:` NVTX/roctx range):")
        out.append("")
        for cls, ks in prof["classes"].items():
            out.append(
                f"- `{cls}`: "
                + "; ".join(
                    f"`{k['short']}` {k['avg_us']:.3f} us × {k['calls']} ({k['share_pct']:.0f}% of the class)"
                    for k in ks
                )
            )
        if prof.get("outside_ranges_pct") is not None:
            out.append(
                f"- outside any config's range: {prof['outside_ranges_pct']:.1f}% of the GPU time "
                "(cache flushes, input fills, setup)"
            )
        out.append("")
    for k in prof["kernels"]:
        if k.get("stalls"):
            top = sorted(((str(n), _num(v) or 0.0) for n, v in k["stalls"].items()), key=lambda x: -x[1])[:5]
            out.append(f"- Top stalls of `{k['short']}`: " + ", ".join(f"{n} {v:.1f}%" for n, v in top))
    if prof.get("not_reported"):
        out.append(
            f"Not in this profile: {', '.join(prof['not_reported'])} (kopt's profiler adapter does not "
            "collect them, or the GPU does not report them)."
        )
    return out + [""]


def _summaries(entries: Sequence[Mapping[str, Any]], collapse: bool) -> list[str]:
    if not entries:
        return []
    if collapse:
        counts = Counter(str(h["status"]) for h in entries)
        lo, hi = entries[0]["version"], entries[-1]["version"]
        return [
            f"- v{lo}–v{hi}: {len(entries)} older iterations summarised for size: "
            + ", ".join(f"{n} {s}" for s, n in counts.most_common())
        ]
    out = []
    for h in entries:
        scope = f"`{h['target_class']}`" if h.get("target_class") else "global"
        order = sorted(h["classes"], key=lambda c: c != h.get("target_class"))[:4]
        deltas = ", ".join(
            f"{c} {h['classes'][c]['delta_pct']:+.1f}%" for c in order if h["classes"][c].get("delta_pct") is not None
        )
        out.append(
            f"- v{h['version']} {h['status']} ({scope}): {_short(h['hypothesis'], 100)}"
            + (f" → {deltas}" if deltas else "")
        )
    return out


ONE_LINERS = 40
"""When full entries and one line per older entry do not fit, the one-line summaries are
kept for this many entries before the full ones; older ones become counts."""


def _fit(n: int, fits: Callable[[int, int], bool]) -> tuple[int, int]:
    """(collapsed, detail_from) with the most history in full that fits: first one line per
    older entry; then one line for the ONE_LINERS entries before the full ones and counts for
    the rest; then counts only. Each stage bisects (O(log n) renders)."""

    def first(cut: Callable[[int], int]) -> int | None:
        if not fits(cut(n), n):
            return None
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(cut(mid), mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    for cut in (lambda s: 0, lambda s: max(0, s - ONE_LINERS), lambda s: s):
        s = first(cut)
        if s is not None:
            return cut(s), s
    return n, n


def build_pack(inputs: PackInputs) -> Pack:
    """The context pack for one proposal, within the size budget."""
    data = _data(inputs)
    budget = inputs.max_bytes or inputs.config.propose.prompt_max_kib * 1024
    collapsed, detail_from = _fit(len(data["history"]), lambda c, s: len(_md(data, c, s)[0].encode()) <= budget)
    text, summary = _md(data, collapsed, detail_from)
    size = len(text.encode())
    data["history_summary"] = summary
    data["history"] = data["history"][detail_from:]
    data["budget"] = {"max_bytes": budget, "bytes": size, "summarised": detail_from, "over_budget": size > budget}
    return Pack(text, data, detail_from, size > budget)


# The pack as data

PACK_VERSION = 1
MAX_SOURCES = 120
MAX_FAILING_ROWS = 40
MAX_TRIED = 30


def _data(inputs: PackInputs) -> dict[str, Any]:
    cfg, meta = inputs.config, inputs.meta
    t = cfg.target
    all_its = sorted(inputs.iterations, key=lambda i: i.version)
    its = [i for i in all_its if not i.masked]
    best = projections.best_iteration(its)
    base = projections.baseline(its)
    classes = [str(c) for c in meta.get("classes") or sorted(best_per_class(its))]
    configs = (base.record.get("configs") or {}) if base else {}
    per_class_configs = Counter(str(c.get("cls")) for c in configs.values() if isinstance(c, Mapping))
    per_class_prod = Counter(
        str(c.get("cls")) for c in configs.values() if isinstance(c, Mapping) and c.get("production", True)
    )
    best_vals = best_per_class(its)
    base_vals = {
        str(c): _num(v.get("best"))
        for c, v in ((base.record.get("classes") or {}) if base else {}).items()
        if isinstance(v, Mapping)
    }
    roof = _roofline_section(
        cfg, (best.record.get("roofline") if best else None) or (base.record.get("roofline") if base else None), configs
    )
    roof_classes = (roof or {}).get("classes") or {}
    best_rows = {}
    for cls in classes:
        b, b0 = _num(best_vals.get(cls)), base_vals.get(cls)
        best_rows[cls] = {
            "value": b,
            "baseline": b0,
            "vs_baseline_pct": (b / b0 - 1.0) * 100.0 if b is not None and b0 else None,
            "pct_of_peak": (roof_classes.get(cls) or {}).get("pct_geomean"),
            "bound": (roof_classes.get(cls) or {}).get("bound"),
            "configs": per_class_configs.get(cls, 0),
            "production": per_class_prod.get(cls, 0),
        }
    profile, profile_src = _profile_of_best(its, best)
    counters = projections.counters(its)
    history = [
        _history_entry(i)
        for i in its
        if i.status != "baseline" and (i.final or i.awaiting_review) and i.version != inputs.iteration
    ]
    best_commit = best.commit if best else meta.get("best_commit")
    tried = [
        h
        for h in history
        if best_commit and h["best_commit_before"] == best_commit and not (best and h["version"] == best.version)
    ][-MAX_TRIED:]
    repair = None
    if inputs.repair:
        repair = {
            "attempt": inputs.repair,
            "of": cfg.propose.repair_attempts,
            "hypothesis": inputs.hypothesis,
            "target_class": inputs.target_class,
            "failing_rows": [
                {
                    "config": str(r.get("config")),
                    "cls": r.get("cls"),
                    "reasons": [str(x) for x in (r.get("reasons") or [])][:5],
                }
                for r in list(inputs.failing_rows)[:MAX_FAILING_ROWS]
            ],
            "more_failing_rows": max(0, len(inputs.failing_rows) - MAX_FAILING_ROWS),
        }
    sources = [asdict(s) for s in list(inputs.sources)[:MAX_SOURCES]]
    data: dict[str, Any] = {
        "kopt_pack": PACK_VERSION,
        "tag": meta.get("tag"),
        "iteration": inputs.iteration,
        "paths": {
            "worktree": str(inputs.worktree) if inputs.worktree else None,
            "plan": str(inputs.plan_path) if inputs.plan_path else "$KOPT_PLAN",
            "json": str(inputs.prompt_json_path) if inputs.prompt_json_path else "$KOPT_PROMPT_JSON",
        },
        "goal": {
            "bench": t.bench,
            "metric": t.metric,
            "direction": t.direction,
            "correct": t.correct or "the metric is present and finite",
            "best_commit": best_commit,
            "baseline_commit": meta.get("baseline_commit") or (base.commit if base else None),
            "best_version": best.version if best else None,
        },
        "rules": rules(cfg),
        "repair": repair,
        "target": {
            "config_columns": list(meta.get("config_columns") or t.config or []),
            "class_by": class_columns(t.class_by, meta.get("config_columns") or []),
            "classes": {
                c: {"configs": per_class_configs.get(c, 0), "production": per_class_prod.get(c, 0)} for c in classes
            },
            "production_rule": t.production or "every config",
            "protected": list(t.protected),
            "sources": sources,
            "more_sources": max(0, len(inputs.sources) - MAX_SOURCES),
            "dispatch": [s.path for s in inputs.sources if s.role == "dispatch"],
            "compile_flags": t.compile_flags or None,
        },
        "best": best_rows,
        "roofline": roof,
        "profile": _profile_section(profile, profile_src, configs),
        "tried_from_best": [
            {k: h[k] for k in ("version", "status", "hypothesis", "target_class", "reason")}
            | {"classes": {c: d["delta_pct"] for c, d in h["classes"].items()}}
            for h in tried
        ],
        "recent_regressions": [
            {
                k: r.get(k)
                for k in (
                    "version",
                    "hypothesis",
                    "class",
                    "metric_best",
                    "metric_cand",
                    "delta_pct",
                    "profiler_best_ns",
                    "profiler_cand_ns",
                    "files",
                    "notes",
                )
            }
            for r in counters.recent_regressions
        ],
        "consecutive_regressions": counters.consecutive_regressions,
        "stop_after_regressions": cfg.stop.consecutive_regressions,
        "other_lanes": [str(h) for h in inputs.other_lanes],
        "history": history,
        "history_summary": [],
        "masked_versions": [i.version for i in all_its if i.masked],
    }
    data["evidence"] = _evidence(data)
    return data

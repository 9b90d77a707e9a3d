"""The context pack as data (engine.propose.context writes it as text): every section put
together (`_data`, the JSON beside KOPT_PROMPT), the terms a plan may cite with the line of
evidence each stands for (`_evidence`, `METRIC_TERMS`), and the rules kopt hands every
proposer (`rules`).

`rules(cfg)` states, in the reference program's words, what a careful kernel engineer is
told before each change: correctness first, one bottleneck-driven hypothesis that points at
evidence, global or one class, the smallest change, no protected files, no commits, no
fake wins, the plan's format. Pure: data in, data and text out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from kopt_supervisor.engine import fmt, records
from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.metrics import class_columns
from kopt_supervisor.engine.projections import best_per_class
from kopt_supervisor.engine.propose.context_inputs import (
    PackInputs,
    _history_entry,
    _num,
    _profile_of_best,
    _profile_section,
    _roofline_section,
)


def rules(cfg: Config) -> list[str]:
    """The rules kopt enforces, one item each (markdown)."""
    t, d = cfg.target, cfg.decide
    protected = ", ".join(f"`{p}`" for p in t.protected) or "none declared"
    return [
        f"**Correctness first.** Every config row must pass `{t.correct or 'the metric is present and finite'}`; "
        f"NaN/Inf fail. A failing candidate gets up to {cfg.propose.repair_attempts} repair attempts on the same "
        "hypothesis: keep the direction, make the minimal fix.",
        "**One hypothesis per iteration, driven by a bottleneck.** It must point back to evidence in this brief: "
        "a config class, a profiled kernel, or a metric with its value (registers, shared memory, occupancy, "
        "memory throughput, % of the roofline). No guess-and-tune.",
        "**Global or one class.** Say which: `scope: global` (every class must not regress), or "
        "`target_class: <class>` (that class must improve and the others must not regress).",
        "**The smallest change** the hypothesis needs, inside this worktree only. Do not modify the benchmark "
        f"command, its shapes, or the protected files ({protected}); a candidate that touches one is rejected "
        "unevaluated.",
        "**No fake wins.** Do not reduce the work, skip or weaken correctness, cache outputs across calls, move "
        "work out of the timed region, patch timers or other modules, or add dependencies. The profiler covers "
        "every kernel launched per config, and every new best is re-verified in fresh processes.",
        "**Do not commit** (no git commands that change history): kopt formats, re-benches and commits keeps; a "
        "candidate with commits of its own is rejected.",
        f"**How kopt decides.** Best and candidate are timed interleaved (ABBA) and compared per config class with "
        f"a {d.confidence * 100:g}% interval: changes under {d.min_effect_pct:g}% are noise. A class that regresses "
        f"beyond {d.max_other_regression_pct:g}% while another improves is a split: specialise (a kernel plus "
        "dispatch for the class that gains) instead of forcing one kernel on every class. The profiler's GPU time "
        "must agree with the bench.",
        "**Hardware numbers** come only from the cited specs in this brief; never estimate a spec.",
        "**Write the plan** to `$KOPT_PLAN` before you finish: first line the hypothesis (one sentence); then "
        "`target_class: <class>` or `scope: global`; then the evidence from this brief it rests on (class, kernel, "
        "metric and its value) and what you changed. An empty plan is a failed proposal; a plan that cites no "
        "evidence is marked.",
    ]


PACK_VERSION = 1
MAX_SOURCES = 120
MAX_FAILING_ROWS = 40
MAX_TRIED = 30

METRIC_TERMS: dict[str, tuple[str, ...]] = {
    "registers": (
        "registers",
        "register",
        "regs",
        "register pressure",
        "vgpr",
        "vgprs",
        "sgpr",
        "sgprs",
        "agpr",
        "accum vgpr",
        "spill",
        "spills",
    ),
    "shared memory": ("shared memory", "smem", "lds", "shared mem"),
    "occupancy": ("occupancy", "active warps", "waves per"),
    "memory throughput": ("dram", "memory throughput", "bandwidth", "hbm", "gb/s", "tb/s", "bytes moved"),
    "roofline": (
        "roofline",
        "% of peak",
        "percent of peak",
        "of peak",
        "memory-bound",
        "memory bound",
        "compute-bound",
        "compute bound",
        "arithmetic intensity",
        "floor",
    ),
    "GPU time": ("gpu time", "kernel time", "per call", "share of gpu time"),
    "stall reasons": ("stall", "stalls", "waitcnt", "barrier", "vmcnt", "lgkmcnt"),
}
"""Citable metric names (lower case, matched as whole words) per metric the pack can show."""


def _data(inputs: PackInputs) -> dict[str, Any]:
    cfg, meta = inputs.config, inputs.meta
    t = cfg.target
    all_its = sorted(inputs.iterations, key=lambda i: i.version)
    its = [i for i in all_its if not i.masked]
    best = records.best_iteration(its)
    base = records.baseline(its)
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
    counters = records.counters(its)
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


def _evidence(data: Mapping[str, Any]) -> dict[str, Any]:
    """The terms a plan may cite, each with the line of evidence it stands for (the TUI
    shows the plan beside them)."""
    goal = data["goal"]
    classes: dict[str, str] = {}
    for cls, b in data["best"].items():
        bits = [f"best {fmt.num(b['value'])} {goal['metric']}"]
        if b.get("vs_baseline_pct") is not None:
            bits.append(f"{b['vs_baseline_pct']:+.1f}% vs baseline")
        if b.get("pct_of_peak") is not None:
            bits.append(f"{b['pct_of_peak']:.1f}% of its roofline ({b.get('bound')}-bound)")
        classes[cls] = ", ".join(bits)
    kernels: dict[str, str] = {}
    prof = data.get("profile") or {}
    for k in prof.get("kernels") or []:
        bits = [f"{k['avg_us']:.3f} us/launch", f"{k['share_pct']:.1f}% of GPU time"]
        for key, label, pattern in (
            ("registers_per_thread", "regs", "{:.0f}"),
            ("shared_mem_bytes", "smem B", "{:.0f}"),
            ("occupancy_pct", "occupancy %", "{:.1f}"),
            ("dram_pct", "DRAM % of peak", "{:.1f}"),
            ("dram_gbps", "DRAM GB/s", "{:.1f}"),
        ):
            if k.get(key) is not None:
                bits.append(f"{label} {pattern.format(k[key])}")
        kernels[k["name"]] = "; ".join(bits)
    metrics: dict[str, str] = {}
    reported = set(prof.get("reported") or [])
    for metric in ("registers", "shared memory", "occupancy", "memory throughput", "stall reasons"):
        if metric in reported:
            metrics[metric] = "in the profile of the best tree"
    if prof.get("kernels"):
        metrics["GPU time"] = f"target kernels {prof.get('target_per_call_us', 0):.3f} us per call"
    roof = data.get("roofline") or {}
    if roof.get("configs"):
        metrics["roofline"] = (
            f"per production config: bound, floor and % of peak (target {roof.get('target_pct'):g}%)"
            if any(r.get("bound") not in (None, "unknown") for r in roof["configs"])
            else "bytes/FLOPs per config (no peak known: no % of peak)"
        )
    metrics[str(goal["metric"])] = "the bench's metric per class"
    return {"classes": classes, "kernels": kernels, "metrics": metrics}

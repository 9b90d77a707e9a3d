"""The context pack: what a careful kernel engineer hands over before each change
(DESIGN.md §14; the reference program, router and diffusion rules).

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

`build_pack(inputs) -> Pack` is pure (data in, text out); `list_sources(worktree, cfg)` is
the edge that reads the worktree for the source list.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import bookkeeping
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.projections import best_per_class, fmt_num
from kopt_supervisor.engine.propose.prompt import rules
from kopt_supervisor.engine.records import Iteration

PACK_VERSION = 1
MAX_SOURCES = 120
MAX_KERNELS = 10
MAX_FAILING_ROWS = 40
MAX_TRIED = 30
DISPATCH_WORD = re.compile(r"(?i)\bdispatch")

METRIC_TERMS: dict[str, tuple[str, ...]] = {
    "registers": ("registers", "register", "regs", "register pressure", "vgpr", "vgprs", "sgpr", "sgprs",
                  "agpr", "accum vgpr", "spill", "spills"),
    "shared memory": ("shared memory", "smem", "lds", "shared mem"),
    "occupancy": ("occupancy", "active warps", "waves per"),
    "memory throughput": ("dram", "memory throughput", "bandwidth", "hbm", "gb/s", "tb/s", "bytes moved"),
    "roofline": ("roofline", "% of peak", "percent of peak", "of peak", "memory-bound", "memory bound",
                 "compute-bound", "compute bound", "arithmetic intensity", "floor"),
    "GPU time": ("gpu time", "kernel time", "per call", "share of gpu time"),
    "stall reasons": ("stall", "stalls", "waitcnt", "barrier", "vmcnt", "lgkmcnt"),
}
"""Citable metric names (lower case, matched as whole words) per metric the pack can show."""


# ---------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class SourceFile:
    path: str
    """Relative to the worktree."""
    bytes: int
    lines: int | None = None
    editable: bool = True
    """False: a protected file (the bench, its harness): read it, never change it."""
    role: str = "source"
    """"source", "dispatch" (names dispatch), "params" (the tune params file), "protected"."""


@dataclass(frozen=True)
class PackInputs:
    """Everything the pack is built from; the loop has all of it at proposal time."""

    config: Config
    meta: Mapping[str, Any]
    """The run's meta (store.meta()): tag, classes, config_columns, baseline_commit, ..."""
    iterations: Sequence[Iteration]
    """Every iteration, masked ones included (the pack leaves them out)."""
    iteration: int
    """The version being proposed."""
    repair: int = 0
    failing_rows: Sequence[Mapping[str, Any]] = ()
    """On a repair: {config, cls, reasons} per failing row (the loop's CorrectnessFailure)."""
    hypothesis: str = ""
    """On a repair: the hypothesis being repaired."""
    target_class: str | None = None
    sources: Sequence[SourceFile] = ()
    worktree: Path | None = None
    prompt_json_path: Path | None = None
    plan_path: Path | None = None
    other_lanes: Sequence[str] = ()
    """Hypotheses other lanes are trying right now (empty with one lane)."""
    max_bytes: int | None = None
    """The size budget; default [propose].prompt_max_kib."""


@dataclass(frozen=True)
class Pack:
    markdown: str
    data: dict[str, Any]
    summarised: int = 0
    """History entries summarised to fit the budget."""
    over_budget: bool = False

    @property
    def json(self) -> str:
        return json.dumps(self.data, indent=1, sort_keys=False, default=str) + "\n"


# ---------------------------------------------------------------------------------------
# The edge: source files of the worktree


def list_sources(worktree: Path, cfg: Config, tracked: Sequence[str] | None = None) -> list[SourceFile]:
    """The target's files at the worktree's HEAD: [target].sources (default every tracked
    file), protected ones marked read-only, files that name `dispatch` marked as such.
    Reads the files (sizes, line counts, the word `dispatch`); nothing is written."""
    from kopt_supervisor.engine import gitops

    files = sorted(tracked if tracked is not None else gitops.tree_files(worktree, "HEAD"))
    t = cfg.target
    chosen = gitops.matching(list(files), t.sources) if t.sources else list(files)
    protected = set(gitops.matching(list(files), t.protected)) if t.protected else set()
    params = cfg.propose.tune.params
    out = []
    for rel in sorted(set(chosen) | protected):
        path = worktree / rel
        try:
            size = path.stat().st_size
            data = path.read_bytes()[: 2 * 2**20] if size <= 8 * 2**20 else b""
        except OSError:
            continue
        text = data.decode("utf-8", "replace") if b"\0" not in data[:4096] else ""
        lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0) if text else None
        if rel in protected:
            role, editable = "protected", False
        elif params and rel == params:
            role, editable = "params", True
        elif text and DISPATCH_WORD.search(text):
            role, editable = "dispatch", True
        else:
            role, editable = "source", True
        out.append(SourceFile(rel, size, lines, editable, role))
    return out


# ---------------------------------------------------------------------------------------
# Building the pack's data


def _pct(ratio: Any) -> float | None:
    return (ratio - 1.0) * 100.0 if isinstance(ratio, int | float) and math.isfinite(ratio) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _short(text: Any, n: int = 160) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def kernel_short(name: str) -> str:
    """A kernel's function name: no namespace, template arguments or parameters."""
    base = re.split(r"[<(]", name, maxsplit=1)[0].strip()
    return base.rsplit("::", 1)[-1].split()[-1] if base else name


def _class_deltas(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for cls, c in (record.get("classes") or {}).items():
        if not isinstance(c, Mapping):
            continue
        out[str(cls)] = {
            "delta_pct": _num(c.get("delta_pct")) if c.get("delta_pct") is not None else _pct(c.get("ratio")),
            "lo_pct": _pct(c.get("lo")), "hi_pct": _pct(c.get("hi")),
            "verdict": c.get("verdict"), "rounds": c.get("rounds"),
            "best": _num(c.get("best")), "cand": _num(c.get("cand")),
        }
    return out


def _history_entry(it: Iteration) -> dict[str, Any]:
    rec = it.record
    decision = rec.get("decision") or {}
    prof = rec.get("profile") or {}
    cmp = prof.get("comparison") if isinstance(prof, Mapping) else None
    return {
        "version": it.version, "status": it.status, "hypothesis": _short(it.hypothesis, 300),
        "target_class": it.target_class, "scope": it.scope,
        "reason": _short(decision.get("reason"), 300),
        "classes": _class_deltas(rec),
        "profiler_delta_pct": _num((cmp or {}).get("delta_pct")) if isinstance(cmp, Mapping) else None,
        "changed_files": list(rec.get("changed_files") or [])[:10],
        "best_commit_before": it.best_commit_before,
        "repairs": it.repair_attempts,
    }


def _profile_of_best(its: Sequence[Iteration], best: Iteration | None) -> tuple[dict[str, Any] | None, str]:
    """The newest profile of the current best tree: the best side of a later iteration
    decided against it, or the candidate side of the keep that made it."""
    if best is None:
        return None, ""
    for it in reversed(its):
        prof = it.record.get("profile") or {}
        if not isinstance(prof, Mapping):
            continue
        if it.best_commit_before == best.commit and it.version > best.version and isinstance(prof.get("best"), Mapping):
            return dict(prof["best"]), f"v{it.version}'s profile of the best tree"
        if it.version == best.version:
            side = "best" if it.status == "baseline" else "cand"
            if isinstance(prof.get(side), Mapping):
                return dict(prof[side]), f"v{it.version}'s profile ({'baseline' if side == 'best' else 'the keep'})"
            if isinstance(prof.get("best"), Mapping) and it.status == "baseline":
                return dict(prof["best"]), f"v{it.version}'s profile (baseline)"
    return None, ""


def _per_class(profile: Mapping[str, Any], configs: Mapping[str, Any]) -> tuple[dict[str, Any], float | None]:
    """The profile's launches per config class, from the kernels launched inside each
    config's `kopt:` NVTX/roctx range (engine.profile.ranges), and the share of GPU time
    outside any config's range. Empty when the profile holds no ranges."""
    from kopt_supervisor.engine.profile.model import KOPT_PREFIX
    from kopt_supervisor.engine.profile.ranges import RangeMatcher, config_refs

    groups = [g for g in profile.get("ranged") or [] if isinstance(g, Mapping)]
    usable = {k: c for k, c in configs.items() if isinstance(c, Mapping) and "cls" in c}
    if not groups or not usable:
        return {}, None
    matcher = RangeMatcher(config_refs(usable))
    per: dict[str, dict[str, list[float]]] = {}
    outside = total = 0.0
    for g in groups:
        calls, t = int(g.get("calls") or 0), _num(g.get("total_ns")) or 0.0
        total += t
        rng = str(g.get("range") or "")
        ref = matcher.match(rng)[0] if not g.get("note") and rng.startswith(KOPT_PREFIX) else None
        if ref is None or calls <= 0:
            outside += t
            continue
        acc = per.setdefault(ref.cls, {}).setdefault(str(g.get("kernel")), [0, 0.0])
        acc[0] += calls
        acc[1] += t
    out: dict[str, Any] = {}
    for cls in sorted(per):
        ks = per[cls]
        ctot = sum(v[1] for v in ks.values()) or 1.0
        out[cls] = [{"kernel": k, "short": kernel_short(k), "calls": int(c), "avg_us": t / c / 1e3,
                     "total_us": t / 1e3, "share_pct": 100.0 * t / ctot}
                    for k, (c, t) in sorted(ks.items(), key=lambda kv: -kv[1][1])[:4]]
    return out, (100.0 * outside / total if total else None)


def _profile_section(profile: Mapping[str, Any] | None, source: str,
                     configs: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if not profile:
        return None
    kernels = [k for k in profile.get("kernels") or [] if isinstance(k, Mapping)]
    total = sum(_num(k.get("total_ns")) or 0.0 for k in kernels) or 1.0
    rows = []
    for k in kernels[:MAX_KERNELS]:
        name = str(k.get("name"))
        bw = _num(k.get("dram_bw_Bps"))
        rows.append({
            "name": name, "short": kernel_short(name), "target": bool(k.get("target")), "calls": k.get("calls"),
            "avg_us": (_num(k.get("avg_ns")) or 0.0) / 1e3, "share_pct": 100.0 * (_num(k.get("total_ns")) or 0.0) / total,
            "registers_per_thread": k.get("registers_per_thread"), "accum_vgprs": k.get("accum_vgprs"),
            "sgprs": k.get("sgprs"), "shared_mem_bytes": _num(k.get("shared_mem_bytes")),
            "scratch_bytes": _num(k.get("scratch_bytes")), "occupancy_pct": _num(k.get("occupancy_pct")),
            "dram_gbps": None if bw is None else bw / 1e9,
            "dram_pct": _num(k.get("dram_pct")), "block": k.get("block"), "grid": k.get("grid"),
            "stalls": k.get("stalls") if isinstance(k.get("stalls"), Mapping) else None,
        })
    per_class, outside_pct = _per_class(profile, configs or {})
    reported = {
        "registers": any(r["registers_per_thread"] is not None or r["accum_vgprs"] is not None for r in rows),
        "shared memory": any(r["shared_mem_bytes"] is not None for r in rows),
        "occupancy": any(r["occupancy_pct"] is not None for r in rows),
        "memory throughput": any(r["dram_gbps"] is not None or r["dram_pct"] is not None for r in rows),
        "stall reasons": any(r["stalls"] for r in rows),
        "per-class attribution": bool(per_class),
    }
    return {
        "source": source, "tool": profile.get("tool"), "kernel_regex": profile.get("kernel_regex"),
        "target_per_call_us": (_num(profile.get("target_per_call_ns")) or 0.0) / 1e3,
        "calls": profile.get("calls"), "hottest": profile.get("hottest"),
        "kernels": rows, "more_kernels": max(0, len(kernels) - MAX_KERNELS),
        "reported": [k for k, v in reported.items() if v],
        "not_reported": [k for k, v in reported.items() if not v],
        "classes": per_class or None,
        "outside_ranges_pct": outside_pct,
        "ranges_source": profile.get("ranges_source") or None,
    }


def _roofline_section(cfg: Config, roof: Mapping[str, Any] | None, configs: Mapping[str, Any]) -> dict[str, Any] | None:
    if not roof or not isinstance(roof, Mapping) or roof.get("error"):
        return {"error": roof.get("error")} if isinstance(roof, Mapping) and roof.get("error") else None
    scale = cfg.roofline.unit_scale
    target = float(roof.get("target_pct") or cfg.stop.target_pct_of_peak)
    prod = set(roof.get("production") or [])
    rows = []
    for key, p in (roof.get("configs") or {}).items():
        if not isinstance(p, Mapping):
            continue
        floor, seconds = _num(p.get("floor_s")), _num(p.get("seconds"))
        rows.append({
            "config": key, "cls": (configs.get(key) or {}).get("cls"), "production": key in prod if prod else True,
            "bytes": _num(p.get("bytes")), "flops": _num(p.get("flops")), "intensity": _num(p.get("intensity")),
            "bound": p.get("bound"), "floor": None if floor is None else floor / scale,
            "measured": None if seconds is None else seconds / scale,
            "pct_of_peak": _num(p.get("pct_of_peak")),
            "target": None if floor is None else floor / (target / 100.0) / scale,
            "suspicious": bool(p.get("suspicious")),
        })
    rows.sort(key=lambda r: (not r["production"], str(r["cls"]), r["config"]))
    return {
        "gpu": roof.get("gpu"), "specs": [str(v) for v in (roof.get("specs") or {}).values()],
        "target_pct": target, "unit": cfg.target.metric, "flops_formula": cfg.roofline.flops,
        "bytes_formula": cfg.roofline.bytes, "configs": rows,
        "classes": {str(c): {"bound": v.get("bound"), "pct_geomean": _num(v.get("pct_geomean")),
                             "pct_min": _num(v.get("pct_min"))}
                    for c, v in (roof.get("classes") or {}).items() if isinstance(v, Mapping)},
    }


def _data(inputs: PackInputs) -> dict[str, Any]:
    cfg, meta = inputs.config, inputs.meta
    t = cfg.target
    all_its = sorted(inputs.iterations, key=lambda i: i.version)
    its = [i for i in all_its if not i.masked]
    best = bookkeeping.best_iteration(its)
    base = bookkeeping.baseline(its)
    classes = [str(c) for c in meta.get("classes") or sorted(best_per_class(its))]
    configs = (base.record.get("configs") or {}) if base else {}
    per_class_configs = Counter(str(c.get("cls")) for c in configs.values() if isinstance(c, Mapping))
    per_class_prod = Counter(str(c.get("cls")) for c in configs.values() if isinstance(c, Mapping) and c.get("production", True))
    best_vals = best_per_class(its)
    base_vals = {str(c): _num(v.get("best")) for c, v in ((base.record.get("classes") or {}) if base else {}).items()
                 if isinstance(v, Mapping)}
    roof = _roofline_section(cfg, (best.record.get("roofline") if best else None) or
                             (base.record.get("roofline") if base else None), configs)
    roof_classes = (roof or {}).get("classes") or {}
    best_rows = {}
    for cls in classes:
        b, b0 = _num(best_vals.get(cls)), base_vals.get(cls)
        best_rows[cls] = {
            "value": b, "baseline": b0,
            "vs_baseline_pct": (b / b0 - 1.0) * 100.0 if b is not None and b0 else None,
            "pct_of_peak": (roof_classes.get(cls) or {}).get("pct_geomean"),
            "bound": (roof_classes.get(cls) or {}).get("bound"),
            "configs": per_class_configs.get(cls, 0), "production": per_class_prod.get(cls, 0),
        }
    profile, profile_src = _profile_of_best(its, best)
    counters = bookkeeping.counters(its)
    history = [_history_entry(i) for i in its if i.status != "baseline" and (i.final or i.awaiting_review)
               and i.version != inputs.iteration]
    best_commit = best.commit if best else meta.get("best_commit")
    tried = [h for h in history if best_commit and h["best_commit_before"] == best_commit
             and not (best and h["version"] == best.version)][-MAX_TRIED:]
    repair = None
    if inputs.repair:
        repair = {
            "attempt": inputs.repair, "of": cfg.propose.repair_attempts, "hypothesis": inputs.hypothesis,
            "target_class": inputs.target_class,
            "failing_rows": [{"config": str(r.get("config")), "cls": r.get("cls"),
                              "reasons": [str(x) for x in (r.get("reasons") or [])][:5]}
                             for r in list(inputs.failing_rows)[:MAX_FAILING_ROWS]],
            "more_failing_rows": max(0, len(inputs.failing_rows) - MAX_FAILING_ROWS),
        }
    sources = [asdict(s) for s in list(inputs.sources)[:MAX_SOURCES]]
    data: dict[str, Any] = {
        "kopt_pack": PACK_VERSION,
        "tag": meta.get("tag"), "iteration": inputs.iteration,
        "paths": {"worktree": str(inputs.worktree) if inputs.worktree else None,
                  "plan": str(inputs.plan_path) if inputs.plan_path else "$KOPT_PLAN",
                  "json": str(inputs.prompt_json_path) if inputs.prompt_json_path else "$KOPT_PROMPT_JSON"},
        "goal": {"bench": t.bench, "metric": t.metric, "direction": t.direction,
                 "correct": t.correct or "the metric is present and finite",
                 "best_commit": best_commit, "baseline_commit": meta.get("baseline_commit") or (base.commit if base else None),
                 "best_version": best.version if best else None},
        "rules": rules(cfg),
        "repair": repair,
        "target": {
            "config_columns": list(meta.get("config_columns") or t.config or []),
            "class_by": list(t.class_by or meta.get("config_columns") or []),
            "classes": {c: {"configs": per_class_configs.get(c, 0), "production": per_class_prod.get(c, 0)} for c in classes},
            "production_rule": t.production or "every config",
            "protected": list(t.protected), "sources": sources,
            "more_sources": max(0, len(inputs.sources) - MAX_SOURCES),
            "dispatch": [s.path for s in inputs.sources if s.role == "dispatch"],
            "compile_flags": t.compile_flags or None,
        },
        "best": best_rows,
        "roofline": roof,
        "profile": _profile_section(profile, profile_src, configs),
        "tried_from_best": [{k: h[k] for k in ("version", "status", "hypothesis", "target_class", "reason")}
                            | {"classes": {c: d["delta_pct"] for c, d in h["classes"].items()}} for h in tried],
        "recent_regressions": [{k: r.get(k) for k in ("version", "hypothesis", "class", "metric_best", "metric_cand",
                                                       "delta_pct", "profiler_best_ns", "profiler_cand_ns", "files",
                                                       "notes")} for r in counters.recent_regressions],
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
        bits = [f"best {fmt_num(b['value'])} {goal['metric']}"]
        if b.get("vs_baseline_pct") is not None:
            bits.append(f"{b['vs_baseline_pct']:+.1f}% vs baseline")
        if b.get("pct_of_peak") is not None:
            bits.append(f"{b['pct_of_peak']:.1f}% of its roofline ({b.get('bound')}-bound)")
        classes[cls] = ", ".join(bits)
    kernels: dict[str, str] = {}
    prof = data.get("profile") or {}
    for k in prof.get("kernels") or []:
        bits = [f"{k['avg_us']:.3f} us/launch", f"{k['share_pct']:.1f}% of GPU time"]
        for key, label, fmt in (("registers_per_thread", "regs", "{:.0f}"), ("shared_mem_bytes", "smem B", "{:.0f}"),
                                ("occupancy_pct", "occupancy %", "{:.1f}"), ("dram_pct", "DRAM % of peak", "{:.1f}"),
                                ("dram_gbps", "DRAM GB/s", "{:.1f}")):
            if k.get(key) is not None:
                bits.append(f"{label} {fmt.format(k[key])}")
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
        metrics["roofline"] = (f"per production config: bound, floor and % of peak (target {roof.get('target_pct'):g}%)"
                               if any(r.get("bound") not in (None, "unknown") for r in roof["configs"])
                               else "bytes/FLOPs per config (no peak known: no % of peak)")
    metrics[str(goal["metric"])] = "the bench's metric per class"
    return {"classes": classes, "kernels": kernels, "metrics": metrics}


# ---------------------------------------------------------------------------------------
# Markdown


def _fmt_delta(d: Mapping[str, Any]) -> str:
    if d.get("delta_pct") is None:
        return str(d.get("verdict") or "—")
    iv = f" [{d['lo_pct']:+.1f}, {d['hi_pct']:+.1f}]" if d.get("lo_pct") is not None and d.get("hi_pct") is not None else ""
    rounds = f", {d['rounds']} rounds" if d.get("rounds") else ""
    return f"{d['delta_pct']:+.1f}%{iv} {d.get('verdict') or ''}{rounds}".rstrip()


def _opt(v: Any, fmt: str = "{:.0f}") -> str:
    return "—" if v is None else fmt.format(v)


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
    out += [f"Goal: make `{metric}` {'lower' if g['direction'] == 'min' else 'higher'} for `{g['bench']}` "
            "without breaking correctness.",
            f"BEST_COMMIT: `{g['best_commit']}`" + (f" (v{g['best_version']})" if g.get("best_version") is not None else "")
            + f"; baseline `{g['baseline_commit']}`. This worktree starts at BEST_COMMIT.", ""]
    paths = data["paths"]
    out += ["## Your task", "",
            "1. Read this brief. Pick the config class or kernel that limits performance most, from the evidence below.",
            "2. Choose exactly one hypothesis that points at that bottleneck; say whether it is global or for one class.",
            "3. Make the smallest change that tests it" + (f", in `{paths['worktree']}`" if paths.get("worktree") else
                                                            ", in this worktree") + ".",
            f"4. Write the plan to `{paths['plan']}`: first line the hypothesis; then `target_class: <class>` or "
            "`scope: global`; then the evidence it rests on (class, kernel, metric and value from this brief).",
            f"5. Stop. kopt benchmarks, decides, profiles and commits. (This brief as JSON: `{paths['json']}`.)", ""]
    out += ["## Rules kopt enforces (you cannot bypass them)", "", *(f"- {r}" for r in data["rules"]), ""]
    rep = data.get("repair")
    if rep:
        out += ["## Repair this candidate", "",
                f"The hypothesis under repair: {rep['hypothesis'] or '(none recorded)'}"
                + (f" (class `{rep['target_class']}`)" if rep.get("target_class") else ""),
                "Keep the optimisation direction; make the minimal change that restores correctness for every row.",
                "", "Failing rows:", ""]
        for r in rep["failing_rows"]:
            out.append(f"- `{r['config']}` (class `{r.get('cls')}`): {'; '.join(r['reasons']) or 'failed'}")
        if rep.get("more_failing_rows"):
            out.append(f"- ... and {rep['more_failing_rows']} more rows")
        out.append("")
    out += ["## Target", "",
            f"- Benchmark (fixed, run by kopt): `{g['bench']}`",
            f"- Metric: `{metric}` ({'lower' if g['direction'] == 'min' else 'higher'} is better); correctness: `{g['correct']}`",
            f"- Config columns: {', '.join(f'`{c}`' for c in t['config_columns']) or '—'}; classes by "
            f"{', '.join(f'`{c}`' for c in t['class_by']) or 'all config columns'}; production configs: `{t['production_rule']}`",
            f"- Protected (read-only): {', '.join(f'`{p}`' for p in t['protected']) or 'none declared'}"]
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
    out += [f"## Best per config class (current BEST_COMMIT, `{metric}`)", "",
            "| class | configs (production) | best | baseline | vs baseline | % of roofline | bound |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for cls, b in data["best"].items():
        out.append(f"| `{cls}` | {b['configs']} ({b['production']}) | {fmt_num(b['value'])} | {fmt_num(b['baseline'])} "
                   f"| {_opt(b['vs_baseline_pct'], '{:+.1f}%')} | {_opt(b['pct_of_peak'], '{:.1f}%')} | {b.get('bound') or '—'} |")
    out.append("")
    out += _md_roofline(data.get("roofline"), metric)
    out += _md_profile(data.get("profile"))
    out += ["## Already tried from the current BEST (do not repeat without a new reason)", ""]
    if data["tried_from_best"]:
        for h in data["tried_from_best"]:
            deltas = ", ".join(f"`{c}` {v:+.1f}%" for c, v in h["classes"].items() if v is not None)
            out.append(f"- v{h['version']} {h['status']}"
                       + (f" (class `{h['target_class']}`)" if h.get("target_class") else " (global)")
                       + f": {h['hypothesis']}" + (f" → {deltas}" if deltas else "")
                       + (f" — {h['reason']}" if h.get("reason") else ""))
    else:
        out.append("- nothing yet")
    out += ["", f"## Recent regressions ({data['consecutive_regressions']} in a row; the run stops at "
            f"{data['stop_after_regressions']})", ""]
    if data["recent_regressions"]:
        for r in data["recent_regressions"]:
            prof = ""
            if r.get("profiler_best_ns") and r.get("profiler_cand_ns"):
                prof = f"; GPU time {r['profiler_best_ns'] / 1e3:.3f} → {r['profiler_cand_ns'] / 1e3:.3f} us"
            out.append(f"- v{r['version']} `{r.get('class')}`: {r.get('hypothesis')} — {metric} "
                       f"{fmt_num(r.get('metric_best'))} → {fmt_num(r.get('metric_cand'))}"
                       f" ({_opt(r.get('delta_pct'), '{:+.2f}%')}){prof}"
                       + (f"; files {', '.join(r.get('files') or [])}" if r.get("files") else ""))
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
        out += ["", f"(Masked iterations, left out on purpose: {', '.join(f'v{v}' for v in data['masked_versions'][:30])}.)"]
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
    out += ["", f"Formulas: bytes `{roof.get('bytes_formula') or '—'}`, FLOPs `{roof.get('flops_formula') or '—'}`. "
            f"Stop target: every production config at ≥ {roof['target_pct']:g}% of its roofline.", "",
            f"| config | class | prod | bytes | FLOPs | FLOP/B | bound | floor {metric} | best {metric} | % of peak | "
            f"target {metric} |", "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in roof["configs"]:
        out.append(f"| `{r['config']}` | `{r.get('cls')}` | {'yes' if r['production'] else 'no'} | {fmt_num(r['bytes'])} "
                   f"| {fmt_num(r['flops'])} | {fmt_num(r['intensity'])} | {r.get('bound')} | {fmt_num(r['floor'])} "
                   f"| {fmt_num(r['measured'])} | {_opt(r['pct_of_peak'], '{:.1f}%')} | {fmt_num(r['target'])} |"
                   + (" suspicious: faster than the floor" if r.get("suspicious") else ""))
    if roof.get("classes"):
        out += ["", "Per class: " + "; ".join(
            f"`{c}` {v.get('bound')}-bound, {_opt(v.get('pct_geomean'), '{:.1f}%')} of peak (min {_opt(v.get('pct_min'), '{:.1f}%')})"
            for c, v in roof["classes"].items())]
    return out + [""]


def _md_profile(prof: Mapping[str, Any] | None) -> list[str]:
    out = ["## Profiler evidence (the best tree)", ""]
    if not prof:
        return out + ["No profile of the best tree yet (no profiler on this machine, [profile].kind = \"none\", "
                      "or no keep has been profiled). Reason from the roofline and the per-class history.", ""]
    out += [f"From {prof['source']} ({prof.get('tool')}; target kernels `{prof.get('kernel_regex') or '.*'}`): "
            f"**{prof['target_per_call_us']:.3f} us per call** over {prof.get('calls')} calls; hottest "
            f"`{prof.get('hottest')}`.", "",
            "| kernel | target | calls | avg us | share | regs | smem B | occupancy % | DRAM GB/s | DRAM % peak | block / grid |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for k in prof["kernels"]:
        regs = _opt(k["registers_per_thread"])
        if k.get("accum_vgprs") is not None:
            regs += f" (+{k['accum_vgprs']} acc)"
        shape = f"{k.get('block') or '—'} / {k.get('grid') or '—'}"
        out.append(f"| `{k['name'][:90]}` | {'yes' if k['target'] else ''} | {k['calls']} | {k['avg_us']:.3f} "
                   f"| {k['share_pct']:.1f}% | {regs} | {_opt(k['shared_mem_bytes'])} | {_opt(k['occupancy_pct'], '{:.1f}')} "
                   f"| {_opt(k['dram_gbps'], '{:.1f}')} | {_opt(k['dram_pct'], '{:.1f}')} | {shape} |")
    if prof.get("more_kernels"):
        out.append(f"| ... {prof['more_kernels']} more kernels | | | | | | | | | | |")
    out.append("")
    if prof.get("classes"):
        out.append("Per config class (the launches inside each config's `kopt:` NVTX/roctx range):")
        out.append("")
        for cls, ks in prof["classes"].items():
            out.append(f"- `{cls}`: " + "; ".join(
                f"`{k['short']}` {k['avg_us']:.3f} us × {k['calls']} ({k['share_pct']:.0f}% of the class)" for k in ks))
        if prof.get("outside_ranges_pct") is not None:
            out.append(f"- outside any config's range: {prof['outside_ranges_pct']:.1f}% of the GPU time "
                       "(cache flushes, input fills, setup)")
        out.append("")
    for k in prof["kernels"]:
        if k.get("stalls"):
            top = sorted(((str(n), _num(v) or 0.0) for n, v in k["stalls"].items()), key=lambda x: -x[1])[:5]
            out.append(f"- Top stalls of `{k['short']}`: " + ", ".join(f"{n} {v:.1f}%" for n, v in top))
    if prof.get("not_reported"):
        out.append(f"Not in this profile: {', '.join(prof['not_reported'])} (kopt's profiler adapter does not "
                   "collect them, or the GPU does not report them).")
    return out + [""]


def _summaries(entries: Sequence[Mapping[str, Any]], collapse: bool) -> list[str]:
    if not entries:
        return []
    if collapse:
        counts = Counter(str(h["status"]) for h in entries)
        lo, hi = entries[0]["version"], entries[-1]["version"]
        return [f"- v{lo}–v{hi}: {len(entries)} older iterations summarised for size: "
                + ", ".join(f"{n} {s}" for s, n in counts.most_common())]
    out = []
    for h in entries:
        scope = f"`{h['target_class']}`" if h.get("target_class") else "global"
        order = sorted(h["classes"], key=lambda c: c != h.get("target_class"))[:4]
        deltas = ", ".join(f"{c} {h['classes'][c]['delta_pct']:+.1f}%" for c in order
                           if h["classes"][c].get("delta_pct") is not None)
        out.append(f"- v{h['version']} {h['status']} ({scope}): {_short(h['hypothesis'], 100)}"
                   + (f" → {deltas}" if deltas else ""))
    return out


# ---------------------------------------------------------------------------------------
# The pack


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
    collapsed, detail_from = _fit(len(data["history"]),
                                  lambda c, s: len(_md(data, c, s)[0].encode()) <= budget)
    text, summary = _md(data, collapsed, detail_from)
    size = len(text.encode())
    data["history_summary"] = summary
    data["history"] = data["history"][detail_from:]
    data["budget"] = {"max_bytes": budget, "bytes": size, "summarised": detail_from, "over_budget": size > budget}
    return Pack(text, data, detail_from, size > budget)

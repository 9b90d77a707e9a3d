"""What the context pack (engine.propose.context) is built from, its evidence sections, the
terms a plan may cite with the line of evidence each stands for (`_evidence`, `METRIC_TERMS`),
and the rules kopt hands every proposer (`rules`).

`PackInputs` is what the loop has at proposal time, `Pack` what the pack yields, and
`list_sources` the pack's one edge: it reads the worktree for the source list. Each evidence
section is built from iteration records: an iteration as a history entry (per-class deltas
with their intervals), the newest profile of the best tree (per kernel, and per config class
from the NVTX/roctx ranges), the roofline per config. Pure, except `list_sources`.

`rules(cfg)` states, in the reference program's words, what a careful kernel engineer is
told before each change: correctness first, one bottleneck-driven hypothesis that points at
evidence, global or one class, the smallest change, no protected files, no commits, no
fake wins, the plan's format.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.records import Iteration

DISPATCH_WORD = re.compile(r"(?i)\bdispatch")


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


MAX_KERNELS = 10


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
            "lo_pct": _pct(c.get("lo")),
            "hi_pct": _pct(c.get("hi")),
            "verdict": c.get("verdict"),
            "rounds": c.get("rounds"),
            "best": _num(c.get("best")),
            "cand": _num(c.get("cand")),
        }
    return out


def _history_entry(it: Iteration) -> dict[str, Any]:
    rec = it.record
    decision = rec.get("decision") or {}
    prof = rec.get("profile") or {}
    cmp = prof.get("comparison") if isinstance(prof, Mapping) else None
    return {
        "version": it.version,
        "status": it.status,
        "hypothesis": _short(it.hypothesis, 300),
        "target_class": it.target_class,
        "scope": it.scope,
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
    config's `kopt:` NVTX/roctx range (engine.profile.classes), and the share of GPU time
    outside any config's range. Empty when the profile holds no ranges."""
    from kopt_supervisor.engine.profile.classes import RangeMatcher, config_refs
    from kopt_supervisor.engine.profile.summary import KOPT_PREFIX

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
        out[cls] = [
            {
                "kernel": k,
                "short": kernel_short(k),
                "calls": int(c),
                "avg_us": t / c / 1e3,
                "total_us": t / 1e3,
                "share_pct": 100.0 * t / ctot,
            }
            for k, (c, t) in sorted(ks.items(), key=lambda kv: -kv[1][1])[:4]
        ]
    return out, (100.0 * outside / total if total else None)


def _profile_section(
    profile: Mapping[str, Any] | None, source: str, configs: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    if not profile:
        return None
    kernels = [k for k in profile.get("kernels") or [] if isinstance(k, Mapping)]
    total = sum(_num(k.get("total_ns")) or 0.0 for k in kernels) or 1.0
    rows = []
    for k in kernels[:MAX_KERNELS]:
        name = str(k.get("name"))
        bw = _num(k.get("dram_bw_Bps"))
        rows.append(
            {
                "name": name,
                "short": kernel_short(name),
                "target": bool(k.get("target")),
                "calls": k.get("calls"),
                "avg_us": (_num(k.get("avg_ns")) or 0.0) / 1e3,
                "share_pct": 100.0 * (_num(k.get("total_ns")) or 0.0) / total,
                "registers_per_thread": k.get("registers_per_thread"),
                "accum_vgprs": k.get("accum_vgprs"),
                "sgprs": k.get("sgprs"),
                "shared_mem_bytes": _num(k.get("shared_mem_bytes")),
                "scratch_bytes": _num(k.get("scratch_bytes")),
                "occupancy_pct": _num(k.get("occupancy_pct")),
                "dram_gbps": None if bw is None else bw / 1e9,
                "dram_pct": _num(k.get("dram_pct")),
                "block": k.get("block"),
                "grid": k.get("grid"),
                "stalls": k.get("stalls") if isinstance(k.get("stalls"), Mapping) else None,
            }
        )
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
        "source": source,
        "tool": profile.get("tool"),
        "kernel_regex": profile.get("kernel_regex"),
        "target_per_call_us": (_num(profile.get("target_per_call_ns")) or 0.0) / 1e3,
        "calls": profile.get("calls"),
        "hottest": profile.get("hottest"),
        "kernels": rows,
        "more_kernels": max(0, len(kernels) - MAX_KERNELS),
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
        rows.append(
            {
                "config": key,
                "cls": (configs.get(key) or {}).get("cls"),
                "production": key in prod if prod else True,
                "bytes": _num(p.get("bytes")),
                "flops": _num(p.get("flops")),
                "intensity": _num(p.get("intensity")),
                "bound": p.get("bound"),
                "floor": None if floor is None else floor / scale,
                "measured": None if seconds is None else seconds / scale,
                "pct_of_peak": _num(p.get("pct_of_peak")),
                "target": None if floor is None else floor / (target / 100.0) / scale,
                "suspicious": bool(p.get("suspicious")),
            }
        )
    rows.sort(key=lambda r: (not r["production"], str(r["cls"]), r["config"]))
    return {
        "gpu": roof.get("gpu"),
        "specs": [str(v) for v in (roof.get("specs") or {}).values()],
        "target_pct": target,
        "unit": cfg.target.metric,
        "flops_formula": cfg.roofline.flops,
        "bytes_formula": cfg.roofline.bytes,
        "configs": rows,
        "classes": {
            str(c): {
                "bound": v.get("bound"),
                "pct_geomean": _num(v.get("pct_geomean")),
                "pct_min": _num(v.get("pct_min")),
            }
            for c, v in (roof.get("classes") or {}).items()
            if isinstance(v, Mapping)
        },
    }


# The rules and the citable evidence


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

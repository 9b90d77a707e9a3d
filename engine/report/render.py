"""results.md, rendered from the gathered run (pure: data in, markdown out).

Every number in the text comes from `RunData` (samples and records of run.db), the
`RooflineView` computed from it, the recorded environment, or the frozen kopt.toml; the
section "Where the numbers come from" in docs/reports.md maps each one to its source.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.projections import profile_ns_per_call
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.collect import RunData
from kopt_supervisor.engine.report.roofline_view import RooflineView
from kopt_supervisor.engine.report.stats import Summary, geomean, speedup, summarize

SECTIONS = (
    "Summary",
    "Speedup per config",
    "Speedup per class",
    "Latency per config",
    "Latency per class over iterations",
    "Kept iterations",
    "Dispatch",
    "Roofline",
    "Profiler",
    "GPU and idle-state evidence",
    "Commands",
    "Environment",
    "Provenance",
    "All iterations",
    "Masked iterations",
)
"""The `## ` headings of results.md, in order (every one is always present)."""


@dataclass(frozen=True)
class ConfigStats:
    key: str
    cls: str
    production: bool
    baseline: Summary | None
    final: Summary | None
    speedup: float | None


@dataclass(frozen=True)
class ReportInputs:
    data: RunData
    cfg: Config
    tag: str
    environment: dict[str, Any]
    environment_when: str
    """"at baseline" or "at report time"."""
    roofline: RooflineView
    chart_text: str
    png_name: str | None
    """The PNG chart's file name beside results.md, when one was drawn."""
    chart_note: str
    """A line under the chart heading (why the chart is text), or ""."""
    final_tree_sha: str | None
    config_text: str
    generated_at: float = field(default_factory=time.time)


# ---------------------------------------------------------------------------------------
# Numbers


def config_stats(data: RunData, direction: str) -> list[ConfigStats]:
    out = []
    for key, info in sorted(data.configs.items(), key=lambda kv: (kv[1].cls, kv[0])):
        b = summarize(data.baseline_tree.values.get(key, []))
        f = summarize(data.final_tree.values.get(key, []))
        out.append(ConfigStats(key, info.cls, info.production, b, f,
                               speedup(b.median if b else None, f.median if f else None, direction)))
    return out


def class_speedups(stats: Sequence[ConfigStats]) -> dict[str, tuple[float | None, int, bool]]:
    """class -> (geomean speedup, configs it rests on, True when over production configs)."""
    out = {}
    for cls in sorted({s.cls for s in stats}):
        mine = [s for s in stats if s.cls == cls]
        prod = [s for s in mine if s.production]
        use = prod or mine
        out[cls] = (geomean(s.speedup for s in use), len(use), bool(prod))
    return out


def production_geomean(stats: Sequence[ConfigStats]) -> tuple[float | None, int]:
    prod = [s for s in stats if s.production]
    return geomean(s.speedup for s in prod), len(prod)


def paired_chain_speedup(chain: Sequence[Iteration], cls: str) -> float | None:
    """1 / the product of the keeps' paired cost ratios for `cls` (each measured best vs
    candidate in one session): an estimate that no cross-session drift enters."""
    product = 1.0
    seen = False
    for it in chain:
        c = (it.record.get("classes") or {}).get(cls) or {}
        ratio = c.get("ratio")
        if isinstance(ratio, int | float) and ratio > 0:
            product *= ratio
            seen = True
    return 1.0 / product if seen else (1.0 if not chain else None)


def class_medians(values: Mapping[str, list[float]], class_of: Mapping[str, str]) -> dict[str, float | None]:
    """Per class: geometric mean of its configs' medians."""
    per: dict[str, list[float | None]] = {}
    for key, cls in class_of.items():
        s = summarize(values.get(key, []))
        per.setdefault(cls, []).append(s.median if s else None)
    return {cls: geomean(v) for cls, v in sorted(per.items())}


# ---------------------------------------------------------------------------------------
# Markdown helpers (numbers are written by engine.fmt)


def _delta_of_speedup(v: float | None) -> str:
    """The metric's change a speedup stands for (1.25× -> -20.00%)."""
    return fmt.ratio_pct(1 / v) if v else fmt.DASH


def _cell(text: Any, limit: int = 300) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")[:limit]


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"``{text}``"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align or "---" for _ in header) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _summary_cells(s: Summary | None) -> list[str]:
    if s is None:
        return ["0", *(fmt.DASH,) * 6]
    return [str(s.n), *(fmt.num(v) for v in (s.median, s.mean, s.std, s.min, s.p10, s.p90))]


# ---------------------------------------------------------------------------------------
# The document


def render_results(inp: ReportInputs) -> str:
    d, cfg = inp.data, inp.cfg
    direction = cfg.target.direction
    stats = config_stats(d, direction)
    out: list[str] = [
        f"# Results: kopt run `{inp.tag}`",
        "",
        f"Written by `kopt report {inp.tag}` on {fmt.timestamp(inp.generated_at)} from the run's store (run.db). "
        "Masked iterations are left out of every statistic and listed at the end.",
        "",
    ]
    out += _summary(inp, stats)
    out += _speedup_per_config(inp, stats)
    out += _speedup_per_class(inp, stats)
    out += _latency_per_config(inp, stats)
    out += _chart(inp)
    out += _kept(inp)
    out += _dispatch(inp, stats)
    out += _roofline(inp)
    out += _profiler(inp)
    out += _gpu(inp)
    out += _commands(inp)
    out += _environment(inp)
    out += _provenance(inp)
    out += _all_iterations(inp)
    out += _masked(inp)
    return "\n".join(out).rstrip() + "\n"


def _summary(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    d, cfg = inp.data, inp.cfg
    gm, n_prod = production_geomean(stats)
    per_class = class_speedups(stats)
    candidates = [it for it in d.unmasked if it.status != "baseline"]
    meta = d.meta
    better = "lower" if cfg.target.direction == "min" else "higher"
    lines = [
        "## Summary",
        "",
        f"- Target: `{meta.get('repo')}`, metric `{cfg.target.metric}` ({better} is better), "
        f"bench {_code(cfg.target.bench)}",
        f"- **Geometric-mean speedup over the {n_prod} production config(s): {fmt.speedup(gm)}** "
        f"(equal weight; per config baseline median / final median"
        f"{'' if cfg.target.direction == 'min' else ' inverted for a throughput'}; above 1 is better)",
        "- Per class: " + (", ".join(f"`{c}` {fmt.speedup(v)}" for c, (v, _, _) in per_class.items()) or "—"),
        f"- Baseline commit `{d.baseline.commit}`; final commit (BEST_COMMIT) `{d.best.commit}`"
        + (f", source tree `{inp.final_tree_sha}`" if inp.final_tree_sha else ""),
        f"- {len(d.chain)} kept iteration(s) in the final tree out of {len(candidates)} candidate iteration(s); "
        f"{len(d.masked)} masked",
        f"- Run state: {meta.get('state') or '—'}; stop reason: {meta.get('stop_reason') or '—'}",
        "- Decisions: best and candidate measured paired in the same session ("
        + ("`ab_command` blocks" if cfg.target.ab_command else "bench runs in ABBA order")
        + f"); a class counts as changed when its interval at {cfg.decide.confidence:g} confidence, valid "
        f"under repeated looks, excludes 0 and the change is at least {cfg.decide.min_effect_pct:g}%; "
        f"{fmt.seconds(_gpu_seconds(d.unmasked))} of benchmarking over the unmasked iterations, "
        f"{fmt.hours(float(meta.get('active_s') or 0))} of engine time",
        "",
    ]
    if meta.get("notice"):
        lines += [f"> **Note:** {meta['notice']}", ""]
    if not d.chain:
        lines += ["Nothing was kept: the final tree is the baseline, so every speedup is 1 by construction.", ""]
    return lines


def _gpu_seconds(its: Iterable[Iteration]) -> float:
    total = 0.0
    for it in its:
        spent = it.record.get("gpu_seconds") or {}
        if isinstance(spent, Mapping):
            total += sum(float(v) for v in spent.values() if isinstance(v, int | float))
    return total


def _speedup_per_config(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    metric = inp.cfg.target.metric
    rows = [[s.key, s.cls, "yes" if s.production else "no", fmt.num(s.baseline.median if s.baseline else None),
             fmt.num(s.final.median if s.final else None), fmt.speedup(s.speedup), _delta_of_speedup(s.speedup)]
            for s in stats]
    gm, n = production_geomean(stats)
    rows.append([f"**geomean over {n} production config(s)**", "", "", "", "", fmt.speedup(gm), _delta_of_speedup(gm)])
    return ["## Speedup per config", "",
            f"Median `{metric}` of every sample of each tree (counts in *Latency per config*); "
            "Δ is the final tree's change in the metric against the baseline.", "",
            *_table(["config", "class", "production", f"baseline median {metric}", f"final median {metric}",
                     "speedup", "Δ"], rows), ""]


def _speedup_per_class(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    rows = []
    for cls, (v, n, prod) in class_speedups(stats).items():
        paired = paired_chain_speedup(inp.data.chain, cls)
        rows.append([cls, f"{n} {'production' if prod else 'config(s), none production'}", fmt.speedup(v), fmt.speedup(paired)])
    return ["## Speedup per class", "",
            "Geometric mean of the class's per-config speedups (its production configs, or all of its "
            "configs when none is production). The paired estimate multiplies the kept iterations' "
            "paired ratios (each measured best vs candidate, interleaved in one session), so drift "
            "between sessions does not enter it; the two agree when the run was stable.", "",
            *_table(["class", "configs", "speedup (medians)", "speedup (paired, chain of keeps)"], rows), ""]


def _latency_per_config(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    d = inp.data
    rows = []
    for s in stats:
        rows.append([s.key, "baseline", *_summary_cells(s.baseline)])
        rows.append(["", "final", *_summary_cells(s.final)])

    def sources(tree: Any) -> str:
        return ", ".join(f"v{v} ({n})" for v, n in tree.sources.items()) or "none"

    return ["## Latency per config", "",
            f"Every sample of the baseline tree `{fmt.sha(d.baseline.commit)}` and of the final tree "
            f"`{fmt.sha(d.best.commit)}` measured in this run, in `{inp.cfg.target.metric}`: one sample is one "
            "config's value from one bench run (or one block of an ab_command run). The current best is "
            "re-measured beside every candidate, so a tree's samples come from several iterations. "
            "std is the sample standard deviation; p10/p90 interpolate linearly.", "",
            f"- baseline tree samples by iteration (samples over all configs): {sources(d.baseline_tree)}",
            f"- final tree samples by iteration: {sources(d.final_tree)}", "",
            *_table([ "config", "tree", "samples", "median", "mean", "std", "min", "p10", "p90"], rows), ""]


def _chart(inp: ReportInputs) -> list[str]:
    lines = ["## Latency per class over iterations", ""]
    if inp.png_name:
        lines += [f"![best latency per class]({inp.png_name})", ""]
    if inp.chart_note:
        lines += [inp.chart_note, ""]
    return [*lines, "```text", inp.chart_text.rstrip(), "```", ""]


def _class_deltas(it: Iteration) -> str:
    parts = []
    for cls, c in sorted((it.record.get("classes") or {}).items()):
        delta = c.get("delta_pct")
        lo, hi = c.get("lo"), c.get("hi")
        if delta is None:
            continue
        interval = f" {fmt.interval(lo, hi)}" if fmt.is_num(lo) and fmt.is_num(hi) else ""
        parts.append(f"{cls} {fmt.pct(delta)}{interval} {c.get('verdict', '')}".rstrip())
    return "; ".join(parts) or "—"


def _kept(inp: ReportInputs) -> list[str]:
    d = inp.data
    rows = []
    for it in d.chain:
        dec = it.record.get("decision") or {}
        rows.append([f"v{it.version}", fmt.sha(it.commit), it.hypothesis, it.target_class or "global",
                     f"{it.status} ({dec.get('by', 'engine')})", _class_deltas(it), _profiler_change(it),
                     dec.get("rounds") or "—", fmt.num(dec.get("gpu_seconds")),
                     ", ".join(it.record.get("changed_files") or []) or "—"])
    lines = ["## Kept iterations", "",
             "The keeps the final tree is made of, oldest first. Δ per class is the candidate against the "
             "best of that moment, measured paired; the interval is the decision's, at "
             f"{inp.cfg.decide.confidence:g} confidence, valid under its repeated looks.", ""]
    if rows:
        lines += _table(["iteration", "commit", "hypothesis", "target", "verdict (by)", "Δ per class [interval]",
                         "profiler ns/call best → cand", "rounds", "GPU-s", "files"], rows)
    else:
        lines.append("None: no candidate was kept.")
    stray = d.stray_keeps
    if stray:
        lines += ["", "Kept but not part of the final tree (left out of the statistics): "
                  + ", ".join(f"v{it.version} ({it.hypothesis})" for it in stray)]
    return [*lines, ""]


def _profiler_change(it: Iteration) -> str:
    """The profiler's confirmation of a keep: target kernels' time per call, best → candidate."""
    prof = it.record.get("profile") or {}
    if prof.get("error"):
        return f"failed: {prof['error']}"
    cmp = prof.get("comparison") or {}
    best = cmp.get("best_per_call_ns", profile_ns_per_call(prof.get("best")))
    cand = cmp.get("cand_per_call_ns", profile_ns_per_call(prof.get("cand")))
    if best is None or cand is None:
        return "not profiled"
    delta = cmp.get("delta_pct")
    if delta is None and best:
        delta = (cand / best - 1) * 100
    return f"{fmt.num(best)} → {fmt.num(cand)}" + (f" ({fmt.pct(delta)})" if delta is not None else "")


def _dispatch(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    d = inp.data
    lines = ["## Dispatch", ""]
    targeted = [it for it in d.chain if it.target_class and it.scope != "global"]
    if not targeted:
        return [*lines, "The run did not specialise kernels per class: every keep applies to all classes.", ""]
    base_cls = class_medians(d.baseline_tree.values, {k: c.cls for k, c in d.configs.items()})
    final_cls = class_medians(d.final_tree.values, {k: c.cls for k, c in d.configs.items()})
    per_class = class_speedups(stats)
    rows = []
    for cls in d.classes:
        mine = [it for it in targeted if it.target_class == cls]
        impl = "; ".join(f"v{it.version} `{fmt.sha(it.commit)}`: {it.hypothesis}" for it in mine) or \
            "the shared path (global keeps only)"
        params = [str((it.record.get("proposal") or {}).get("params")) for it in mine
                  if (it.record.get("proposal") or {}).get("params") is not None]
        kernel = _kernel_of(mine[-1]) if mine else _kernel_of(d.best)
        n = sum(1 for c in d.configs.values() if c.cls == cls)
        rows.append([cls, n, impl + (f" (params {', '.join(params)})" if params else ""), kernel,
                     f"{fmt.num(base_cls.get(cls))} → {fmt.num(final_cls.get(cls))}", fmt.speedup(per_class[cls][0])])
    return [*lines,
            "Class-targeted keeps specialise the kernel per config class; the class key is the dispatch "
            "condition. Latency is the geometric mean of the class's per-config medians.", "",
            *_table(["dispatch condition (class)", "configs", "implementation (the keeps that chose it)", "kernel",
                     f"{inp.cfg.target.metric} baseline → final", "speedup"], rows), ""]


def _kernel_of(it: Iteration) -> str:
    prof = it.record.get("profile") or {}
    side = prof.get("cand") if it.status != "baseline" else prof.get("best")
    return (side or {}).get("hottest") or "not profiled"


# ---------------------------------------------------------------------------------------
# Roofline and profiler


def _roofline(inp: ReportInputs) -> list[str]:
    rv = inp.roofline
    r = inp.cfg.roofline
    lines = ["## Roofline", ""]
    if not rv.available:
        lines += [f"Not measured: {rv.why_not}.", ""]
    else:
        p = rv.peaks
        assert p is not None
        unit = inp.cfg.target.metric
        lines += [
            f"- GPU: {rv.gpu_name or 'unknown'}",
            f"- FLOPs per call: `{r.flops or '0'}`; bytes per call: `{r.bytes or '0'}` "
            "(inputs read once, outputs written once)",
            f"- peak bandwidth: {p.bandwidth_spec.line()}",
            f"- peak compute: {p.flops_spec.line()}",
            "- floor = max(bytes / peak bandwidth, FLOPs / peak compute); % of peak = floor / measured time",
            "",
        ]
        rows = []
        for key, fp in rv.final.items():
            bp = rv.baseline.get(key)
            floor = None if fp.floor_s is None else fp.floor_s / r.unit_scale
            rows.append([key, fmt.num(fp.flops), fmt.num(fp.bytes), fmt.num(fp.intensity), fp.bound,
                         fmt.num(floor), fmt.rate(bp.achieved_Bps if bp else None, "B/s"),
                         fmt.rate(fp.achieved_Bps, "B/s"), fmt.rate(fp.achieved_flops, "FLOP/s"),
                         fmt.share(bp.pct_of_peak if bp else None), fmt.share(fp.pct_of_peak),
                         "**faster than its floor: suspicious**" if fp.suspicious else ""])
        lines += _table(["config", "FLOPs", "bytes", "FLOP/byte", "bound", f"floor {unit}", "baseline bandwidth",
                         "final bandwidth", "final FLOP/s", "baseline % of peak", "final % of peak", "note"], rows)
        lines += [""]
        if rv.final_classes:
            crow = []
            for cls, c in rv.final_classes.items():
                b = rv.baseline_classes.get(cls)
                crow.append([cls, c.bound, fmt.share(b.pct_geomean if b else None), fmt.share(c.pct_geomean),
                             fmt.share(c.pct_min), _blocker(c.bound, c.pct_geomean, inp.cfg.stop.target_pct_of_peak)])
            lines += _table(["class", "bound", "baseline % of peak", "final % of peak", "lowest final %",
                             "bound or blocker"], crow)
            lines += [""]
    recorded = _recorded_roofline(inp.data)
    if recorded:
        lines += recorded
    if inp.data.meta.get("roofline_md"):
        lines += ["The Step 0 analysis written at the baseline is in the workspace's README.md.", ""]
    return lines


def _blocker(bound: str, pct: float | None, target: float) -> str:
    if bound in ("unknown", "mixed") or pct is None:
        return ("no sourced peak for this GPU: the bound cannot be named" if bound == "unknown"
                else "configs of this class have different bounds")
    side = "memory bandwidth" if bound == "memory" else "compute throughput"
    if pct >= target:
        return f"{side}: at {fmt.share(pct)} of its roofline, the stop target ({fmt.share(target)}) is reached"
    return f"{side}: at {fmt.share(pct)} of its roofline, below the {fmt.share(target)} stop target"


def _recorded_roofline(d: RunData) -> list[str]:
    """What the loop recorded for the final tree, from that keep's own samples."""
    rec = d.best.record.get("roofline")
    if not isinstance(rec, Mapping) or not rec:
        return []
    where = f"the loop's roofline record of v{d.best.version} (from that iteration's own samples)"
    if rec.get("error"):
        return [f"- {where}: the analysis failed: {rec['error']}", ""]
    classes = rec.get("classes")
    if isinstance(classes, Mapping) and all(isinstance(c, Mapping) for c in classes.values()):
        parts = [f"`{cls}` {fmt.share(c.get('pct_geomean'))} ({c.get('bound', '—')})" for cls, c in classes.items()]
        return [f"- In {where}: % of peak per class: {', '.join(parts) or '—'}", ""]
    return [f"Recorded in {where}:", "", *generic_tables(rec), ""]


def generic_tables(obj: Any, title: str = "") -> list[str]:
    """A dict of records as markdown tables, whatever keys the records hold."""
    if not isinstance(obj, Mapping):
        return [f"- {title}: {fmt.value(obj)}"] if title else [fmt.value(obj)]
    scalars = {k: v for k, v in obj.items() if not isinstance(v, Mapping | list)}
    records = {k: v for k, v in obj.items() if isinstance(v, Mapping)}
    lines: list[str] = []
    if title:
        lines += [f"*{title}*", ""]
    if scalars:
        lines += _table(["key", "value"], [[k, fmt.value(v)] for k, v in scalars.items()]) + [""]
    flat = {k: v for k, v in records.items() if all(not isinstance(x, Mapping | list) for x in v.values())}
    if flat:
        cols: list[str] = []
        for v in flat.values():
            cols += [c for c in v if c not in cols]
        lines += _table(["", *cols], [[k, *(fmt.value(v.get(c)) for c in cols)] for k, v in flat.items()]) + [""]
    for k, v in records.items():
        if k not in flat:
            lines += generic_tables(v, str(k))
    return lines


KERNEL_COLUMNS = (("name", "kernel"), ("target", "target"), ("calls", "calls"), ("avg_ns", "avg ns"), ("total_ns", "total ns"),
                  ("registers_per_thread", "registers"), ("registers", "registers"),
                  ("shared_mem_bytes", "shared mem B"), ("occupancy_pct", "occupancy %"),
                  ("dram_pct", "DRAM % of peak"), ("dram_bw_Bps", "DRAM B/s"))


def _profiler(inp: ReportInputs) -> list[str]:
    d = inp.data
    lines = ["## Profiler", ""]
    base = (d.baseline.record.get("profile") or {}).get("best")
    final = None
    if d.best.status == "baseline":
        final = base
    else:
        final = (d.best.record.get("profile") or {}).get("cand")
    if not base and not final:
        return [*lines, f"Not measured: no profile was recorded in this run ([profile].kind = "
                        f"\"{inp.cfg.profile.kind}\").", ""]
    for label, summary in (("baseline", base), ("final", final)):
        if not summary:
            lines += [f"- {label}: not profiled"]
            continue
        lines += [f"- {label}: target kernels {fmt.num(profile_ns_per_call(summary))} ns per call "
                  f"(tool {summary.get('tool', '—')}, regex `{summary.get('kernel_regex', '') or '.*'}`), "
                  f"hottest `{summary.get('hottest', '—')}`"]
    lines.append("")
    kernels = (final or base or {}).get("kernels") or []
    if kernels:
        present = [(k, h) for k, h in KERNEL_COLUMNS if any(kr.get(k) is not None for kr in kernels)]
        cols: list[tuple[str, str]] = []
        for k, h in present:  # one column per heading: the first key that has it
            if all(h != heading for _, heading in cols):
                cols.append((k, h))
        lines += [f"Kernels of the {'final' if final else 'baseline'} tree, hottest first:", ""]
        lines += _table([h for _, h in cols], [[_kernel_cell(k, kr.get(k)) for k, _ in cols] for kr in kernels[:10]])
        lines.append("")
    return lines


def _kernel_cell(key: str, value: Any) -> str:
    if key == "name" and isinstance(value, str):
        return f"`{value if len(value) <= 80 else value[:79] + '…'}`"
    return fmt.value(value)


# ---------------------------------------------------------------------------------------
# GPU, commands, environment, provenance


def _gpu_state(ev: Mapping[str, Any] | None) -> str:
    if not ev:
        return "not read"
    if ev.get("missing"):
        return "the GPU vanished"
    parts = []
    if ev.get("util_pct") is not None:
        parts.append(f"util {fmt.value(ev['util_pct'])}%")
    if ev.get("mem_used_mib") is not None:
        parts.append(f"mem {fmt.value(ev['mem_used_mib'])} MiB")
    foreign = ev.get("foreign_processes")
    if foreign is None:
        foreign = ev.get("processes")
    if foreign is not None:
        parts.append(f"{len(foreign)} foreign process(es)" if foreign else "no foreign process")
    if ev.get("throttle"):
        parts.append("throttle " + ",".join(map(str, ev["throttle"])))
    if ev.get("temp_c") is not None:
        parts.append(f"{fmt.value(ev['temp_c'])} °C")
    if ev.get("sm_clock_mhz") is not None:
        parts.append(f"SM {fmt.value(ev['sm_clock_mhz'])} MHz")
    if ev.get("time"):
        parts.append(f"at {ev['time']}")
    return ", ".join(parts) or "read, no fields"


def _gpu(inp: ReportInputs) -> list[str]:
    d = inp.data
    env = inp.environment
    used: dict[tuple[Any, Any, Any], list[int]] = {}
    flagged = []
    for it in d.unmasked:
        g = it.record.get("gpu") or {}
        if g:
            used.setdefault((g.get("index"), g.get("name"), g.get("uuid")), []).append(it.version)
        for f in g.get("flagged_rounds") or []:
            flagged.append(f"v{it.version} round {f.get('round')}: {'; '.join(f.get('flags') or [])}")
    lines = ["## GPU and idle-state evidence", "",
             f"- Host: `{env.get('host', '—')}` (captured {inp.environment_when})"]
    for (index, name, uuid), versions in used.items():
        lines.append(f"- GPU index {index if index is not None else '—'}, model {name or '—'}, UUID "
                     f"{uuid or '—'}: iterations {_ranges(versions)}")
    if not used:
        lines.append("- No GPU was recorded.")
    lines += [f"- Rounds the gate flagged (throttling or a new process during the step): {len(flagged)}", ""]
    rows = []
    for it in [d.baseline, *d.chain]:
        g = it.record.get("gpu") or {}
        rows.append([f"v{it.version}", g.get("index", "—") if g.get("index") is not None else "—",
                     _gpu_state(g.get("before")), _gpu_state(g.get("after")),
                     len(g.get("flagged_rounds") or [])])
    lines += ["The chosen GPU's state as the gate read it before the first and after the last timed step of "
              "the baseline and of every kept iteration:", "",
              *_table(["iteration", "GPU", "before", "after", "flagged rounds"], rows), ""]
    if flagged:
        lines += ["Flagged rounds:", "", *[f"- {f}" for f in flagged], ""]
    return lines


def _ranges(versions: list[int]) -> str:
    out: list[str] = []
    runs: list[list[int]] = []
    for v in sorted(versions):
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    for run in runs:
        out.append(f"v{run[0]}" if len(run) == 1 else f"v{run[0]}–v{run[-1]}")
    return ", ".join(out)


def _commands(inp: ReportInputs) -> list[str]:
    cfg, d = inp.cfg, inp.data
    t = cfg.target
    recorded_proposer = next((str((it.record.get("proposal") or {}).get("command")) for it in reversed(d.unmasked)
                              if (it.record.get("proposal") or {}).get("command")), None)
    prof_cmds = sorted({str(c) for it in d.unmasked for c in _profile_commands(it.record.get("profile"))})
    lines = ["## Commands", "",
             f"- Bench (run in the tree's worktree): {_code(t.bench)}; CSV `{t.csv}`"
             + (" (its stdout)" if t.csv == "-" else "") + f"; metric `{t.metric}`; correctness "
             + (f"`{t.correct}`" if t.correct else "metric present and finite") + "; NaN/Inf always fail",
             ]
    if t.ab_command:
        lines.append(f"- A/B command (best and candidate interleaved in one process): {_code(t.ab_command)}")
    lines.append(f"- Proposer: `{cfg.propose.kind}`"
                 + (f", command {_code(cfg.propose.command)}" if cfg.propose.command else "")
                 + (f" (as run: {_code(recorded_proposer)})" if recorded_proposer and
                    recorded_proposer != cfg.propose.command else ""))
    if cfg.propose.kind == "tune":
        lines.append(f"  - tune: params file `{cfg.propose.tune.params}`, space {cfg.propose.tune.space}, "
                     f"per class: {cfg.propose.tune.per_class}")
    lines.append("- Format (before every keep commit): " + (_code(cfg.format.command) if cfg.format.command
                                                             else "none configured"))
    p = cfg.profile
    lines.append(f"- Profiler: kind `{p.kind}`, kernel regex `{p.kernel or '.*'}`, profiled command "
                 + (_code(p.command) if p.command else "the bench"))
    for c in prof_cmds:
        lines.append(f"  - as run: {_code(c)}")
    lines += [f"- Reproduce: `kopt init --repo {d.meta.get('repo')} --tag NEW_TAG --config "
              f"<workspace>/{inp.tag}/kopt.toml` then `kopt run NEW_TAG` (the frozen config is under "
              "*Provenance*)", ""]
    return lines


def _profile_commands(profile: Any) -> list[Any]:
    """The profiler command lines a profile record names (at its top or per side)."""
    if not isinstance(profile, Mapping):
        return []
    found = [profile["command"]] if profile.get("command") else []
    return found + [s["command"] for s in profile.values() if isinstance(s, Mapping) and s.get("command")]


def _environment(inp: ReportInputs) -> list[str]:
    env = inp.environment
    bp = env.get("bench_python") or {}
    gs = env.get("gpu_software") or {}
    kp = env.get("kopt_python") or {}

    def v(x: Any) -> str:
        return "not installed" if x is None else str(x)

    torch_build = []
    if bp.get("torch"):
        torch_build.append(f"CUDA {bp['torch_cuda']}" if bp.get("torch_cuda") else "no CUDA build")
        if bp.get("torch_hip"):
            torch_build.append(f"HIP {bp['torch_hip']}")
    lines = ["## Environment", "",
             f"Captured {inp.environment_when} ({env.get('captured_at', '—')}).", "",
             f"- Host `{env.get('host', '—')}`, {env.get('platform', '—')}"]
    if bp.get("error"):
        lines.append(f"- Bench Python: could not be asked: {bp['error']} ({bp.get('found_by', '')})")
    else:
        lines += [f"- Bench Python: {bp.get('version', '—')} `{bp.get('executable', '—')}` (found by "
                  f"{bp.get('found_by', '—')})",
                  f"- torch: {v(bp.get('torch'))}" + (f" ({', '.join(torch_build)})" if torch_build else ""),
                  f"- triton: {v(bp.get('triton'))}"]
    lines.append(f"- kopt's Python: {kp.get('version', '—')} `{kp.get('executable', '—')}`")
    if gs.get("driver") or gs.get("cuda_driver") or gs.get("rocm"):
        parts = [f"driver {gs.get('driver') or '—'}"]
        if gs.get("cuda_driver"):
            parts.append(f"CUDA (driver API) {gs['cuda_driver']}")
        if gs.get("rocm"):
            parts.append(f"ROCm {gs['rocm']}")
        lines.append(f"- GPU software ({gs.get('vendor')}): {', '.join(parts)} (from {gs.get('source', '—')})")
    else:
        lines.append(f"- GPU driver and CUDA/ROCm: N/A ({gs.get('note', 'not read')})")
    flags = env.get("compile_flags")
    lines.append("- Compile flags ([target].compile_flags): " + (_code(flags) if flags else "none declared"))
    tenv = env.get("target_env") or {}
    lines.append("- Extra environment ([target].env): "
                 + (", ".join(f"`{k}={val}`" for k, val in sorted(tenv.items())) if tenv else "none"))
    return [*lines, ""]


def _provenance(inp: ReportInputs) -> list[str]:
    d = inp.data
    return ["## Provenance", "",
            f"- Target repository: `{d.meta.get('repo')}`",
            f"- Baseline commit: `{d.baseline.commit}`",
            f"- Final commit (BEST_COMMIT, branch `kopt/{inp.tag}`): `{d.best.commit}`",
            f"- Final source hash (git tree of the final commit): `{inp.final_tree_sha or 'not readable'}`",
            f"- `kopt export {inp.tag} --branch NAME` makes a branch with only the kept source changes and "
            "this file (docs/reports.md says what is left out)",
            "",
            "<details><summary>The run's frozen kopt.toml</summary>", "",
            "```toml", inp.config_text.rstrip(), "```", "", "</details>", ""]


def _all_iterations(inp: ReportInputs) -> list[str]:
    d = inp.data
    counts: dict[str, int] = {}
    for it in d.unmasked:
        counts[it.status] = counts.get(it.status, 0) + 1
    rows = [[f"v{it.version}", it.status, it.hypothesis, it.target_class or "global", _class_deltas(it),
             (it.record.get("decision") or {}).get("reason", "")]
            for it in d.unmasked]
    return ["## All iterations", "",
            "Unmasked iterations by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), "",
            "<details><summary>Every unmasked iteration</summary>", "",
            *_table(["iteration", "status", "hypothesis", "target", "Δ per class [interval]", "reason"], rows),
            "", "</details>", ""]


def _masked(inp: ReportInputs) -> list[str]:
    masked = inp.data.masked
    lines = ["## Masked iterations", ""]
    if not masked:
        return [*lines, "None.", ""]
    rows = [[f"v{it.version}", it.status, it.hypothesis, fmt.sha(it.commit) if it.commit else "—",
             (it.record.get("decision") or {}).get("reason", "")] for it in masked]
    return [*lines, "Masked (by `kopt memory mask` or a restart): kept in run.db and memory/, left out of every "
            "number above.", "", *_table(["iteration", "status (masked)", "hypothesis", "commit", "reason"], rows), ""]

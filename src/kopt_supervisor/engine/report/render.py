"""results.md, rendered from the gathered run (pure: data in, markdown out): the sections in
their order, and those on speedup and latency per config and class (Summary, Speedup per
config and per class, Latency per config and per class over iterations, Dispatch) with the
numbers they rest on; the other sections come from engine/report/iterations.py and
engine/report/provenance.py. Also the latency chart beside results.md.

Every number in the text comes from `RunData` (samples and records of run.db), the
`RooflineView` computed from it, the recorded environment, or the frozen kopt.toml; the
section "Where the numbers come from" in docs/reports.md maps each one to its source.

The chart: best metric per class over iterations (kept points). `class_series(...)` turns the
chain of kept trees into one series per class: the class's geometric mean of per-config
medians of each kept tree, at the iteration that kept it. `text_chart(...)` draws it with
block characters (pure, always embedded in results.md); `write_png(...)` draws it with
matplotlib when it is importable (a step line per class on a log axis, a marker at each
keep) and returns False when it is not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.projections import best_speedup, ran_unsandboxed, sandbox_line
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report import iterations, provenance
from kopt_supervisor.engine.report.inputs import ReportInputs, RunData, Summary, geomean, speedup, summarize
from kopt_supervisor.engine.report.inputs import code as _code
from kopt_supervisor.engine.report.inputs import table as _table

SECTIONS = (
    "Summary",
    "Speedup per config",
    "Speedup per class",
    "Latency per config",
    "Latency per class over iterations",
    "Kept iterations",
    "Progress and where the time went",
    "Dispatch",
    "Roofline",
    "Profiler",
    "GPU and idle-state evidence",
    "Agent costs",
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


# ---------------------------------------------------------------------------------------
# Numbers


def config_stats(data: RunData, direction: str) -> list[ConfigStats]:
    out = []
    for key, info in sorted(data.configs.items(), key=lambda kv: (kv[1].cls, kv[0])):
        b = summarize(data.baseline_tree.values.get(key, []))
        f = summarize(data.final_tree.values.get(key, []))
        out.append(
            ConfigStats(
                key,
                info.cls,
                info.production,
                b,
                f,
                speedup(b.median if b else None, f.median if f else None, direction),
            )
        )
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
    out += iterations.kept_iterations(inp)
    out += provenance.progress_section(d.iterations, direction)
    out += _dispatch(inp, stats)
    out += provenance.roofline_section(inp)
    out += iterations.profiler_section(d, inp.cfg)
    out += provenance.gpu(inp)
    out += iterations.agents_section(d.iterations, cfg)
    out += provenance.commands(inp)
    out += provenance.environment(inp)
    out += provenance.provenance(inp)
    out += iterations.all_iterations(inp)
    out += iterations.masked_iterations(inp)
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
        f"- `kopt status` and the dashboard say {fmt.speedup(best_speedup(d.iterations, cfg.target.direction))}: "
        "the geometric mean over the classes, the guard's included, of each class's recorded value at the "
        "baseline against its best (docs/reports.md)",
        f"- Baseline commit `{d.baseline.commit}`; final commit (BEST_COMMIT) `{d.best.commit}`"
        + (f", source tree `{inp.final_tree_sha}`" if inp.final_tree_sha else ""),
        f"- {len(d.chain)} kept iteration(s) in the final tree out of {len(candidates)} candidate iteration(s); "
        f"{len(d.masked)} masked",
        f"- Run state: {meta.get('state') or '—'}; stop reason: {meta.get('stop_reason') or '—'}",
        "- Decisions: best and candidate measured paired in the same session ("
        + ("each tree's own served process, looks in ABBA order" if cfg.target.serve else "bench runs in ABBA order")
        + f"); a class counts as changed when its interval at {cfg.decide.confidence:g} confidence, valid "
        f"under repeated looks, excludes 0 and the change is at least {cfg.decide.min_effect_pct:g}%; "
        f"{fmt.seconds(_gpu_seconds(d.unmasked))} of benchmarking over the unmasked iterations, "
        f"{fmt.hours(float(meta.get('active_s') or 0))} of engine time",
    ]
    cost = meta.get("decision_cost")
    if isinstance(cost, Mapping) and cost.get("text"):
        lines.append(
            f"- One decision with this bench ({cost.get('mode')}, estimated after the baseline): "
            f"{cost['text']}" + (" **(slow)**" if cost.get("slow") else "")
        )
    agent = iterations.agent_summary_line(d.iterations, cfg)
    if agent:
        lines.append(agent)
    unsandboxed = ran_unsandboxed(meta)
    lines += [f"- Sandbox: **{sandbox_line(meta)}**" if unsandboxed else f"- Sandbox: {sandbox_line(meta)}", ""]
    if unsandboxed:
        lines += [
            "> **Warning:** proposers and candidate code of this run ran without kopt's sandbox "
            "(the line above says why): nothing kept them from kopt's state, the best tree or the bench's files "
            "(docs/security.md). Treat every number below as the word of unconfined code.",
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
    rows = [
        [
            s.key,
            s.cls,
            "yes" if s.production else "no",
            fmt.num(s.baseline.median if s.baseline else None),
            fmt.num(s.final.median if s.final else None),
            fmt.speedup(s.speedup),
            _delta_of_speedup(s.speedup),
        ]
        for s in stats
    ]
    gm, n = production_geomean(stats)
    rows.append([f"**geomean over {n} production config(s)**", "", "", "", "", fmt.speedup(gm), _delta_of_speedup(gm)])
    return [
        "## Speedup per config",
        "",
        f"Median `{metric}` of every sample of each tree (counts in *Latency per config*); "
        "Δ is the final tree's change in the metric against the baseline.",
        "",
        *_table(
            ["config", "class", "production", f"baseline median {metric}", f"final median {metric}", "speedup", "Δ"],
            rows,
        ),
        "",
    ]


def _speedup_per_class(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    rows = []
    for cls, (v, n, prod) in class_speedups(stats).items():
        paired = paired_chain_speedup(inp.data.chain, cls)
        rows.append(
            [cls, f"{n} {'production' if prod else 'config(s), none production'}", fmt.speedup(v), fmt.speedup(paired)]
        )
    return [
        "## Speedup per class",
        "",
        "Geometric mean of the class's per-config speedups (its production configs, or all of its "
        "configs when none is production). The paired estimate multiplies the kept iterations' "
        "paired ratios (each measured best vs candidate, interleaved in one session), so drift "
        "between sessions does not enter it; the two agree when the run was stable.",
        "",
        *_table(["class", "configs", "speedup (medians)", "speedup (paired, chain of keeps)"], rows),
        "",
    ]


def _latency_per_config(inp: ReportInputs, stats: list[ConfigStats]) -> list[str]:
    d = inp.data
    rows = []
    for s in stats:
        rows.append([s.key, "baseline", *_summary_cells(s.baseline)])
        rows.append(["", "final", *_summary_cells(s.final)])

    def sources(tree: Any) -> str:
        return ", ".join(f"v{v} ({n})" for v, n in tree.sources.items()) or "none"

    return [
        "## Latency per config",
        "",
        f"Every sample of the baseline tree `{fmt.sha(d.baseline.commit)}` and of the final tree "
        f"`{fmt.sha(d.best.commit)}` measured in this run, in `{inp.cfg.target.metric}`: one sample is one "
        "config's value from one bench run (or one served look). The current best is "
        "re-measured beside every candidate, so a tree's samples come from several iterations. "
        "std is the sample standard deviation; p10/p90 interpolate linearly.",
        "",
        f"- baseline tree samples by iteration (samples over all configs): {sources(d.baseline_tree)}",
        f"- final tree samples by iteration: {sources(d.final_tree)}",
        f"- left out because the GPU gate flagged their round (throttling, another process): "
        f"{d.baseline_tree.flagged} of the baseline tree, {d.final_tree.flagged} of the final tree",
        "",
        *_table(["config", "tree", "samples", "median", "mean", "std", "min", "p10", "p90"], rows),
        "",
    ]


def _chart(inp: ReportInputs) -> list[str]:
    lines = ["## Latency per class over iterations", ""]
    if inp.png_name:
        lines += [f"![best latency per class]({inp.png_name})", ""]
    if inp.chart_note:
        lines += [inp.chart_note, ""]
    return [*lines, "```text", inp.chart_text.rstrip(), "```", ""]


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
        impl = (
            "; ".join(f"v{it.version} `{fmt.sha(it.commit)}`: {it.hypothesis}" for it in mine)
            or "the shared path (global keeps only)"
        )
        params = [
            str((it.record.get("proposal") or {}).get("params"))
            for it in mine
            if (it.record.get("proposal") or {}).get("params") is not None
        ]
        kernel = _kernel_of(mine[-1]) if mine else _kernel_of(d.best)
        n = sum(1 for c in d.configs.values() if c.cls == cls)
        rows.append(
            [
                cls,
                n,
                impl + (f" (params {', '.join(params)})" if params else ""),
                kernel,
                f"{fmt.num(base_cls.get(cls))} → {fmt.num(final_cls.get(cls))}",
                fmt.speedup(per_class[cls][0]),
            ]
        )
    return [
        *lines,
        "Class-targeted keeps specialise the kernel per config class; the class key is the dispatch "
        "condition. Latency is the geometric mean of the class's per-config medians.",
        "",
        *_table(
            [
                "dispatch condition (class)",
                "configs",
                "implementation (the keeps that chose it)",
                "kernel",
                f"{inp.cfg.target.metric} baseline → final",
                "speedup",
            ],
            rows,
        ),
        "",
    ]


def _kernel_of(it: Iteration) -> str:
    prof = it.record.get("profile") or {}
    side = prof.get("cand") if it.status != "baseline" else prof.get("best")
    return (side or {}).get("hottest") or "not profiled"


BAR_WIDTH = 40
EIGHTHS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True)
class Point:
    version: int
    value: float
    label: str
    """What the point is: "baseline" or the kept iteration's hypothesis."""


def class_series(points_by_tree: Sequence[tuple[int, str, Mapping[str, float | None]]]) -> dict[str, list[Point]]:
    """(version, label, {class: value}) per kept tree, oldest first -> {class: points}."""
    out: dict[str, list[Point]] = {}
    for version, label, values in points_by_tree:
        for cls, v in values.items():
            if v is not None and math.isfinite(v) and v > 0:
                out.setdefault(cls, []).append(Point(version, v, label))
    return dict(sorted(out.items()))


def _bar(fraction: float, width: int = BAR_WIDTH) -> str:
    eighths = max(1, round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)


def text_chart(series: Mapping[str, Sequence[Point]], metric: str, direction: str = "min") -> str:
    better = "lower" if direction == "min" else "higher"
    lines = [f"Best {metric} per class over iterations (kept points; {better} is better; % against the baseline)", ""]
    if not series:
        return "\n".join([*lines, "(no measured points)"]) + "\n"
    for cls, points in series.items():
        lines.append(cls)
        top = max(p.value for p in points)
        first = points[0].value
        for p in points:
            change = "" if p is points[0] else f"  {fmt.pct((p.value / first - 1) * 100, 1)}"
            lines.append(f"  v{p.version:<4} {_bar(p.value / top)} {fmt.num(p.value):>10}{change}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_png(
    series: Mapping[str, Sequence[Point]],
    path: Path,
    metric: str,
    *,
    last_version: int,
    title: str,
    direction: str = "min",
) -> bool:
    """Draw the chart with matplotlib; False (and nothing written) when it is not installed."""
    try:  # optional (no extra names it): pyright need not resolve it
        import matplotlib  # pyright: ignore[reportMissingImports]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pyright: ignore[reportMissingImports]
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        for cls, points in series.items():
            xs = [p.version for p in points] + [max(last_version, points[-1].version)]
            ys = [p.value for p in points] + [points[-1].value]
            (line,) = ax.step(xs, ys, where="post", label=cls)
            ax.plot([p.version for p in points], [p.value for p in points], "o", color=line.get_color())
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"{metric} ({'lower' if direction == 'min' else 'higher'} is better)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        fig.savefig(str(path), dpi=120)
    finally:
        plt.close(fig)
    return True

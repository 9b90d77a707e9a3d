"""What a report is rendered from (pure): the run gathered from run.db's rows (`RunData`), the
statistics results.md reports, the roofline view of the baseline and final trees, all of it
held in `ReportInputs`; and the markdown pieces every section shares (a cell, inline code, a
table).

Which samples measure which tree. A tree (a commit) is measured many times over a run:
every candidate iteration re-measures the current best on side "best", and a kept
candidate's own side "cand" samples measure the tree that became the new best. So the
samples of commit C are, over the unmasked iterations:

  - the baseline iteration v0, stage "baseline" (side "best"), when C is the baseline;
  - side "best" of every iteration whose `best_commit_before` is C (stages eval, reverify,
    verify);
  - side "cand" of the kept iteration whose commit is C: its "verify" stage when the
    formatted tree was re-measured, else its "eval" and "reverify" stages when the committed
    tree is the evaluated one (`commit_tree` == `evaluated_tree`); otherwise none (the
    committed tree was never timed as such).

Samples the GPU gate flagged (a round during which the GPU throttled or another process
appeared: `samples.flagged`) are left out, as the decision leaves them out, and counted.
Masked iterations contribute nothing. The final tree's chain of keeps is followed by
commit ancestry: the best iteration, then the keep whose commit is its
`best_commit_before`, down to the baseline commit.

Statistics. `summarize(values)` is the diffusion-kernel rules' set for one workload: median,
mean, sample standard deviation (n - 1), min, p10 and p90, with the number of samples it rests
on. Percentiles interpolate linearly between order statistics (position (n - 1) * q, the
method numpy calls "linear"), so p10 and p90 of a handful of samples are honest
interpolations, not invented tails. Speedups are oriented so that above 1 is better whatever
the metric's direction: baseline / final for a latency ("min"), final / baseline for a
throughput ("max"). The equal-weight geometric mean of speedups is exp(mean(log s)).

The roofline view: engine.roofline applied to the baseline's and the final tree's median
latency per config. For each config with a row in the baseline record, the [roofline] formulas
give FLOPs and bytes per call; with the sourced peaks of the GPU the run used they give the
bound (memory or compute), the floor, and for each tree the achieved bandwidth, FLOP/s and %
of peak. Only a latency metric (direction "min") has seconds per call ([roofline].unit_scale
seconds per unit). Missing pieces are said, never filled in: no formulas, a throughput
metric, or a GPU with no sourced peak.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine import BadInput, projections
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.decide import geomean as stats_geomean
from kopt_supervisor.engine.decide import positive_finite, quantile
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.roofline import (
    ClassRoofline,
    Peaks,
    RooflinePoint,
    Spec,
    aggregate_classes,
    analyze_rows,
    peaks_from_specs,
)

SampleRow = Mapping[str, Any]
"""One row of the samples table: version, stage, round, block, side, config, cls, value."""


@dataclass(frozen=True)
class TreeSamples:
    commit: str
    values: dict[str, list[float]]
    """Config key -> every sample of this tree, in store order."""
    sources: dict[int, int]
    """Iteration version -> how many samples it contributed."""
    flagged: int = 0
    """Samples of this tree left out because the GPU gate flagged their round."""

    @property
    def n(self) -> int:
        return sum(self.sources.values())


@dataclass(frozen=True)
class ConfigInfo:
    key: str
    cls: str
    production: bool
    row: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunData:
    meta: dict[str, Any]
    iterations: list[Iteration]
    baseline: Iteration
    best: Iteration
    """The final best (the baseline itself when nothing was kept)."""
    chain: list[Iteration]
    """The keeps the final tree is made of, oldest first (baseline excluded)."""
    configs: dict[str, ConfigInfo]
    baseline_tree: TreeSamples
    final_tree: TreeSamples
    samples_by_version: dict[int, list[SampleRow]] = field(default_factory=dict)

    def tree(self, commit: str) -> TreeSamples:
        """Every sample of any commit's tree (e.g. each kept tree, for the chart)."""
        return tree_samples(self.iterations, self.samples_by_version, commit)

    @property
    def unmasked(self) -> list[Iteration]:
        return [it for it in self.iterations if not it.masked]

    @property
    def masked(self) -> list[Iteration]:
        return [it for it in self.iterations if it.masked]

    @property
    def classes(self) -> list[str]:
        return sorted({c.cls for c in self.configs.values()})

    @property
    def stray_keeps(self) -> list[Iteration]:
        """Unmasked keeps that are not part of the final tree (e.g. unmasked by hand after a
        restart): listed, never counted."""
        on_chain = {it.version for it in self.chain}
        return [it for it in self.unmasked if it.kept and it.status != "baseline" and it.version not in on_chain]


class NoBaseline(ValueError):
    """The run has no measured baseline yet."""


def collect(meta: dict[str, Any], iterations: list[Iteration], samples: Iterable[SampleRow]) -> RunData:
    base = projections.baseline(iterations)
    if base is None or not base.commit:
        raise NoBaseline("the run has no measured baseline yet (start it with `kopt run`)")
    best = projections.best_iteration(iterations) or base
    chain = keep_chain(iterations, best, base.commit)
    by_version = index_by_version(samples)
    rows = [r for rs in by_version.values() for r in rs]
    configs = {
        key: ConfigInfo(key, str(c.get("cls", "")), bool(c.get("production", True)), dict(c.get("row") or {}))
        for key, c in (base.record.get("configs") or {}).items()
    }
    for r in rows:  # a config the baseline record lacks (older stores): still reported
        if r["config"] not in configs:
            configs[r["config"]] = ConfigInfo(r["config"], r["cls"], True)
    return RunData(
        meta=meta,
        iterations=iterations,
        baseline=base,
        best=best,
        chain=chain,
        configs=configs,
        baseline_tree=tree_samples(iterations, by_version, base.commit),
        final_tree=tree_samples(iterations, by_version, best.commit or base.commit),
        samples_by_version=by_version,
    )


def index_by_version(samples: Iterable[SampleRow]) -> dict[int, list[SampleRow]]:
    out: dict[int, list[SampleRow]] = {}
    for r in samples:
        out.setdefault(int(r["version"]), []).append(r)
    return out


def keep_chain(iterations: list[Iteration], best: Iteration, baseline_commit: str) -> list[Iteration]:
    """The unmasked keeps from the baseline to `best`, following commit parents."""
    by_commit = {it.commit: it for it in iterations if not it.masked and it.kept and it.status != "baseline"}
    chain: list[Iteration] = []
    cur: Iteration | None = best if best.status != "baseline" else None
    seen: set[int] = set()
    while cur is not None and cur.version not in seen:
        seen.add(cur.version)
        chain.append(cur)
        parent = cur.best_commit_before
        if parent == baseline_commit:
            break
        cur = by_commit.get(parent)
    return list(reversed(chain))


BEST_STAGES = frozenset({"eval", "reverify", "verify"})
"""The stages whose side "best" samples measure the iteration's `best_commit_before`."""
EVALUATED_STAGES = frozenset({"eval", "reverify"})
"""The stages that measured the evaluated (unformatted) candidate tree."""


def committed_stages(it: Iteration, stages: set[str]) -> frozenset[str]:
    """Which stages' "cand" samples measure the tree that `it` committed (empty: none do)."""
    if "verify" in stages:
        return frozenset({"verify"})
    commit_tree = it.record.get("commit_tree")
    if commit_tree is None or commit_tree == it.record.get("evaluated_tree"):
        return EVALUATED_STAGES & stages
    return frozenset()


def tree_samples(
    iterations: list[Iteration], samples: Mapping[int, list[SampleRow]] | Iterable[SampleRow], commit: str
) -> TreeSamples:
    """Every sample of `commit`'s tree over the unmasked iterations (see the module doc).
    `samples`: rows, or rows indexed by version (index_by_version)."""
    by_version = samples if isinstance(samples, Mapping) else index_by_version(samples)
    wanted: dict[int, tuple[str, frozenset[str]]] = {}
    for it in iterations:
        if it.masked:
            continue
        if it.status == "baseline":
            if it.commit == commit:
                wanted[it.version] = ("best", frozenset({"baseline"}))
            continue
        if it.best_commit_before == commit:
            wanted[it.version] = ("best", BEST_STAGES)
        elif it.kept and it.commit == commit:
            stages = committed_stages(it, {str(r["stage"]) for r in by_version.get(it.version, [])})
            if stages:
                wanted[it.version] = ("cand", stages)
    values: dict[str, list[float]] = {}
    sources: dict[int, int] = {}
    flagged = 0
    for v, (side, stages) in sorted(wanted.items()):
        for r in by_version.get(v, []):
            if r["side"] == side and r["stage"] in stages:
                if _flagged(r):
                    flagged += 1
                    continue
                values.setdefault(str(r["config"]), []).append(float(r["value"]))
                sources[v] = sources.get(v, 0) + 1
    return TreeSamples(commit, values, dict(sorted(sources.items())), flagged)


def _flagged(row: SampleRow) -> bool:
    """The GPU gate flagged the sample's round (rows of older stores have no such column)."""
    try:
        return bool(row["flagged"])
    except (KeyError, IndexError):
        return False


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


@dataclass(frozen=True)
class RooflineView:
    available: bool
    why_not: str = ""
    peaks: Peaks | None = None
    gpu_name: str = ""
    baseline: dict[str, RooflinePoint] = field(default_factory=dict)
    final: dict[str, RooflinePoint] = field(default_factory=dict)
    baseline_classes: dict[str, ClassRoofline] = field(default_factory=dict)
    final_classes: dict[str, ClassRoofline] = field(default_factory=dict)


def build_roofline_view(
    cfg: Config,
    rows: Mapping[str, Mapping[str, object]],
    class_of: Mapping[str, str],
    baseline_median: Mapping[str, float | None],
    final_median: Mapping[str, float | None],
    specs: Mapping[str, Spec],
    gpu_name: str,
) -> RooflineView:
    r = cfg.roofline
    if not (r.flops or r.bytes):
        return RooflineView(False, "no [roofline].flops / [roofline].bytes formulas in kopt.toml")
    if cfg.target.direction != "min":
        return RooflineView(
            False,
            f'the metric `{cfg.target.metric}` is a throughput (direction = "max"): '
            "no time per call to put on a roofline",
        )
    if not rows:
        return RooflineView(False, "the baseline record has no config rows")
    peaks = peaks_from_specs(dict(specs), flops_metric=r.peak_flops_metric, bandwidth_metric=r.bandwidth_metric)

    def seconds(medians: Mapping[str, float | None]) -> dict[str, float | None]:
        return {k: (None if v is None else v * r.unit_scale) for k, v in medians.items()}

    try:
        base = analyze_rows(rows, seconds(baseline_median), flops_src=r.flops, bytes_src=r.bytes, peaks=peaks)
        final = analyze_rows(rows, seconds(final_median), flops_src=r.flops, bytes_src=r.bytes, peaks=peaks)
    except BadInput as e:
        return RooflineView(False, str(e))
    return RooflineView(
        True, "", peaks, gpu_name, base, final, aggregate_classes(base, class_of), aggregate_classes(final, class_of)
    )


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    std: float | None
    """Sample standard deviation; None for a single sample."""
    min: float
    max: float
    p10: float
    p90: float

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "n": self.n,
            "median": self.median,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "p10": self.p10,
            "p90": self.p90,
        }


def finite(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def summarize(values: Iterable[float]) -> Summary | None:
    """The summary of the finite values, or None when there are none."""
    xs = sorted(finite(values))
    if not xs:
        return None
    n = len(xs)
    mean = math.fsum(xs) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    return Summary(n=n, median=_q(xs, 0.5), mean=mean, std=std, min=xs[0], max=xs[-1], p10=_q(xs, 0.1), p90=_q(xs, 0.9))


def _q(xs: list[float], q: float) -> float:
    value = quantile(xs, q)
    assert value is not None  # xs is not empty
    return value


def speedup(baseline: float | None, final: float | None, direction: str = "min") -> float | None:
    """Above 1: the final tree is better. None when either side is missing or not positive."""
    if baseline is None or final is None or not baseline > 0 or not final > 0:
        return None
    return baseline / final if direction == "min" else final / baseline


def geomean(values: Iterable[float | None]) -> float | None:
    """The one geometric mean (engine.decide) of the entries that are measured (positive finite)."""
    return stats_geomean(positive_finite(values))


def cell(text: Any, limit: int = 300) -> str:
    """Text for one table cell: pipes escaped, one line, at most `limit` characters."""
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")[:limit]


def code(text: str) -> str:
    """Inline code that survives a backtick inside it."""
    return f"`{text}`" if "`" not in text else f"``{text}``"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align or "---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out

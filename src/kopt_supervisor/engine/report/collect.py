"""What a report is made of, gathered from run.db's rows (pure: rows in, `RunData` out).

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

`ReportInputs` is all a report is rendered from: the gathered `RunData`, the run's config,
its environment and roofline, the chart's text, the final tree.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine import bookkeeping
from kopt_supervisor.engine.config.sections import Config
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.roofline_view import RooflineView

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
    base = bookkeeping.baseline(iterations)
    if base is None or not base.commit:
        raise NoBaseline("the run has no measured baseline yet (start it with `kopt run`)")
    best = bookkeeping.best_iteration(iterations) or base
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

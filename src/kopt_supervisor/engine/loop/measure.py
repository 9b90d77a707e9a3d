"""Measurement: one look of best against candidate for a lane, and the decision rounds of looks
until the paired statistics decide every class (docs/design.md §5).

- `ServedTrees` (`[target].serve`, served_trees.py): best and the candidate each in a process
  of its own, audited by kopt; best's process is kept while BEST does not move, the
  candidate's is new for every decision.
- `ProcessAbba`: the bench runs once in each tree, in ABBA order across looks (so linear
  drift cancels); each config's metric pairs up.
Never one process holding both trees: candidate code there could bend best's measurement (the
one-process `ab_command` was removed on 2026-12-01; config/toml_io.py names its replacement).

Every look returns a `Look` (its pairs and each side's measurement, for the correctness
check) and leaves both trees as they were: a bench that writes into a tracked file is a
bench failure, and what a bench leaves in the candidate's tree is removed (served_trees.py).

`DecisionRounds`: looks until every class is decided, or a row of the candidate fails its
correctness rule. Each look is gated (an idle GPU, its state before and after recorded),
preemptible (a pause discards it; it is taken again after the resume), stored sample by
sample in run.db before the statistics read them, and flagged when something disturbed the
GPU meanwhile. What a decision concluded is read back from the store (`pairs`), never from
memory, so a restarted engine sees what the one before it measured. What a decision records
of its classes is the classes as they vote (the guard class aside: `guard_configs`); the
baseline's record holds them so too (loop/start.py `record_baseline`, from its runs)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kopt_supervisor.engine import adapters, gitops, metrics
from kopt_supervisor.engine.decide.estimate import Pair, Policy, Spread, Verdict
from kopt_supervisor.engine.decide.plausible import BenchRun
from kopt_supervisor.engine.decide.verdict import evaluate, guard_of, pooled_spreads
from kopt_supervisor.engine.gpu import round_flags
from kopt_supervisor.engine.loop.context import (
    Lane,
    Look,
    Measurer,
    ReleaseCloses,
    RunContext,
    acquire,
    last_line,
    note_gpu,
    with_,
)
from kopt_supervisor.engine.loop.look_files import (
    FreshCaches,
    check_after_run,
    ensure_best_pristine,
    keep_csv,
    tree_hashes,
)
from kopt_supervisor.engine.loop.served_trees import ServedTrees
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.sandbox import Confinement
from kopt_supervisor.engine.store import Sample


def measurer_for(ctx: RunContext, lane: Lane) -> Measurer:
    t = ctx.cfg.target
    return ServedTrees(ctx, lane) if t.serve else ProcessAbba(ctx, lane)


def served_trees_of(measurer: Measurer | None) -> ServedTrees | None:
    """The lane's served trees under whatever wraps them (`OnBest`), or None (another kind of
    measurer: the baseline then runs the process-level bench)."""
    inner = measurer.inner if isinstance(measurer, OnBest) else measurer
    return inner if isinstance(inner, ServedTrees) else None


def measure_best(
    ctx: RunContext, it: Iteration, lane: Lane, name: str, r: int, env: dict[str, str]
) -> tuple[Measurement, float]:
    """One baseline run of the lane's best tree and its seconds (here, or on a Ray lane's worker): a
    served target's through best's served process (its first decision finds it warm), else the bench's."""
    served = served_trees_of(lane.measurer)
    if served is not None:
        return served.look_best(it, Stage.BASELINE, r, env)
    best_tree = gitops.tree_of(lane.best, str(it.best_commit_before))
    jail = ctx.jails.bench(lane.best, "best", best_tree)
    return run_bench(ctx, it, lane, lane.best, name, {**env, **ctx.jails.env("best", best_tree)}, jail)


def run_bench(
    ctx: RunContext, it: Iteration, lane: Lane, tree: Path, name: str, env: dict[str, str], confine: Confinement | None
) -> tuple[Measurement, float]:
    """The bench once in `tree` (confined to it: sandbox.paths.Jails): its CSV read by the target's
    rules, then the tree inspected whole and put back (check_after_run)."""
    csv = ctx.cfg.target.csv
    before = adapters.csv_stamps(tree, csv)
    res = ctx.procs.run(
        it, ctx.cfg.target.bench, cwd=tree, name=name, timeout_s=ctx.cfg.target.timeout_s, env=env, confine=confine
    )
    if not res.ok:
        check_after_run(ctx, lane, it, tree)
        ended = not (res.timed_out or res.output_overflow or res.start_error)
        raise BenchError(f"bench on {tree.name}/ {res.why()}: {last_line(res)}", ended=ended)
    path = adapters.find_csv(tree, csv, before, res.stdout_path)
    keep_csv(ctx, it, path, name)
    measurement = adapters.read_measurement(path, ctx.cfg.target, from_stdout=csv == "-")
    check_after_run(ctx, lane, it, tree)
    return measurement, res.duration_s


class ProcessAbba(ReleaseCloses):
    """`fresh_caches`: each decision's runs get caches of their own (`FreshCaches`: the
    re-decision)."""

    def __init__(self, ctx: RunContext, lane: Lane, *, fresh_caches: bool = False) -> None:
        self.ctx, self.lane = ctx, lane
        self.caches = FreshCaches(ctx, lane) if fresh_caches else None

    def _cache(self, side: str, tree_hash: str) -> Path | None:
        return self.caches.get(side, tree_hash) if self.caches is not None else None

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        order = ("best", "cand") if r % 2 == 0 else ("cand", "best")
        got: dict[str, Measurement] = {}
        runs: list[BenchRun] = []
        secs = 0.0
        hashes = dict(zip(("best", "cand"), tree_hashes(self.lane, it), strict=True))
        ensure_best_pristine(self.ctx, self.lane, it, r)
        for side in order:
            tree = self.lane.best if side == "best" else self.lane.cand
            cache = self._cache(side, hashes[side])
            jail = self.ctx.jails.bench(tree, side, hashes[side], cache=cache)
            side_env = {**env, **self.ctx.jails.env(side, hashes[side], cache=cache)}
            m, s = run_bench(self.ctx, it, self.lane, tree, f"{stage}_r{r}_{side}", side_env, jail)
            got[side], secs = m, secs + s
            timed_s = None if m.timed is None else m.timed * self.ctx.cfg.roofline.unit_scale
            runs.append(BenchRun(side, r, s, timed_s))
            if side == "cand" and m.failing:
                break
        if "best" not in got:  # the candidate failed first: no pairs, its rows tell why
            return Look([], got["cand"], got["cand"], secs)
        best_m, cand_m = got["best"], got["cand"]
        pairs = metrics.paired(best_m, cand_m, r, "AB" if order[0] == "best" else "BA")
        return Look(pairs, best_m, cand_m, secs, tuple(runs))

    def new_decision(self) -> None:
        if self.caches is not None:
            self.caches.new_decision()

    def close(self) -> None:
        pass


class StaleBest(Exception):
    """A keep decided against a BEST that another lane's keep has moved since."""

    def __init__(self, best: str, *, tried: bool = False) -> None:
        super().__init__(f"BEST moved to {best[:10]}")
        self.best = best
        self.tried = tried
        """The change was already tried on `best` and does not apply there."""


class OnBest:
    """A lane's measurer that checks before each look of a keep's confirmation (any stage but
    Stage.EVAL) that the iteration is still on BEST (StaleBest otherwise). A decision goes on
    against the BEST it started on: a keep found so has its claim confirmed on the new BEST
    (loop/__init__.py, `Keeper.carry`). (loop/start.py wraps the measurers of a multi-lane run.)"""

    def __init__(self, ctx: RunContext, inner: Measurer) -> None:
        self.ctx, self.inner = ctx, inner

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        if stage != Stage.EVAL and it.best_commit_before is not None:
            current = self.ctx.history.best_commit()
            if it.best_commit_before != current:
                raise StaleBest(current)
        return self.inner.look(it, stage, r, env)

    def new_decision(self) -> None:
        self.inner.new_decision()

    def release(self) -> None:
        self.inner.release()

    def close(self) -> None:
        self.inner.close()


T = TypeVar("T")


@dataclass
class CorrectnessFailure:
    failing: list[dict[str, Any]]

    def summary(self) -> str:
        first = self.failing[0]
        more = f" (+{len(self.failing) - 1} more)" if len(self.failing) > 1 else ""
        return f"{first['config']}: {'; '.join(first['reasons'])}{more}"


def failure_of(m: Measurement) -> CorrectnessFailure:
    return CorrectnessFailure([{"config": c.key, "cls": c.cls, "reasons": list(c.reasons)} for c in m.failing])


def pairs(ctx: RunContext, it: Iteration, stage: Stage) -> list[Pair]:
    """The pairs a decision has measured so far, from run.db's samples (with the bench's
    means and last blocks, so that the plausibility checks weigh every look of a decision an
    engine restart or "more rounds" continues, not only the looks since)."""
    return pairs_of(ctx, it.version, stage)


def run_spreads(
    ctx: RunContext, it: Iteration, stage: Stage, policy: Policy, guard: frozenset[str]
) -> dict[str, Spread] | None:
    """[decide].pooled_noise: per class, the spread of the looks of every decision before
    `it` in this run (verdict.pooled_spreads), read from run.db at the decision's start. Only
    for an evaluation: a keep's confirmation and the formatted tree's check keep the decision's
    own spread, so that the run's never decides a keep alone. None: the decision's own."""
    if not policy.pooled_noise or stage != Stage.EVAL:
        return None
    earlier = (pairs_of(ctx, row.version, Stage.EVAL) for row in ctx.store.rows() if 0 < row.version < it.version)
    return pooled_spreads(earlier, policy, guard)


def pairs_of(ctx: RunContext, version: int, stage: Stage) -> list[Pair]:
    """The pairs of one version's decision of `stage`, from run.db's samples."""
    by_key: dict[tuple[int, int, str], dict[str, Any]] = {}
    nan = math.nan
    for s in ctx.store.samples(version, stage):
        cell = by_key.setdefault(
            (s["round"], s["block"], s["config"]), {"cls": s["cls"], "order": s["ord"], "flagged": bool(s["flagged"])}
        )
        side = s["side"]
        cell[side] = s["value"]
        cell[f"{side}_mean"] = nan if s["mean"] is None else s["mean"]
        cell[f"{side}_last"] = nan if s["last"] is None else s["last"]
    return [
        Pair(
            config,
            v["cls"],
            v["best"],
            v["cand"],
            r,
            v["order"],
            block,
            flagged=v["flagged"],
            best_mean=v["best_mean"],
            cand_mean=v["cand_mean"],
            best_last=v["best_last"],
            cand_last=v["cand_last"],
        )
        for (r, block, config), v in sorted(by_key.items())
        if "best" in v and "cand" in v
    ]


def cand_medians(ctx: RunContext, it: Iteration, stage: Stage) -> dict[str, float]:
    import statistics

    values: dict[str, list[float]] = {}
    for p in pairs(ctx, it, stage):
        values.setdefault(p.config, []).append(p.cand)
    return {k: statistics.median(v) for k, v in values.items()}


class DecisionRounds:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def policy(self, extra_rounds: int = 0) -> Policy:
        policy = Policy.from_config(self.ctx.cfg.decide, self.ctx.cfg.target.direction)
        if extra_rounds:
            policy = with_(
                policy,
                max_rounds=policy.max_rounds + extra_rounds,
                budget_gpu_s=policy.budget_gpu_s * (1 + extra_rounds / max(1, policy.max_rounds)),
            )
        return policy

    def decide(
        self, it: Iteration, lane: Lane, stage: Stage, *, extra_rounds: int = 0, measurer: Measurer | None = None
    ) -> Verdict | CorrectnessFailure:
        """Looks until the statistics decide. `extra_rounds` continues the decision already
        in the store (the engineer asked for more rounds) instead of starting afresh;
        `measurer` replaces the lane's (the re-verification's fresh processes)."""
        ctx = self.ctx
        policy = self.policy(extra_rounds)
        guard = guard_configs(ctx)
        spreads = run_spreads(ctx, it, stage, policy, guard)

        def judge(done: list[Pair], runs: list[dict[str, Any]], gpu_s: float, looks: int) -> Verdict | None:
            verdict = evaluate(
                done,
                policy,
                target_class=it.target_class,
                gpu_seconds=gpu_s,
                floors=floors(ctx),
                previous_subthreshold_gain=previous_subthreshold_gain(ctx, it),
                guard_configs=guard,
                runs=[BenchRun(**x) for x in runs],
                spreads=spreads,
            )
            if stage != Stage.REVERIFY:  # the fresh-process decision has its own record["reverify"]
                it.record["classes"] = {c.cls: c.to_dict() for c in verdict.classes}
                it.record["decision"] = {**verdict.to_dict(), "by": "engine"}
            ctx.save(it)
            ctx.store.set("live_classes", {"version": it.version, "stage": stage, "verdict": verdict.to_dict()})
            if not verdict.final:
                return None
            ctx.event(
                "decision",
                f"v{it.version} {stage}: {verdict.kind}: {verdict.reason} ({verdict.rounds} rounds, {gpu_s:.1f} GPU-s)",
                it=it,
            )
            return verdict

        return self.looks(
            it,
            lane,
            stage,
            judge,
            min_looks=policy.min_rounds,
            max_looks=policy.max_rounds,
            afresh=not extra_rounds,
            measurer=measurer,
        )

    def looks(
        self,
        it: Iteration,
        lane: Lane,
        stage: Stage,
        judge: Callable[[list[Pair], list[dict[str, Any]], float, int], T | None],
        *,
        min_looks: int,
        max_looks: int,
        afresh: bool = True,
        measurer: Measurer | None = None,
    ) -> T | CorrectnessFailure:
        """Looks of best against the candidate, each gated, preemptible and stored sample by
        sample, until `judge` (asked after each look from the `min_looks`-th on, with the pairs,
        the process-level runs, the timed seconds and the looks so far) concludes; or the candidate's
        correctness failure. `afresh`: a new decision of this stage (else the one in the store
        goes on); `measurer` replaces the lane's."""
        ctx = self.ctx
        measurer = measurer or lane.measurer
        assert measurer is not None, "the machine gives every lane its measurer"
        if afresh:
            it.record.setdefault("bench_runs", {})[stage] = []
            it.record.setdefault("side_costs", {})[stage] = []
            ctx.verify([lane])  # before any comparison: the chain of keeps and the branch are kopt's
            ctx.store.delete_samples(it.version, stage)
            measurer.new_decision()
            # the candidate is what the proposer left (new files included), staged: a bench
            # that writes into it shows as unstaged; after the evaluation only the files it
            # holds may change (a formatter's caches never join it)
            it.record["evaluated_tree"] = (
                gitops.stage_all_tree(lane.cand, force=it.record.get("forced_paths", []))
                if stage == Stage.EVAL
                else gitops.stage_tracked_tree(lane.cand)
            )
        done = pairs(ctx, it, stage)
        gpu_s = 0.0 if afresh else float(it.record.get("gpu_seconds", {}).get(stage, 0.0))
        r = (max(p.round for p in done) + 1) if done else 0
        settled = False
        try:
            while True:
                ctx.save(it, Phase.MEASURE)
                ctx.progress(it, str(stage), f"round {r + 1} (min {min_looks}, max {max_looks})", r, max_looks)
                lease = acquire(ctx, lane, it)

                def one_look(lease_env: dict[str, str] = lease.env, r: int = r) -> Any:
                    with ctx.clock(it, "looks_s"):
                        return measurer.look(it, stage, r, lease_env)

                look = ctx.control.preemptible(one_look)
                before, after = look.gpu if look.gpu is not None else (lease.before, lane.gate.evidence())
                flags = round_flags(before, after)
                note_gpu(it, lane, before, after, flags=flags, round_index=r)
                if look.cand.failing:
                    settled = True
                    return failure_of(look.cand)
                if look.best.failing:
                    raise BenchError(
                        "the best tree now fails correctness too: "
                        f"{failure_of(look.best).summary()} (environment changed?)"
                    )
                new = [with_(p, flagged=True) for p in look.pairs] if flags else look.pairs
                gpu_s += look.seconds
                it.record.setdefault("gpu_seconds", {})[stage] = gpu_s
                runs = it.record.setdefault("bench_runs", {}).setdefault(stage, [])
                runs += [dataclasses.asdict(x) for x in look.runs]
                it.record.setdefault("side_costs", {}).setdefault(stage, []).extend(c.to_dict() for c in look.costs)
                ctx.store.add_samples(
                    Sample(
                        it.version,
                        stage,
                        p.round,
                        p.block,
                        side,
                        p.config,
                        p.cls,
                        value,
                        p.order,
                        p.flagged,
                        mean,
                        last,
                    )
                    for p in new
                    for side, value, mean, last in (
                        ("best", p.best, p.best_mean, p.best_last),
                        ("cand", p.cand, p.cand_mean, p.cand_last),
                    )
                )
                done += new
                r += 1
                if r < min_looks:
                    continue
                out = judge(done, runs, gpu_s, r)
                if out is not None:
                    settled = True
                    return out
        finally:
            if not settled:  # a failed or interrupted decision: its serving process goes with it
                measurer.close()


def guard_configs(ctx: RunContext, production: dict[str, bool] | None = None) -> frozenset[str]:
    """[decide].production_verdicts: the non-production configs (of `production`, config ->
    is production; by default the baseline's), which guard the decision instead of voting."""
    if not ctx.cfg.decide.production_verdicts:
        return frozenset()
    if production is None:
        base = ctx.history.baseline()
        configs = (base.record.get("configs") or {}) if base else {}
        production = {k: bool(c.get("production", True)) for k, c in configs.items()}
    return guard_of(production, ctx.cfg.decide.production_verdicts)


def floors(ctx: RunContext) -> dict[str, float]:
    """Per config, the metric's roofline floor (beating it is suspicious)."""
    if ctx.cfg.target.direction != "min":
        return {}
    base = ctx.history.baseline()
    points = ((base.record.get("roofline") or {}).get("configs") or {}) if base else {}
    scale = ctx.cfg.roofline.unit_scale
    return {k: p["floor_s"] / scale for k, p in points.items() if p.get("floor_s")}


def previous_subthreshold_gain(ctx: RunContext, it: Iteration) -> bool:
    """The two_in_a_row policy: did the previous ended iteration see a sub-threshold gain on
    the same target class?"""
    prev = [
        r
        for r in ctx.history.rows()
        if r.version < it.version and r.final and not r.masked and r.status != Status.INTERRUPTED
    ]
    if not prev or prev[-1].target_class != it.target_class:
        return False
    last = ctx.store.iteration(prev[-1].version)
    flags = ((last.record.get("decision") or {}).get("flags") or []) if last else []
    return "subthreshold_gain" in flags

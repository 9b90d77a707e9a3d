"""Decision rounds: looks of best against candidate until the paired statistics decide every
class (docs/design.md §5), or a row of the candidate fails its correctness rule.

Each look is gated (an idle GPU, its state before and after recorded), preemptible (a pause
discards it and it is taken again after the resume), stored sample by sample in run.db
before the statistics read them, and flagged when something disturbed the GPU meanwhile.
What a decision concluded is read back from the store (`pairs`), never from memory, so a
restarted engine sees what the one before it measured.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kopt_supervisor.engine import gitops
from kopt_supervisor.engine.decide import Pair, Policy, Verdict, evaluate, guard_of
from kopt_supervisor.engine.decide.plausible import BenchRun
from kopt_supervisor.engine.gpu.state import round_flags
from kopt_supervisor.engine.loop.context import RunContext, acquire, with_
from kopt_supervisor.engine.loop.lane import Lane, Measurer, note_gpu
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.store import Sample

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
    by_key: dict[tuple[int, int, str], dict[str, Any]] = {}
    nan = math.nan
    for s in ctx.store.samples(it.version, stage):
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

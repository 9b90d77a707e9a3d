"""The baseline (v0): the unmodified tree measured `min_rounds` times, correct on every row,
its classes as decisions will vote in them, what one decision will cost with this bench,
its roofline (the README's Step 0) and its profile. A baseline that fails its own
correctness rule or whose bench fails ends the run with the reason (BaselineFailed).
"""

from __future__ import annotations

import statistics
import time

from kopt_supervisor.engine.decide import Policy, voting_classes
from kopt_supervisor.engine.decide.stats import geomean
from kopt_supervisor.engine.environment import capture_environment
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.gpu.gate import NoIdleGpu
from kopt_supervisor.engine.loop.context import RunContext, acquire
from kopt_supervisor.engine.loop.control import Interrupt
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.loop.jails import tree_of
from kopt_supervisor.engine.loop.keep import Keeper
from kopt_supervisor.engine.loop.lane import Lane, note_gpu
from kopt_supervisor.engine.loop.measure import run_bench
from kopt_supervisor.engine.loop.recovery import Recovery
from kopt_supervisor.engine.loop.rounds import failure_of, guard_configs
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.onboard.draft import estimate_decision_s, run_noise_pct
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.store import Sample


class BaselineFailed(KoptFailure):
    """The unmodified baseline cannot be measured: the run stops with this reason."""


class Baseline:
    def __init__(self, ctx: RunContext, evidence: Evidence, keeper: Keeper, recovery: Recovery) -> None:
        self.ctx, self.evidence, self.keeper, self.recovery = ctx, evidence, keeper, recovery

    def measure(self, lane: Lane) -> None:
        ctx = self.ctx
        commit = str(ctx.store.get("baseline_commit"))
        it = Iteration(
            0,
            Status.RUNNING,
            phase=Phase.BASELINE,
            hypothesis="baseline (unmodified)",
            scope="global",
            best_commit_before=commit,
            started_at=time.time(),
        )
        ctx.save(it)
        ctx.store.delete_samples(0, Stage.BASELINE)  # a baseline cut short by a crash starts over
        ctx.projections.write_memory(it)
        self.recovery.sync(lane)
        ctx.event("baseline", "measuring the unmodified baseline", it=it)
        n = ctx.cfg.decide.min_rounds
        runs: list[Measurement] = []
        seconds: list[float] = []
        try:
            while len(runs) < n:
                r = len(runs)
                ctx.progress(it, "baseline", f"baseline run {r + 1}/{n}", r, n)
                lease = acquire(ctx, lane, it)
                best_tree = tree_of(lane.best, commit)
                jail = ctx.jails.bench(lane.best, "best", best_tree)
                env = {**lease.env, **ctx.jails.env("best", best_tree)}
                m, secs = ctx.control.preemptible(
                    lambda: run_bench(ctx, it, lane, lane.best, f"baseline_r{r}", env, jail)  # noqa: B023 - run now
                )
                note_gpu(it, lane, lease.before, lane.gate.evidence())
                if m.failing:
                    fail = failure_of(m).summary()
                    self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, f"baseline fails correctness: {fail}")
                    raise BaselineFailed(f"the unmodified baseline fails correctness: {fail}")
                runs.append(m)
                seconds.append(secs)
                ctx.store.add_samples(
                    Sample(0, Stage.BASELINE, r, 0, "best", c.key, c.cls, c.value, mean=c.mean, last=c.last)
                    for c in m.configs.values()
                )
        except BenchError as e:
            self.keeper.discard(it, lane, Status.FAIL_BENCH, f"baseline bench failed: {e}")
            raise BaselineFailed(f"the baseline bench failed: {e}") from None
        except (Interrupt, NoIdleGpu) as e:
            self.keeper.discard(it, lane, Status.INTERRUPTED, str(e))
            raise
        record_baseline(ctx, it, runs)
        self.estimate_decision_cost(it, runs, seconds)
        it.commit = commit
        values = {k: statistics.median([m.configs[k].value for m in runs if k in m.configs]) for k in runs[-1].configs}
        self.evidence.baseline(it, lane, values)
        ctx.store.set_many(
            {
                "config_columns": list(runs[-1].config_columns),
                "classes": runs[-1].classes(),
                "environment": capture_environment(ctx.cfg, lane.best),
            }
        )
        ctx.close(
            it, Status.BASELINE, f"baseline over {len(runs[-1].configs)} configs in {len(it.record['classes'])} classes"
        )

    def estimate_decision_cost(self, it: Iteration, runs: list[Measurement], seconds: list[float]) -> None:
        """What one decision will cost with this bench (from the baseline's runs and the
        policy): said on the dashboard and in `kopt status` when it is minutes, with the way
        to make it seconds (the public harness's served looks, one process per tree)."""
        ctx, t = self.ctx, self.ctx.cfg.target
        mode = "served" if t.serve or t.ab_serve else "ab" if t.ab_command else "process"
        noise = run_noise_pct([{k: c.value for k, c in m.configs.items()} for m in runs])
        cost = estimate_decision_s(seconds, Policy.from_config(ctx.cfg.decide, t.direction), mode, noise_pct=noise)
        it.record["decision_cost"] = cost.to_dict()
        ctx.store.set("decision_cost", cost.to_dict())
        ctx.event("decision_cost", cost.text(), it=it, level="warn" if cost.slow else "info")


def record_baseline(ctx: RunContext, it: Iteration, runs: list[Measurement]) -> None:
    """The baseline's record: its classes as decisions will see them (the guard class under
    [decide].production_verdicts), its configs and their rows."""
    last = runs[-1]
    guard = guard_configs(ctx, {k: c.production for k, c in last.configs.items()})
    votes = voting_classes({k: c.cls for k, c in last.configs.items()}, guard)
    it.record["classes"] = {
        cls: {
            "best": geomean([c.value for m in runs for k, c in m.configs.items() if votes.get(k) == cls]),
            "configs": sum(1 for v in votes.values() if v == cls),
        }
        for cls in sorted(set(votes.values()))
    }
    it.record["configs"] = {
        k: {"cls": c.cls, "production": c.production, "row": c.row} for k, c in last.configs.items()
    }
    it.record["config_columns"] = list(last.config_columns)
    it.record["decision"] = {
        "verdict": Status.BASELINE,
        "reason": f"{len(runs)} runs, all rows correct",
        "by": "engine",
    }

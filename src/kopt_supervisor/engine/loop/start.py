"""A run's start, before its iterations: its lanes, K candidates measured at once (docs/design.md
§13; docs/lanes.md), then v0, the baseline (the machine, loop/__init__.py: recover → baseline
(v0) → ...; the recovery is keep.py's).

`make_lanes(ctx)` builds the run's lanes from [parallel]: each lane has its own candidate
worktree, its own copy of the best tree (with several lanes best/ itself, the branch's
worktree, only ever moves at a keep), its own GPU gate (its claim keeps the GPU its own:
never two lanes on one GPU, best and candidate of a pair always on the lane's GPU), and a
measurer: local processes, or (backend "ray") a Ray actor on a GPU host of a cluster that
gets the candidate as a git bundle and sends the samples back.

With several lanes every measurer checks before each look that its candidate is still
decided against BEST (measure.OnBest): another lane's keep ends a decision at its next look.
With one local lane the run is what it always was: cand/ against best/.

Lanes on a Ray cluster ([parallel] backend = "ray"): each lane's runs on a GPU host of an
existing cluster, the baseline's and the profiler's with them (loop/ray_lanes.py).

The baseline (v0): the unmodified tree measured `min_rounds` times, correct on every row, its
classes as decisions will vote in them, what one decision will cost with this bench, its
roofline (the README's Step 0) and its profile. A baseline that fails its own correctness
rule or whose bench fails ends the run with the reason (BaselineFailed).
"""

from __future__ import annotations

import statistics
import time

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.decide import geomean
from kopt_supervisor.engine.decide.estimate import Policy
from kopt_supervisor.engine.decide.verdict import voting_classes
from kopt_supervisor.engine.doctor import capture_environment
from kopt_supervisor.engine.gpu.backends import NoGpu, open_backend
from kopt_supervisor.engine.gpu.gate import Gate, NoIdleGpu
from kopt_supervisor.engine.loop.context import Lane, RunContext, acquire, gpu_of, note_gpu, single_lane
from kopt_supervisor.engine.loop.control import Interrupt
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.loop.keep import Keeper, Recovery
from kopt_supervisor.engine.loop.measure import (
    OnBest,
    ProcessAbba,
    failure_of,
    guard_configs,
    measure_best,
    measurer_for,
    served_trees_of,
)
from kopt_supervisor.engine.loop.ray_lanes import FreshOnWorker, RayMeasurer, connect
from kopt_supervisor.engine.metrics import BenchError, Measurement
from kopt_supervisor.engine.onboard import estimate_decision_s, run_noise_pct
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.store import Sample


def lane_paths(ctx: RunContext, index: int) -> tuple[str, str]:
    """(best copy, candidate worktree) of lane `index` when there are several, relative to
    the workspace: lanes/<i>/best and (lane 0: cand/) lanes/<i>/cand."""
    return f"lanes/{index}/best", "cand" if index == 0 else f"lanes/{index}/cand"


def make_lanes(ctxs: list[RunContext]) -> list[Lane]:
    """One lane per context (`RunContext.for_lane`: each lane works from its own thread with
    its own connection to run.db); one local lane: cand/ against best/."""
    par = ctxs[0].cfg.parallel
    if len(ctxs) == 1 and par.backend == "local":
        lanes = [single_lane(ctxs[0])]
    else:
        lanes = []
        for i, ctx in enumerate(ctxs):
            best, cand = lane_paths(ctx, i)
            lanes.append(Lane(i, ctx.ws.dir / best, ctx.ws.dir / cand, lane_gate(ctx, i)))
    if par.backend == "ray":
        connect(par.address, par.connect_timeout_s)
    for lane, ctx in zip(lanes, ctxs, strict=True):
        if par.backend == "ray":
            lane.host = "ray"
            lane.measurer = lane.remote = main = RayMeasurer(ctx, lane)  # the baseline and profiler too
            lane.fresh = FreshOnWorker(main)  # the re-decision runs on the lane's worker too
        else:
            lane.measurer = measurer_for(ctx, lane)
            if len(lanes) > 1 and not ctx.cfg.target.serve:  # the keep's re-decision in fresh processes,
                lane.fresh = ProcessAbba(ctx, lane, fresh_caches=True)  # made here so it is checked too
    if len(lanes) > 1:  # another lane's keep ends a decision at its next look, not after its last
        for lane, ctx in zip(lanes, ctxs, strict=True):
            assert lane.measurer is not None
            lane.measurer = OnBest(ctx, lane.measurer)
            if lane.fresh is not None:
                lane.fresh = OnBest(ctx, lane.fresh)
    return lanes


def lane_gate(ctx: RunContext, index: int) -> Gate:
    """Lane `index`'s GPU gate: its own claim (the host-wide registry keeps a GPU one lane's)."""

    def sleep(seconds: float) -> None:
        ctx.set_state("waiting_gpu")
        ctx.control.sleep(
            seconds,
            lambda left: ctx.progress(
                None, "waiting_gpu", f"lane {index}: no idle GPU free for it, next check in {left:.0f} s"
            ),
        )

    # a Ray lane's GPU is chosen by the gate on its worker: the head holds none
    backend = (
        NoGpu("a Ray lane: its worker's gate chooses the GPU")
        if ctx.cfg.parallel.backend == "ray"
        else open_backend(ctx.cfg.gpu.vendor)
    )
    return Gate(
        ctx.cfg.gpu,
        backend,
        sleep=sleep,
        pause=lambda seconds: ctx.control.sleep(seconds, lambda _left: None),  # a check's own: no GPU is busy
        own_pids=ctx.procs.own_pids,
        log=lambda m: ctx.event("gpu", f"lane {index}: {m}", level="warn"),
        owner=f"kopt run {ctx.ws.tag} lane {index} ({ctx.ws.dir})",
    )


# ---------------------------------------------------------------------------------------
# The baseline (v0)


class BaselineFailed(KoptFailure):
    """The unmodified baseline cannot be measured: the run stops with this reason."""


BASELINE_TRIES = 3
"""Attempts at each baseline run before the run stops. The baseline is the user's unmodified
code, so a run that fails and then passes is the bench's own flakiness, said in the record and
on the dashboard, not a reason to stop the night. Measured on the H200 (2026-11-30): Triton's
layer-norm tutorial asserts its backward against torch's at import with a fixed fp16 tolerance
on fresh random data, accumulated with atomics; it failed 1 baseline run in 3 (and one `kopt
init` in 3), passing on the next. A candidate's run is never tried again (its failure is its
verdict), nor is a baseline run that timed out or flooded its output (BenchError.ended)."""


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
        flaky: list[str] = []
        try:  # its early profile ([profile].baseline) held through its runs, and stopped if they fail
            runs, seconds = self.runs(it, lane, flaky)
        except BaseException:
            self.evidence.drop_ahead(lane)
            raise
        record_baseline(ctx, it, runs)
        self.estimate_decision_cost(it, lane, runs, seconds)
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
        ctx.jails.freeze_library()  # before any candidate runs: no run can grow what later runs see bound
        flakes = f"; {len(flaky)} run(s) failed and passed when run again: the bench is flaky" if flaky else ""
        ctx.close(
            it,
            Status.BASELINE,
            f"baseline over {len(runs[-1].configs)} configs in {len(it.record['classes'])} classes{flakes}",
        )

    def runs(self, it: Iteration, lane: Lane, flaky: list[str]) -> tuple[list[Measurement], list[float]]:
        """The baseline's [decide].min_rounds measurements and their seconds, a run that fails
        tried again up to BASELINE_TRIES times (`flaky` says which); BaselineFailed when it cannot."""
        ctx = self.ctx
        n = ctx.cfg.decide.min_rounds
        runs: list[Measurement] = []
        seconds: list[float] = []
        tries = 0
        try:
            while len(runs) < n:
                r = len(runs)
                ctx.progress(it, "baseline", f"baseline run {r + 1}/{n}", r, n)
                lease = acquire(ctx, lane, it)
                if not r and not tries:  # the gate chose the GPU: its vendor's profiler
                    self.evidence.profile_ahead(it, lane)  # the baseline's early profile, held until its runs end
                name = f"baseline_r{r}" + (f"_again{tries}" if tries else "")
                tries += 1
                try:
                    m, secs = ctx.control.preemptible(
                        lambda: self.run(it, lane, name, r, lease.env)  # noqa: B023 - run now
                    )
                except BenchError as e:
                    note_gpu(it, lane, *gpu_of(lane, lease))
                    if tries >= BASELINE_TRIES or not e.ended:  # a hang or a flood is not tried again
                        raise
                    self.again(it, flaky, r, f"the bench failed: {e}")
                    continue
                note_gpu(it, lane, *gpu_of(lane, lease))
                if m.failing:
                    fail = failure_of(m).summary()
                    if tries < BASELINE_TRIES:
                        self.again(it, flaky, r, f"it fails correctness: {fail}")
                        continue
                    self.keeper.discard(it, lane, Status.FAIL_CORRECTNESS, f"baseline fails correctness: {fail}")
                    raise BaselineFailed(f"the unmodified baseline fails correctness: {fail}")
                tries = 0
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
        return runs, seconds

    def run(self, it: Iteration, lane: Lane, name: str, r: int, env: dict[str, str]) -> tuple[Measurement, float]:
        """One baseline measurement of best's tree and its seconds: a Ray lane's on its worker
        (the GPU is there), any other here (measure.measure_best)."""
        if lane.remote is not None:
            return lane.remote.baseline_run(it, name, r)
        return measure_best(self.ctx, it, lane, name, r, env)

    def again(self, it: Iteration, flaky: list[str], r: int, what: str) -> None:
        """A baseline run failed with tries left: said, recorded, and run again."""
        flaky.append(f"run {r + 1}: {what}")
        it.record["baseline_flaky"] = list(flaky)
        self.ctx.event(
            "baseline",
            f"baseline run {r + 1} failed ({what}); running it again: the unmodified code failing only "
            f"sometimes is the bench's own flakiness (candidates' runs are never retried)",
            it=it,
            level="warn",
        )

    def estimate_decision_cost(self, it: Iteration, lane: Lane, runs: list[Measurement], seconds: list[float]) -> None:
        """What one decision will cost with this bench (from the baseline's runs and the
        policy): said on the dashboard and in `kopt status` when it is minutes, with the way
        to make it seconds (the public harness's served looks, one process per tree)."""
        ctx, t = self.ctx, self.ctx.cfg.target
        mode = "served" if t.serve else "process"
        noise = run_noise_pct([{k: c.value for k, c in m.configs.items()} for m in runs])
        policy = Policy.from_config(ctx.cfg.decide, t.direction)
        if served_trees_of(lane.measurer) is not None and len(seconds) > 1:  # best's served looks: a start, then looks
            look_s = statistics.median(seconds[1:])
            cost = estimate_decision_s(seconds[:1], policy, mode, noise_pct=noise, look_s=look_s)
        else:
            cost = estimate_decision_s(seconds, policy, mode, noise_pct=noise)
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

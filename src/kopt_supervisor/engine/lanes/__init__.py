"""Lanes: K candidates measured at once (docs/design.md §13; docs/lanes.md).

`make_lanes(ctx)` builds the run's lanes from [parallel]: each lane has its own candidate
worktree, its own copy of the best tree (with several lanes best/ itself, the branch's
worktree, only ever moves at a keep), its own GPU gate (its claim keeps the GPU its own:
never two lanes on one GPU, best and candidate of a pair always on the lane's GPU), and a
measurer: local processes, or (backend "ray") a Ray actor on a GPU host of a cluster that
gets the candidate as a git bundle and sends the samples back (engine/lanes/ray_backend.py).

With several lanes every measurer checks before each look that its candidate is still
decided against BEST (keep.OnBest): another lane's keep ends a decision at its next look.
With one local lane the run is what it always was: cand/ against best/.
"""

from __future__ import annotations

from kopt_supervisor.engine.gpu.backends import NoGpu, open_backend
from kopt_supervisor.engine.gpu.gate import Gate
from kopt_supervisor.engine.loop.context import RunContext, single_lane
from kopt_supervisor.engine.loop.lane import Lane
from kopt_supervisor.engine.loop.measure import OnBest, ProcessAbba, measurer_for


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
        from kopt_supervisor.engine.lanes import ray_backend

        ray_backend.connect(par.address, par.connect_timeout_s)
    for lane, ctx in zip(lanes, ctxs, strict=True):
        if par.backend == "ray":
            lane.host = "ray"
            lane.measurer = main = ray_backend.RayMeasurer(ctx, lane)
            lane.fresh = ray_backend.FreshOnWorker(main)  # the re-decision runs on the lane's worker too
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

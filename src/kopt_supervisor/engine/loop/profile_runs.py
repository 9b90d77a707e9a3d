"""The profiler's runs in one tree (docs/profiling.md): the bench (or [profile].command) under ncu /
rocprofv3, one run per pass of the profiler, each pass's report read back, all of them parsed
into one summary (`profile_in`). Run where the lane's GPU is: here, or on a Ray lane's worker
(ray_lanes.py `LaneWorker.profile`)."""

from __future__ import annotations

import json
from pathlib import Path

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.loop.context import Lane, RunContext, acquire, last_line
from kopt_supervisor.engine.loop.control import Step
from kopt_supervisor.engine.loop.served_trees import check_after_run
from kopt_supervisor.engine.profile.profiler import (
    PROFILE_CALLS_ENV,
    PROFILE_CONFIGS_ENV,
    PROFILE_ENV,
    PROFILE_OUTPUTS,
    PROFILE_OUTPUTS_ENV,
    PROFILE_SEED_ENV,
    ProfilePass,
    Profiler,
)
from kopt_supervisor.engine.profile.summary import ProfileSummary
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner.command import all_at_once, as_argv

Calls = tuple[int | None, tuple[str, ...]]
"""A profile's calls per config asked of the bench (None: its own) and the configs they are for (none: all)."""


def profile_in(
    ctx: RunContext,
    it: Iteration,
    lane: Lane,
    prof: Profiler,
    tree: Path,
    side: str,
    *,
    calls: Calls = (None, ()),
    seed: int | None = None,
) -> ProfileSummary:
    """The bench (or [profile].command) under the profiler in `tree`, one run per pass of the
    profiler (ncu: inside the kopt ranges, then GPU time alone outside them), each pass's
    report read back, and all of them parsed into one summary. `calls`: the calls per config
    asked of the bench and the configs they are for (KOPT_PROFILE_CALLS, KOPT_PROFILE_CONFIGS;
    None: the bench's own; no configs: all); `seed`: its inputs' seed
    (KOPT_PROFILE_SEED), and it summarises each config's outputs into out_dir/outputs.json
    (KOPT_PROFILE_OUTPUTS) for `profiler.compare_outputs`. The tree's folder is
    profiles/v<N>/<side> of `ctx`'s workspace. Run where the lane's GPU is: a Ray lane's on its
    worker (`lane.remote`, loop/ray_lanes.py, which runs this function there), the folder
    brought back."""
    out_dir = ctx.ws.profiles / f"v{it.version}" / side
    if lane.remote is not None:
        ctx.progress(it, "profile", f"{prof.name} on {tree.name}/ (on the lane's worker)")
        which = "cand" if tree == lane.cand else "best"
        with ctx.control.during(Step.PROFILE), ctx.clock(it, "profiler_s"):
            return lane.remote.profile(it, prof, which, side, calls, seed, out_dir)
    ctx.progress(it, "profile", f"{prof.name} on {tree.name}/")
    kernel = ctx.cfg.profile.kernel
    bench = as_argv(ctx.cfg.profile.command or ctx.cfg.target.bench)
    kind = "cand" if tree == lane.cand else "best"
    tree_hash = (
        str(it.record.get("evaluated_tree")) if kind == "cand" else tree_of(tree, it.best_commit_before or "HEAD")
    )
    lease = acquire(ctx, lane, it)
    done: list[ProfilePass] = []
    with ctx.control.during(Step.PROFILE), ctx.clock(it, "profiler_s"):
        while (
            step := prof.next_pass(bench, out_dir, kernel, done)
        ) is not None:  # ncu: inside, then outside the ranges
            name = f"profile_{side}" + (f"_pass{len(done)}" if done else "")
            res = ctx.procs.run(
                it,
                list(step.argv),
                cwd=tree,
                name=name,
                timeout_s=ctx.cfg.profile.timeout_s,
                env={
                    **lease.env,
                    **PROFILE_ENV,
                    **({PROFILE_CALLS_ENV: str(calls[0])} if calls[0] is not None else {}),
                    **({PROFILE_CONFIGS_ENV: json.dumps(list(calls[1]))} if calls[1] else {}),
                    **(
                        {PROFILE_SEED_ENV: str(seed), PROFILE_OUTPUTS_ENV: str(out_dir / PROFILE_OUTPUTS)}
                        if seed is not None
                        else {}
                    ),
                    **ctx.jails.env(kind, tree_hash),
                },
                confine=ctx.jails.bench(tree, kind, tree_hash, outputs=(out_dir,)),
            )
            check_after_run(ctx, lane, it, tree)
            if not res.ok:
                raise KoptFailure(f"{prof.name} on {side}/ ({step.label}) {res.why()}: {last_line(res)}")
            reads = prof.after_commands(step.out_dir)  # reading the report back: no GPU, all at once
            if reads:
                reader = ctx.jails.bench(tree, kind, tree_hash, outputs=(out_dir,), write_tree=False, gpu=False)
                done_read = ctx.procs.run(
                    it,
                    all_at_once(reads),
                    cwd=tree,
                    name=f"{name}_read",
                    timeout_s=ctx.cfg.profile.timeout_s,
                    confine=reader,
                )
                if not done_read.ok:
                    raise KoptFailure(
                        f"{prof.name} reading its report of {side}/ {done_read.why()}: {last_line(done_read)}"
                    )
            done.append(step)
    summary = prof.parse_passes(done, kernel)
    summary.save(out_dir / "summary.json")
    return summary

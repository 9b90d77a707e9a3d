"""The propose step: the context a proposer is handed (KOPT_PROMPT and the KOPT_* variables)
and the proposer's run, for one lane (docs/design.md §10).

A proposer that takes time (an agent, the engineer) first gets the lane's serving bench
closed, so nothing of kopt's holds GPU memory while it works. Its result, whatever it is, is
recorded in the iteration (`proposal`, or `repairs` for a correctness repair).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from kopt_supervisor.engine import gitops, projections
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.loop.context import RunContext, acquire
from kopt_supervisor.engine.loop.control import Step
from kopt_supervisor.engine.loop.lane import Lane
from kopt_supervisor.engine.propose.context import build_pack
from kopt_supervisor.engine.propose.context_inputs import PackInputs, SourceFile, list_sources
from kopt_supervisor.engine.propose.proposer import Proposal, ProposalContext, Proposer, route_submit, wait_key
from kopt_supervisor.engine.records import Iteration, Phase
from kopt_supervisor.engine.workspace import write_atomic

ONE_AT_A_TIME = threading.Lock()
"""A proposer that runs inside the engine (tune) proposes for one lane at a time: each sees
the points the others took."""


class Proposing:
    def __init__(self, ctx: RunContext, proposer: Proposer, in_flight: dict[int, str] | None = None) -> None:
        self.ctx = ctx
        self.proposer = proposer
        self._sources: dict[str, list[SourceFile]] = {}
        self.in_flight: dict[int, str] = {} if in_flight is None else in_flight
        """lane -> the hypothesis it is evaluating now (shared by the lanes: they tell each other)."""

    def sources(self, lane: Lane, it: Iteration) -> list[SourceFile]:
        """The target's files as the proposal's BEST has them (read once per BEST)."""
        best = it.best_commit_before or ""
        if best not in self._sources:
            self._sources = {best: list_sources(lane.best, self.ctx.cfg)}
        return self._sources[best]

    def other_lanes(self, lane: Lane) -> list[str]:
        """What the other lanes are trying now (their hypotheses), so proposals differ."""
        return [h for index, h in self.in_flight.items() if index != lane.index and h]

    @property
    def instant(self) -> bool:
        """A proposer that runs inside the engine in a moment (tune): the serving bench stays up."""
        return bool(getattr(self.proposer, "instant", False))

    def propose(
        self,
        it: Iteration,
        lane: Lane,
        *,
        repair: int = 0,
        failing: list[dict[str, Any]] | None = None,
        handed_back: dict[str, Any] | None = None,
    ) -> Proposal:
        ctx = self.ctx
        ctx.save(it, Phase.PROPOSE)
        if not self.instant and lane.measurer is not None:
            lane.measurer.close()  # an agent or the engineer may take hours: no idle GPU memory held
        if repair:  # best/ as clean as at the iteration's start (the bench wrote there since)
            gitops.reset_clean(lane.best, it.best_commit_before or ctx.history.best_commit())
        ctx.progress(it, "propose", f"proposer ({self.proposer.kind})" + (f", repair {repair}" if repair else ""))
        lease = acquire(ctx, lane, it)
        with ctx.clock(it, "proposer_s"), ONE_AT_A_TIME if self.instant else contextlib.nullcontext():
            proposal = self._run(it, lane, lease.env, repair, failing, handed_back)
            if repair == 0:
                it.record["proposal"] = proposal.details
            else:
                it.record.setdefault("repairs", []).append(proposal.details)
            ctx.save(it)  # inside the lock: the next lane's tune proposer sees this point as tried
        return proposal

    def _run(
        self,
        it: Iteration,
        lane: Lane,
        gpu_env: dict[str, str],
        repair: int,
        failing: list[dict[str, Any]] | None,
        handed_back: dict[str, Any] | None = None,
    ) -> Proposal:
        ctx = self.ctx
        its = ctx.store.iterations()
        # what other lanes are evaluating counts as tried: the tune proposer hands each a new point
        history = [
            projections.memory_record(h)
            for h in its
            if not h.masked
            and (h.final or h.awaiting_review or (h.version != it.version and bool(h.record.get("proposal"))))
        ]
        prompt_path = ctx.ws.prompt_path(it.version, repair)
        pack_path = prompt_path.with_suffix(".json")
        pack = build_pack(
            PackInputs(
                ctx.cfg,
                ctx.store.meta(),
                its,
                it.version,
                repair=repair,
                failing_rows=failing or (),
                hypothesis=it.hypothesis,
                target_class=it.target_class,
                sources=self.sources(lane, it),
                worktree=lane.cand,
                prompt_json_path=pack_path,
                plan_path=ctx.ws.plan_path(it.version),
                other_lanes=self.other_lanes(lane),
            )
        )
        try:
            prompt_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(prompt_path, handed_back_note(handed_back) + pack.markdown)
            write_atomic(pack_path, pack.json)
        except OSError as e:  # a full disk: no proposal without its prompt (not a crash)
            ctx.event("disk", f"cannot write {prompt_path}: {e}", level="error")
            return Proposal(False, f"cannot write the prompt: {e}")
        plan = ctx.ws.plan_path(it.version)
        env = {
            **gpu_env,
            **ctx.cfg.target.env,
            "KOPT_ITERATION": str(it.version),
            "KOPT_REPAIR": str(repair),
            "KOPT_PROMPT": str(prompt_path),
            "KOPT_PLAN": str(plan),
            "KOPT_WORKSPACE": str(ctx.ws.dir),
        }

        jail = ctx.jails.proposer(lane.cand, prompt_path, pack_path, plan, ctx.ws.log_dir(it.version) / "agent")

        def run(command: str | list[str], **kw: Any) -> Any:
            kw["env"] = {**(kw.get("env") or {}), **ctx.jails.env("proposer")}  # unconfined: caches out of cand/
            return ctx.procs.run(it, command, confine=jail, **kw)

        def wait_for_command(kinds: set[str], timeout_s: float) -> Any:
            return self.wait_for_submit(it, lane, repair, kinds, timeout_s)

        pctx = ProposalContext(
            iteration=it.version,
            repair=repair,
            worktree=lane.cand,
            workspace=ctx.ws.dir,
            prompt_path=prompt_path,
            plan_path=plan,
            log_dir=ctx.ws.log_dir(it.version),
            config=ctx.cfg,
            best_commit=it.best_commit_before or "",
            classes=ctx.store.get("classes", []),
            history=history,
            env={**env, "KOPT_PROMPT_JSON": str(pack_path)},
            run=run,
            wait_for_command=wait_for_command,
            prompt_json_path=pack_path,
            handed_back=handed_back,
        )
        try:
            with ctx.control.during(Step.PROPOSE):
                return self.proposer.propose(pctx)
        except KoptFailure as e:
            return Proposal(False, f"proposer failed: {e}")

    def wait_for_submit(self, it: Iteration, lane: Lane, repair: int, kinds: set[str], timeout_s: float) -> Any:
        """The manual proposer's wait: only for a submit addressed to this lane (each lane waits
        from its own thread on the run's one pump), said in the run's meta while it lasts
        (engine/propose/proposer.py `wait_key`: clients read which lanes wait, and where)."""
        ctx, lanes = self.ctx, self.ctx.cfg.parallel.lanes
        route = route_submit(lanes, lane.index)
        where = f" --lane {lane.index}" if lanes > 1 else ""
        key = wait_key(lane.index)
        said = {
            "lane": lane.index,
            "worktree": str(lane.cand.absolute()),
            "version": it.version,
            "repair": repair,
            "pid": os.getpid(),
        }
        ctx.store.set(key, {**said, "waiting": True, "t": time.time()})
        try:
            return ctx.control.wait_for(
                kinds,
                timeout_s,
                lambda: ctx.progress(
                    None, "propose", f"waiting for `kopt submit {ctx.ws.tag}{where}` (manual proposer)"
                ),
                route=lambda cmd: route(cmd.args),
            )
        finally:
            ctx.store.set(key, {**said, "waiting": False, "t": time.time()})


def handed_back_note(back: dict[str, Any] | None) -> str:
    """The prompt's first lines when a change comes back to its proposer (engine/loop/machine.py
    LaneLoop.hand_back): why, and what it was ("" otherwise)."""
    if not back:
        return ""
    return (
        f"## Handed back\n\nYour previous change ({back.get('hypothesis') or 'no hypothesis'}) was not "
        f"measured: {back.get('why')}. The worktree is at that BEST now.\n\n"
    )

"""Evidence beyond the bench's own numbers (docs/design.md §5 step 5, router's Step 0).

- `roofline(it, values)`: record["roofline"] for the tree `values` measured (specs with sources,
  % of peak per config and class), on the GPU the record names; the best tree's is the README's Step 0.
- `confirm(it, lane, verdict)`: for a keep, the profiler's GPU time of both trees (profile_runs.py
  `profile_in`, where the lane's GPU is), which must agree with the bench, else review.
- `confirm_keep(it, lane, verdict)`: a keep confirmed before its commit (fresh servers deciding only what it
  claims, decide/confirmation.py, or a process-level decision again), then its external truth
  (decide/external_truth.py): the profiler on a GPU, the OS's accounting without one, or "the bench's timer only".
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.decide import confirmation as claim_rule
from kopt_supervisor.engine.decide import external_truth as truth_rule
from kopt_supervisor.engine.decide.confirmation import ClassCheck, Confirmation, consistent_gain
from kopt_supervisor.engine.decide.estimate import Pair, Policy, Verdict
from kopt_supervisor.engine.decide.external_truth import ExternalTruth, os_truth
from kopt_supervisor.engine.decide.review import send_to_review
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS, voting_classes
from kopt_supervisor.engine.gitops import tree_of
from kopt_supervisor.engine.loop.context import Lane, Measurer, RunContext, carried, with_
from kopt_supervisor.engine.loop.measure import (
    CorrectnessFailure,
    DecisionRounds,
    OnBest,
    ProcessAbba,
    cand_medians,
    guard_configs,
)
from kopt_supervisor.engine.loop.profile_runs import HeldProfile, NotHeld, baseline_profile, profile_in, prove_held
from kopt_supervisor.engine.loop.served_trees import ServedTrees
from kopt_supervisor.engine.profile import Agreement, agrees, choose_profiler, profiler
from kopt_supervisor.engine.profile.classes import ConfigRef, compare_per_class, config_refs
from kopt_supervisor.engine.profile.floors import bytes_short, call_bytes, slower_than_kept
from kopt_supervisor.engine.profile.profiler import (
    PROFILE_FORMAT,
    CorrectnessRefuted,
    ProfileCalls,
    Profiler,
    ReusedProfile,
)
from kopt_supervisor.engine.profile.roofline import evaluate as evaluate_roofline
from kopt_supervisor.engine.profile.summary import ProfileSummary
from kopt_supervisor.engine.records import Iteration, Phase, Stage
from kopt_supervisor.engine.runner.server import ServerError


class Evidence:
    def __init__(self, ctx: RunContext, rounds: DecisionRounds | None = None) -> None:
        self.ctx = ctx
        self.rounds = rounds
        self._profiler: tuple[str, Profiler | None] | None = None
        self.ahead: dict[int, dict[str, HeldProfile]] = {}  # per lane, side: a keep's first profile, started ahead
        self.ahead_off = ""  # why no profile is started ahead any more in this run (a command that did not hold)
        self.ahead_held = False  # one started ahead in this run has held: later ones are not waited for
        self.released: dict[int, list[str]] = {}  # per lane: the sides of a keep's profiles taken from those

    def confirm(self, it: Iteration, lane: Lane, verdict: Verdict) -> Verdict:
        """The candidate's roofline; on a keep, the profiler's final word (reference program):
        the GPU time of every kernel launched inside each config's range, per class, must
        agree with the bench within the profiler's own noise (engine.profile.classes)."""
        ctx = self.ctx
        self.roofline(it, cand_medians(ctx, it, Stage.EVAL), readme=False)
        scan = it.record.get("diff_scan") or {}
        if scan.get("findings"):  # the diff reaches outside the kernel: the engineer decides
            verdict = send_to_review(
                verdict, "diff_constructs", f"the diff reaches outside the kernel: {scan['reason']}"
            )
        prof = self.profiler(lane, it)
        if verdict.kind != "keep" or prof is None:
            self.drop_ahead(lane)  # a review may last hours: nothing started ahead waits through it
            return verdict
        prof = prof.for_keep(ctx.cfg.profile.keep)  # ncu: one pass, GPU time and L2 bytes (by default)
        # confirm_keep's servers start after the profile: the candidate's import would slow best's kernels
        trees = {
            "best": tree_of(lane.best, it.best_commit_before or "HEAD"),
            "cand": str(it.record.get("evaluated_tree")),
        }
        gpu = self.gpu_uuid(lane)
        reused = self.reusable_best(trees["best"], gpu)
        policy = Policy.from_config(ctx.cfg.decide, ctx.cfg.target.direction)
        first: Agreement | None = None
        own = self.own_calls()  # the bench's own calls per config, as the baseline's profile said them
        calls = ProfileCalls.first(own)
        # the candidate's outputs against the baseline's at its seed (a kept tree's dormant code could
        # write the next cheat's), else best's: the first pair's, never a closer one's (asked for by being unclear)
        anchor = self.baseline_outputs()
        prior = it.record.get("profile") or {}
        again = prior.get("anchor")  # confirmed again: more rounds, a rebase
        base = ctx.history.baseline()
        # no baseline profile yet ([profile].baseline, or one failed), best the baseline's tree: its side anchors
        anchors = again is not None or (
            anchor is None and reused is None and base is not None and it.best_commit_before == base.commit
        )
        if anchor is not None:
            seed, reference = anchor[0], (anchor[1], "baseline")
        else:
            seed = self.first_seed(lane, it, reused)
            folder = reused.out_dir if reused else ctx.ws.profiles / f"v{it.version}" / "best"
            reference = (folder, "baseline" if anchors else "best")
        first_seed, best_dir = (again, "best_again") if again is not None else (seed, "best")
        closer: list[str] = []  # the classes a closer profile looks at
        try:
            while True:
                bests, cands = self.profile_pair(it, lane, prof, reused, calls, seed, best_dir)
                if not own and anchors and (own := self.own_calls(reference[0])):  # this pair's best: the baseline
                    named = tuple(sorted(own.items()))  # the bench's own calls, which the pair ran unasked
                    bests, cands = [replace(x, asked=named) for x in bests], [replace(x, asked=named) for x in cands]
                cmp = compare_per_class(
                    bests,
                    cands,
                    self.config_refs(),
                    confidence=policy.confidence,
                    run_noise_pct=profiler.run_noise_pct(ctx.cfg.profile.run_noise_pct, reused),
                )
                agreement = agrees(
                    verdict.classes,
                    cmp,
                    min_effect_pct=policy.min_effect_pct,
                    guards={GUARD_CLASS: policy.guard_max_regression_pct},
                    other_max_pct=policy.max_other_regression_pct,
                )
                again = agreement.held_half(*CLAIM_RULES) if agreement.disagrees else unshown(agreement)
                if calls.more is not None or not again:  # a claim unshown (no keep) or held_half: look closer
                    break  # at its configs; every class is judged again, the others at their own calls
                first, reused, closer = agreement, None, again
                calls = ProfileCalls.closer(own, [r.key for r in self.config_refs() if r.cls in closer])
                seed = secrets.randbelow(1 << 31)
                ctx.event(
                    "profile",
                    f"v{it.version}: the profiler could not show the gain of {', '.join(again)} "
                    f"({agreement.summary_line()}): both trees again, {calls.more} calls per config of {', '.join(closer)}",
                    it=it,
                )
        except KoptFailure as e:
            it.record["profile"] = {"error": str(e), **({"first": first.to_dict()} if first else {})}
            ctx.save(it)
            return with_(
                verdict,
                kind="borderline",
                reason=f"the bench says keep, but the profiler failed: {e}",
                flags=(*verdict.flags, "profiler_failed"),
            )
        refuted: CorrectnessRefuted | None = None
        try:
            folder = ctx.ws.profiles / f"v{it.version}"
            outputs = self.profile_outputs(reference[0], folder / "cand", reference=reference[1])
            if calls.more is not None and not outputs.get("unconfirmed"):  # the closer profile's: best's in it
                closer_outputs = self.profile_outputs(
                    folder / f"{best_dir}_more", folder / "cand_more", asked=dict(calls.asked or ())
                )
                outputs = {**outputs, "closer": closer_outputs}
                if closer_outputs.get("unconfirmed"):
                    outputs["unconfirmed"] = f"in the closer profile: {closer_outputs['unconfirmed']}"
        except CorrectnessRefuted as e:
            refuted, outputs = e, {"refuted": str(e)}
        # what the candidate's ranges moved through L2 against what each call must move
        refs = self.config_refs()
        need = call_bytes(ctx.cfg.roofline.bytes, refs)
        floors = [bytes_short(b, c, refs, need) for b, c in zip(bests, cands, strict=True)]
        short = [x for found in floors for x in found or []]
        checked = bool(need) and any(found is not None for found in floors)
        made = ctx.history.best_iteration()  # best profiled afresh: no slower than when its tree was kept
        kept = profiler.kept_profile((made.version, made.record) if made else None, trees["best"], gpu)
        slowed = [x.line() for b in bests for x in slower_than_kept(kept[1], b, refs)] if kept and not reused else []
        it.record["profile"] = {
            "bytes": {"checked": checked, "short": [x.line() for x in short]},
            **({"best_floor": {"from": kept[0], "slower": slowed}} if kept and not reused else {}),
            "best": bests[0].to_dict(),
            "cand": cands[0].to_dict(),
            "comparison": cmp.to_dict(),
            "agreement": agreement.to_dict(),
            "taken": {
                "keep": ctx.cfg.profile.keep,
                "profiler": prof.name,
                "gpu": gpu,
                "trees": trees,
                "t": time.time(),
                "best_from": reused.version if reused else None,
                "best_is_baseline": base is not None and it.best_commit_before == base.commit,
                "calls": calls.more,
                **({"closer": closer} if closer else {}),
                "seed": seed,
                "ahead": self.released.pop(lane.index, []),
                "format": PROFILE_FORMAT,
            },
            "outputs": outputs,
            **({"first": first.to_dict()} if first else {}),
            **({"anchor": first_seed, "baseline": prior.get("baseline") or bests[0].to_dict()} if anchors else {}),
        }
        ctx.save(it)
        ctx.event("profile", f"v{it.version}: {cmp.summary_line()}", it=it)
        if refuted is not None:
            raise refuted
        if outputs.get("unconfirmed"):
            return with_(
                verdict,
                kind="borderline",
                reason=f"the profiler's outputs could not be compared: {outputs['unconfirmed']}",
                flags=(*verdict.flags, "profile_outputs_unconfirmed"),
            )
        if short:
            return with_(
                verdict,
                kind="borderline",
                reason="the profiler saw less work than the configs need: "
                + "; ".join(x.line() for x in short[:3])
                + " (work ncu did not see: a profiler switched off from inside the process?)",
                flags=(*verdict.flags, "profiler_bytes_short"),
            )
        if slowed:
            why = f"best/ ran slower under the profiler than when v{kept[0] if kept else '?'} kept its tree: "
            return with_(
                verdict, kind="borderline", reason=why + "; ".join(slowed), flags=(*verdict.flags, "best_slowed")
            )
        if agreement.disagrees:
            return with_(
                verdict, kind="borderline", reason=agreement.reason(), flags=(*verdict.flags, "profiler_disagrees")
            )
        return with_(verdict, reason=f"{verdict.reason}; profiler: {agreement.summary_line()}")

    def profile_pair(
        self,
        it: Iteration,
        lane: Lane,
        prof: Profiler,
        reused: ReusedProfile | None,
        calls: ProfileCalls,
        seed: int,
        best_dir: str = "best",
    ) -> tuple[list[ProfileSummary], list[ProfileSummary]]:
        """Best's (into `best_dir`; from the keep that made it BEST when `reused`) and the candidate's
        profiles, [profile].repeats of each, in copies and an order that say neither side. With `calls`
        (n, configs), each config of `configs` (all: none named) runs n times (best_more/, cand_more/)."""
        bests: list[ProfileSummary] = []
        cands: list[ProfileSummary] = []
        more = "_more" if calls.more is not None else ""
        for n in range(max(1, self.ctx.cfg.profile.repeats)):
            suffix = f"{more}_{n}" if n else more
            if reused is not None:
                bests.append(reused.summary)
                self.ctx.event(
                    "profile",
                    f"v{it.version}: best/'s profile taken from v{reused.version}'s of the same tree "
                    f"on the same GPU, {reused.age_s:.0f} s ago",
                    it=it,
                )
            pair = [(lane.best, best_dir, bests), (lane.cand, "cand", cands)]
            for tree, side, got in pair if secrets.randbits(1) else pair[::-1]:  # a coin's order: it says no side
                if reused is None or tree != lane.best:
                    got.append(self.profile(it, lane, prof, tree, f"{side}{suffix}", calls, seed))
        return bests, cands

    def profile(
        self, it: Iteration, lane: Lane, prof: Profiler, tree: Path, side: str, calls: ProfileCalls, seed: int
    ) -> ProfileSummary:
        """One tree's profile: the one started ahead for it when it is this one (`profile_ahead`),
        else `profile_in`. A command that did not hold turns profiles ahead off for the run."""
        held = self.ahead.get(lane.index, {}).pop(side, None)
        if held is not None:
            if held.matches(it, tree, side, seed, calls):
                try:
                    summary = held.release()
                except NotHeld as e:
                    self.ahead_off = str(e)
                    self.ctx.event(
                        "profile", f"v{it.version}: {e}; profiles are no longer started ahead", it=it, level="warn"
                    )
                    raise
                if summary is not None:
                    self.released.setdefault(lane.index, []).append(side)
                    return summary
            else:
                held.cancel()
        return profile_in(self.ctx, it, lane, prof, tree, side, calls=calls, seed=seed)

    def profile_ahead(self, it: Iteration, lane: Lane) -> None:
        """Before a decision: start the profiles a keep of it would take first (the candidate's, and best's
        when best's last one cannot be reused), held until the keep (HeldProfile): where [profile].ahead
        allows, on a local GPU lane, one pass per tree; before the baseline's runs, its own ([profile].baseline
        "early"), held until they end. What is started and not taken is told to stop (`drop_ahead`)."""
        self.drop_ahead(lane)
        ctx = self.ctx
        cfg = ctx.cfg.profile
        wanted = cfg.ahead == "on" or (cfg.ahead == "auto" and bool(ctx.cfg.target.serve))
        if not wanted or self.ahead_off or lane.remote is not None or lane.vendor == "none" or cfg.repeats != 1:
            return
        if (base := it.phase == Phase.BASELINE) and ctx.cfg.baseline_profile() != "early":
            return  # the baseline's: best's tree alone, and only to be profiled early
        if (it.record.get("profile") or {}).get("anchor") is not None:
            return  # confirmed again: at its own seed, best profiled again (confirm)
        prof = self.profiler(lane, it)
        if prof is None:
            return
        prof = prof.for_keep(cfg.keep)
        reused = self.reusable_best(tree_of(lane.best, it.best_commit_before or "HEAD"), self.gpu_uuid(lane))
        anchor = self.baseline_outputs()
        seed = anchor[0] if anchor is not None else self.first_seed(lane, it, reused)  # none held: a new one
        started: dict[str, HeldProfile] = {}
        self.ahead[lane.index] = started
        try:
            for side, tree in (("cand", lane.cand), ("best", lane.best)):
                if (side == "best" and reused is not None) or (side == "cand" and base):
                    continue
                started[side] = HeldProfile(ctx, it, lane, prof, tree, side, seed, ProfileCalls.first(self.own_calls()))
        except (KoptFailure, ServerError, OSError) as e:
            self.drop_ahead(lane)
            ctx.event("profile", f"v{it.version}: the keep's profile not started ahead: {e}", it=it, level="warn")
            return
        if not self.ahead_held:  # the run's first: before any look, proof that the command holds
            self.ahead_off = prove_held(ctx, it, started.values())
            self.ahead_held = not self.ahead_off
            if self.ahead_off:
                self.drop_ahead(lane)

    def first_seed(self, lane: Lane, it: Iteration, reused: ReusedProfile | None) -> int:
        """The first profile's seed without a baseline's: best's reused profile's, else the one
        the profiles started ahead for this decision took, else a new one."""
        if reused is not None and reused.seed is not None:
            return reused.seed
        held = next(iter(self.ahead.get(lane.index, {}).values()), None)
        if held is not None and held.it.version == it.version:
            return held.seed
        return secrets.randbelow(1 << 31)

    def drop_ahead(self, lane: Lane) -> None:
        """Stop the lane's profiles started ahead and not taken."""
        self.released.pop(lane.index, None)
        for held in self.ahead.pop(lane.index, {}).values():
            held.cancel()

    def reusable_best(self, best_tree: str, gpu: str | None) -> ReusedProfile | None:
        """Best's tree's profile from the keep that made it BEST, when reusable (profiler.reusable)."""
        made = self.ctx.history.best_iteration()
        return profiler.reusable(
            (made.version, made.record) if made else None,
            best_tree,
            gpu,
            self.ctx.cfg.profile,
            now=time.time(),
            profiles=self.ctx.ws.profiles,
        )

    def gpu_uuid(self, lane: Lane) -> str | None:
        """The UUID of the GPU the lane's gate chose (None: none chosen, or no UUID known)."""
        uuid = (lane.remote.gpu[0] or {}).get("uuid") if lane.remote else getattr(lane.gate, "chosen_uuid", None)
        return f"{lane.host}:{uuid}" if isinstance(uuid, str) and uuid else None

    def confirm_keep(self, it: Iteration, lane: Lane, verdict: Verdict) -> Verdict:
        """A keep confirmed before its commit, in processes none of the decision's code ran in:
        fresh servers (`[target].serve`) deciding only what the keep claims, or the process-level
        bench deciding again (no served mode; a Ray lane's worker); then its external truth
        (the profiler on a GPU, the OS's accounting without one). A refuted claim is no keep, a
        confirmation that disagrees goes to review with both numbers, a keep that needs the
        stronger checks stands only when they ran and agree (decide/external_truth.settle). A
        row that fails its correctness rule (or kopt's audit) fails the candidate."""
        ctx = self.ctx
        if verdict.kind != "keep" or self.rounds is None:
            return verdict
        t0 = time.monotonic()
        policy = Policy.from_config(ctx.cfg.decide, ctx.cfg.target.direction)
        profile = it.record.get("profile") or {}
        # a carried keep (decided against an older BEST) takes the looks: they measure what it commits
        by_profile = lane.vendor != "none" and not carried(it)
        conf = truth_rule.by_profiler(profile, verdict, policy) if by_profile else None
        if conf is None:
            with ctx.clock(it, "reverify_s"):
                served = bool(ctx.cfg.target.serve) and lane.fresh is None
                conf = (self.served_confirmation if served else self.process_confirmation)(it, lane, verdict)
        conf = with_(conf, seconds=round(time.monotonic() - t0, 2))
        if conf.path == "process":
            it.record["reverify"]["seconds"] = conf.seconds
        truth = self.external_truth(it, lane)
        it.record["confirmation"] = conf.to_dict()
        it.record["external_truth"] = truth.to_dict()
        ctx.save(it)
        ctx.event(
            "confirm",
            f"v{it.version}: {conf.outcome} {'by its profile pair' if conf.looks == 0 else f'in {conf.looks} fresh look(s)'}, {conf.seconds:.1f} s "
            f"({conf.reason}); {truth.reason}",
            it=it,
            level="info" if conf.outcome == "confirmed" and truth.outcome != "refuted" else "warn",
        )
        return truth_rule.settle(verdict, conf, truth)

    def served_confirmation(
        self, it: Iteration, lane: Lane, claim: Verdict, fresh: Measurer | None = None
    ) -> Confirmation:
        """Looks in two freshly started servers (new processes, emptied caches, fresh seeds, each
        look audited) until decide/confirmation.judge concludes on the classes the keep claims
        (up to EXTENDED_MAX_LOOKS; without a GPU up to OS_MAX_LOOKS while the OS's accounting
        cannot tell yet). `fresh`: the servers to use instead (tests)."""
        assert self.rounds is not None
        policy = self.rounds.policy()
        guard = guard_configs(self.ctx)
        os_decides = lane.vendor == "none"
        cap = claim_rule.OS_MAX_LOOKS if os_decides else claim_rule.EXTENDED_MAX_LOOKS

        def judge(done: list[Pair], runs: list[dict[str, Any]], gpu_s: float, looks: int) -> Confirmation | None:
            step = claim_rule.judge(done, claim, policy, guard_configs=guard, looks=looks, bounded=not carried(it))
            if not step.final:
                return None
            if (
                step.outcome == "confirmed"
                and os_decides
                and looks < cap
                and os_truth(it.record).outcome == "inconclusive"
            ):
                return None  # the OS's clocks cannot tell yet: a few more looks, up to OS_MAX_LOOKS
            return step

        if lane.measurer is not None:  # the decision's servers, in best/ and cand/, end first: no oracle
            lane.measurer.release()
        measurer = fresh or ServedTrees(self.ctx, lane, fresh=True)
        # with several lanes (measurers check BEST before each look) another lane's keep ends it too
        checked = OnBest(self.ctx, measurer) if isinstance(lane.measurer, OnBest) else measurer
        try:
            out = self.rounds.looks(
                it, lane, Stage.REVERIFY, judge, min_looks=claim_rule.MIN_LOOKS, max_looks=cap, measurer=checked
            )
        finally:
            measurer.close()  # its processes never serve another decision
        if isinstance(out, CorrectnessFailure):
            it.record["failing_rows"] = out.failing
            raise CorrectnessRefuted(f"the keep fails correctness in fresh servers: {out.summary()}")
        return out

    def process_confirmation(self, it: Iteration, lane: Lane, verdict: Verdict) -> Confirmation:
        """The process-level bench decides again in fresh, confined processes (record["reverify"]):
        confirmed when it keeps, or left undecided showing half of each claim (`consistent_gain`)."""
        assert self.rounds is not None
        measurer = lane.fresh or ProcessAbba(self.ctx, lane, fresh_caches=True)
        fresh = self.rounds.decide(it, lane, Stage.REVERIFY, measurer=measurer)
        if isinstance(fresh, CorrectnessFailure):
            it.record["failing_rows"] = fresh.failing
            raise CorrectnessRefuted(f"the keep fails correctness in fresh processes: {fresh.summary()}")
        agrees = fresh.kind == "keep" or consistent_gain(verdict, fresh)
        it.record["reverify"] = {**fresh.to_dict(), "agrees": agrees}
        claimed = claim_rule.claimed_gains(verdict)
        states = {"improved": "shown", "regressed": "slower"}
        checks = tuple(
            ClassCheck(c.cls, claimed.get(c.cls), c.ratio, c.lo, c.hi, states.get(c.verdict, "open"))
            for c in fresh.classes
        )
        outcome = "confirmed" if agrees else "undecided" if fresh.kind == "borderline" else "refuted"
        reason = fresh.reason if agrees else f"{fresh.kind}: {fresh.reason}"
        return Confirmation(outcome, reason, fresh.rounds, checks, path="process")

    def external_truth(self, it: Iteration, lane: Lane) -> ExternalTruth:
        """What confirms the keep outside the candidate's process: on a GPU the profiler's
        agreement (`confirm` ran it; none configured: the bench's timer only); without a GPU
        the OS's accounting over every look of the decision and of the confirmation."""
        vendor = lane.vendor
        if vendor != "none":
            if self.profiler(lane, it) is None:
                kind = self.ctx.cfg.profile.kind
                return truth_rule.timer_only(
                    f'no profiler for the {vendor} GPU ([profile].kind = "{kind}"'
                    f"{': none found' if kind == 'auto' else ''})"
                )
            profile = it.record.get("profile") or {}
            if not isinstance(profile.get("agreement"), dict):
                return truth_rule.timer_only(
                    f"the profiler did not compare the trees ({profile.get('error', 'no record')})"
                )
            agreement = Agreement.from_dict(profile["agreement"])
            if not any(claim_rule.is_claimed(c.cls, c.bench_verdict) for c in agreement.classes):
                return truth_rule.timer_only(f"the profiler could not tell for any class ({agreement.summary_line()})")
            if unshown(agreement):
                calls = (profile.get("taken") or {}).get("calls")
                return truth_rule.profiler_unshown(
                    unshown(agreement), agreement.summary_line(), profile["agreement"], calls
                )
            return truth_rule.of_profiler(agreement.summary_line(), profile["agreement"])
        return truth_rule.of_os_time(os_truth(it.record))

    def profile_outputs(
        self, ref: Path, cand: Path, *, reference: str = "best", asked: dict | None = None
    ) -> dict[str, Any]:
        """The candidate's outputs under the profiler against the reference's, "baseline" or "best"
        (profiler.compare_outputs), with the baseline's configs, the run's earlier comparisons and
        (`asked`: a closer pair's calls) the baseline's outputs per call."""
        record = base.record if (base := self.ctx.history.baseline()) else {}
        columns, configs = [str(c) for c in (record.get("config_columns") or [])], set(record.get("configs") or ())
        earlier = [it.record for it in self.ctx.history.store.iterations()]
        own = self.baseline_outputs(masked=True) if asked else None  # a closer pair's: the baseline's word
        return profiler.compare_outputs(
            ref,
            cand,
            columns=columns,
            configs=configs,
            earlier=earlier,
            reference=reference,
            asked=asked,
            own=own[1] if own else None,
        )

    def baseline_outputs(self, masked: bool = False) -> tuple[int, Path] | None:
        """The baseline's profile's seed and folder (profiler.baseline_reference): the baseline's
        own, else the first keep's profile of the baseline's tree (`anchor`; `masked`: one masked too)."""
        base = self.ctx.history.baseline()
        if base is None:
            return None
        its = [(i.version, i.record) for i in self.ctx.history.store.iterations() if masked or not i.masked]
        return profiler.baseline_reference((base.version, base.record), its, self.ctx.ws.profiles)

    def own_calls(self, folder: Path | None = None) -> dict[str, int]:
        """The bench's own calls per config, said by the baseline's profile in `folder` (else its reference)."""
        anchor, base = self.baseline_outputs(masked=True), self.ctx.history.baseline()  # the tree's word, masked or not
        folder = folder or (anchor[1] if anchor is not None else None)
        columns = [str(c) for c in ((base.record.get("config_columns") or []) if base else [])]
        return profiler.own_calls(folder, columns, [r.key for r in self.config_refs()]) if folder else {}

    def config_refs(self) -> list[ConfigRef]:
        """The baseline's configs with the classes the decisions vote in (the guard class)."""
        base = self.ctx.history.baseline()
        configs = (base.record.get("configs") or {}) if base else {}
        votes = voting_classes({k: c["cls"] for k, c in configs.items()}, guard_configs(self.ctx))
        return config_refs(configs, class_of=votes)

    def baseline(self, it: Iteration, lane: Lane, values: dict[str, float]) -> None:
        """The baseline's roofline (the README's Step 0) and its profile (tolerated to fail), which summarises
        its outputs at a seed it records: what every keep's candidate is compared with under the profiler."""
        self.roofline(it, values, base=it)
        if (prof := self.profiler(lane, it)) is None:
            return
        if (when := self.ctx.cfg.baseline_profile()) == "first-keep":
            msg = "the baseline's tree is profiled by the first keep, beside its candidate ([profile].baseline)"
            return self.ctx.event("profile", f"v{it.version}: {msg}", it=it)
        held = self.ahead.get(lane.index, {}).get("best")  # its early profile, started with its runs
        seed = held.seed if held else secrets.randbelow(1 << 31)  # the inputs every keep's profile draws
        try:
            take = lambda p: self.profile(it, lane, p, lane.best, "best", ProfileCalls(), seed)  # noqa: E731
            it.record["profile"] = baseline_profile(self.ctx, it, lane, prof, seed, self.gpu_uuid, when, take)
        except KoptFailure as e:
            self.ctx.event("profile", f"v{it.version}: profiling best/ failed: {e}", it=it, level="warn")

    def roofline(
        self, it: Iteration, values: dict[str, float], *, base: Iteration | None = None, readme: bool = True
    ) -> None:
        """record["roofline"] of the tree `values` measured (and the README's text for best)."""
        base = base or self.ctx.history.baseline()
        configs = (base.record.get("configs") or {}) if base else {}
        if not configs:
            return
        gpu = it.record.get("gpu") or {}
        name = gpu.get("name") if gpu.get("uuid") else None
        try:
            rr = evaluate_roofline(
                self.ctx.cfg,
                gpu_name=name,
                gpu_uuid=gpu.get("uuid"),
                rows={k: c["row"] for k, c in configs.items()},
                values=values,
                class_of=voting_classes({k: c["cls"] for k, c in configs.items()}, guard_configs(self.ctx)),
                production=[k for k, c in configs.items() if c.get("production", True)],
                measured_dir=self.ctx.ws.root / ".ceilings",
            )
        except KoptFailure as e:
            it.record["roofline"] = {"error": str(e)}
            self.ctx.event("roofline", f"roofline analysis failed: {e}", level="error")
            return
        if rr is not None:
            it.record["roofline"] = rr.record
            if readme:
                self.ctx.store.set("roofline_md", rr.markdown)

    def profiler(self, lane: Lane, it: Iteration) -> Profiler | None:
        """The configured profiler for the lane's GPU vendor (None: no profiling)."""
        vendor = lane.vendor
        if self._profiler is None or self._profiler[0] != vendor:
            kind, outside = self.ctx.cfg.profile.kind, self.ctx.cfg.profile.outside_ranges
            self._profiler = (
                vendor,  # a Ray lane's: the worker's (its tools on its PATH), run there
                lane.remote.profiler(it, kind, outside)
                if lane.remote is not None and vendor != "none"
                else choose_profiler(kind, vendor, outside_ranges=outside),
            )
        return self._profiler[1]


CLAIM_RULES = (claim_rule.is_claimed, claim_rule.shows_half)  # what Agreement.held_half asks of a claim


def unshown(agreement: Agreement) -> list[str]:
    """The classes a keep claims (confirmation.is_claimed) whose gain the profiler does not show."""
    shown = truth_rule.profiler_shows
    return [
        c.cls
        for c in agreement.classes
        if claim_rule.is_claimed(c.cls, c.bench_verdict) and not shown(c.status, c.bench_ratio, c.profiler_ratio)
    ]

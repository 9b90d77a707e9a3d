"""The state machine (engine/loop/__init__.py) driven with fake collaborators: no subprocess,
no git, no GPU — only a real run.db. Each test scripts what the collaborators answer and
checks the path an iteration takes, what the store says after it, and the counters."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import history
from kopt_supervisor.engine.decide.estimate import Verdict
from kopt_supervisor.engine.gpu.gate import GateDecision, NoIdleGpu
from kopt_supervisor.engine.loop import Engine, Parts
from kopt_supervisor.engine.loop.context import Lane
from kopt_supervisor.engine.loop.control import Interrupt, Request, Step
from kopt_supervisor.engine.loop.measure import CorrectnessFailure
from kopt_supervisor.engine.loop.proposal import Problem
from kopt_supervisor.engine.propose.proposer import Proposal
from kopt_supervisor.engine.records import Iteration, Phase, Stage, Status
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import (
    Workspace,
    command_sealer,
    config_seal,
    make_secret,
    read_secret,
    seal_new_keep,
)

TOML = """[target]
bench = "python bench.py"
metric = "us"

[gpu]
vendor = "none"

[stop]
consecutive_regressions = 3
"""


def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path, "t")
    for d in (ws.dir, ws.memory, ws.plans, ws.logs, ws.profiles):
        d.mkdir(parents=True, exist_ok=True)
    ws.config_path.write_text(TOML)
    key = make_secret(ws.dir)
    with Store.create(ws.db_path) as s:
        s.set_many(
            {
                "tag": "t",
                "repo": str(tmp_path / "repo"),
                "baseline_commit": "b" * 40,
                "state": "stopped",
                "classes": ["cls=a", "cls=b"],
                "frozen_config": TOML,
                "chain_sealed": True,
                "frozen_config_seal": config_seal(key, TOML),
            }
        )
        base = Iteration(
            0,
            Status.BASELINE,
            phase=Phase.DONE,
            commit="b" * 40,
            started_at=time.time(),
            finished_at=time.time(),
            record={"classes": {"cls=a": {"best": 1.0}}},
        )
        seal_new_keep(key, [], base)  # as the engine seals a keep
        s.save_iteration(base)
    return ws


def sealer(ws: Workspace) -> Any:
    """Commands as the user's kopt sends them: sealed with the run's secret."""
    return command_sealer(read_secret(ws.dir))


def verdict(kind: str, reason: str = "") -> Verdict:
    return Verdict(kind, reason or kind, rounds=3)


class FakeGate:
    chosen = None

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def acquire(self) -> GateDecision:
        if self.fail:
            raise NoIdleGpu("no idle GPU for 1 s")
        return GateDecision(None, {}, 0.0, [])

    def evidence(self) -> None:
        return None

    def close(self) -> None:
        pass


class FakeMeasurer:
    closed = 0

    def close(self) -> None:
        self.closed += 1


@dataclass
class Script:
    """What the fake collaborators answer, one entry per call, and what they saw."""

    proposals: list[Proposal] = field(default_factory=list)
    problems: list[Problem | None] = field(default_factory=list)
    decisions: list[Any] = field(default_factory=list)
    """Verdicts, CorrectnessFailures, or exceptions to raise."""
    confirmed: list[str] = field(default_factory=list)
    """Kinds the evidence turns a keep into (default: unchanged)."""
    reviews: list[tuple[str, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    listed_ahead: bool = False
    """The police was asked to list the bench's importable modules ahead of the first check."""


class FakeProposing:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.proposer = type("P", (), {"kind": "fake"})()
        self.in_flight: dict[int, str] = {}

    def propose(
        self, it: Iteration, lane: Lane, *, repair: int = 0, failing: Any = None, handed_back: Any = None
    ) -> Proposal:
        self.script.calls.append(f"propose v{it.version} repair {repair}" + (" handed back" if handed_back else ""))
        proposal = self.script.proposals.pop(0) if self.script.proposals else Proposal(True)
        it.record["proposal"] = proposal.details  # as the real step records it
        return proposal


class FakePolice:
    def __init__(self, script: Script) -> None:
        self.script = script

    def config_intact(self, it: Iteration) -> Problem | None:
        return None

    def list_modules_ahead(self) -> None:
        self.script.listed_ahead = True

    def check(self, it: Iteration, lane: Lane, *, plan: bool = True) -> Problem | None:
        self.script.calls.append(f"police v{it.version}")
        if plan:
            it.hypothesis = f"hypothesis {it.version}"
        return self.script.problems.pop(0) if self.script.problems else None


class FakeRounds:
    def __init__(self, script: Script) -> None:
        self.script = script

    def decide(self, it: Iteration, lane: Lane, stage: Stage, *, extra_rounds: int = 0) -> Any:
        self.script.calls.append(f"decide v{it.version} {stage}")
        out = self.script.decisions.pop(0)
        return out() if callable(out) else out


class FakeEvidence:
    def __init__(self, script: Script) -> None:
        self.script = script

    def confirm(self, it: Iteration, lane: Lane, v: Verdict) -> Verdict:
        self.script.calls.append(f"evidence v{it.version}")
        if v.kind == "keep" and self.script.confirmed:
            return verdict(self.script.confirmed.pop(0), "the profiler disagrees")
        return v

    def confirm_keep(self, it: Iteration, lane: Lane, v: Verdict) -> Verdict:
        if v.kind == "keep":
            self.script.calls.append(f"confirm keep v{it.version}")
        return v

    def profile_ahead(self, it: Iteration, lane: Lane) -> None:
        """A keep's profile started with each decision (loop/profile_runs.py): none here."""

    def drop_ahead(self, lane: Lane) -> None:
        """Nothing started ahead to stop."""


class FakeReview:
    def __init__(self, script: Script, ctx: Any) -> None:
        self.script, self.ctx = script, ctx

    def ask(self, it: Iteration, lane: Lane, v: Verdict) -> tuple[Verdict, str]:
        self.script.calls.append(f"review v{it.version}")
        kind, by = self.script.reviews.pop(0)
        return verdict(kind, f"{kind} by the {by}"), by

    def resume(self, it: Iteration, lane: Lane) -> tuple[Verdict, str, bool]:
        self.script.calls.append(f"resume review v{it.version}")
        kind, by = self.script.reviews.pop(0)
        return verdict(kind), by, True


class FakeKeeper:
    def __init__(self, script: Script, ctx: Any) -> None:
        self.script, self.ctx = script, ctx

    def check_best(self, it: Iteration) -> None:
        pass

    def on_best(self, it: Iteration, lane: Lane) -> None:
        pass

    def carry(self, it: Iteration, lane: Lane, claim: Verdict) -> Verdict:
        self.script.calls.append(f"carry v{it.version}")
        return claim

    def hand_back(self, it: Iteration, lane: Lane, best: str) -> dict[str, Any]:
        self.script.calls.append(f"hand back v{it.version} onto {best[:4]}")
        it.best_commit_before = best
        it.record.setdefault("handed_back", []).append({"from": "", "onto": best})
        return {"onto": best, "why": "no longer applies", "proposal": it.record.get("proposal")}

    def keep(self, it: Iteration, lane: Lane, v: Verdict, by: str) -> None:
        self.script.calls.append(f"keep v{it.version}")
        it.commit = f"{it.version:040d}"
        self.ctx.close(it, Status.ACCEPTED if v.kind == "accepted" else Status.KEEP, v.reason, verdict=v, by=by)

    def discard(
        self,
        it: Iteration,
        lane: Lane,
        status: Status,
        reason: str,
        *,
        verdict: Verdict | None = None,
        by: str = "engine",
    ) -> None:
        self.script.calls.append(f"discard v{it.version} {status}")
        self.ctx.close(it, status, reason, verdict=verdict, by=by)


class FakeRecovery:
    def __init__(self, script: Script, ctx: Any) -> None:
        self.script, self.ctx = script, ctx

    def recover(self, lanes: list[Lane]) -> None:
        self.script.calls.append("recover")

    def sync(self, lane: Lane) -> None:
        pass

    def at_end(self, lanes: list[Lane]) -> None:
        self.script.calls.append("at end")

    def restart(self, request: Interrupt, lanes: list[Lane]) -> None:
        self.script.calls.append(f"restart from v{request.version}")
        history.restart_from(self.ctx.ws, self.ctx.store, request.version or 0, request.why)
        self.ctx.control.restart_applied()


def engine(ws: Workspace, script: Script, *, max_iters: int | None = None, gate: FakeGate | None = None) -> Engine:
    def parts(ctx: Any) -> Parts:
        lane = Lane(0, ws.best, ws.cand, gate or FakeGate(), measurer=FakeMeasurer())  # type: ignore[arg-type]
        return Parts(
            lane,
            None,
            FakeProposing(script),
            FakePolice(script),
            FakeRounds(script),  # type: ignore[arg-type]
            FakeEvidence(script),
            FakeReview(script, ctx),
            FakeKeeper(script, ctx),  # type: ignore[arg-type]
            FakeRecovery(script, ctx),
        )  # type: ignore[arg-type]

    return Engine(ws, max_iters=max_iters, parts=parts, poll_interval_s=0.01)


def statuses(ws: Workspace) -> list[str]:
    with ws.open_store(readonly=True) as s:
        return [str(it.status) for it in s.iterations()]


def test_keep_then_discard_follow_the_phases_in_order(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep"), verdict("regression")])
    reason = engine(ws, script, max_iters=2).run()
    assert reason == "--max-iters 2 reached in this session"
    assert script.calls == [
        "recover",
        "propose v1 repair 0",
        "police v1",
        "decide v1 eval",
        "evidence v1",
        "confirm keep v1",
        "keep v1",
        "propose v2 repair 0",
        "police v2",
        "decide v2 eval",
        "evidence v2",
        "discard v2 regression",
        "at end",
    ]
    assert script.listed_ahead
    assert statuses(ws) == ["baseline", "keep", "regression"]
    with ws.open_store(readonly=True) as s:
        v2 = s.iteration(2)
        assert v2 is not None and v2.best_commit_before == f"{1:040d}" and v2.parent == 1  # v1 became BEST
        assert v2.record["timings"]["total_s"] >= v2.record["timings"]["engine_s"] >= 0
        assert s.get("state") == "stopped" and s.get("best_commit") == f"{1:040d}"


def test_a_failing_row_gets_repairs_on_the_same_hypothesis_then_gives_up(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    bad = CorrectnessFailure([{"config": "n=1", "cls": "cls=a", "reasons": ["fails 'err == 0'"]}])
    # v1: fails, repaired once, then keeps; v2: fails four times (3 repairs), gives up
    script = Script(decisions=[bad, verdict("keep"), bad, bad, bad, bad])
    engine(ws, script, max_iters=2).run()
    assert statuses(ws) == ["baseline", "keep", "fail_correctness"]
    assert script.calls.count("propose v1 repair 1") == 1 and "propose v2 repair 3" in script.calls
    assert "propose v2 repair 4" not in script.calls
    with ws.open_store(readonly=True) as s:
        v2 = s.iteration(2)
        assert (
            v2 is not None
            and v2.repair_attempts == 3
            and "after 3 repair attempt(s)" in v2.record["decision"]["reason"]
        )
        assert v2.hypothesis == "hypothesis 2"  # the repair's police check kept the plan


def test_a_failed_proposal_and_a_policed_candidate_are_never_measured(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(
        proposals=[Proposal(False, "proposer exit code 3"), Proposal(True)],
        problems=[Problem(Status.FAIL_PROTECTED, "the candidate changes protected file(s): bench.py")],
    )
    engine(ws, script, max_iters=2).run()
    assert statuses(ws) == ["baseline", "fail_propose", "fail_protected"]
    assert not any(c.startswith("decide") for c in script.calls)


def test_borderline_goes_to_review_and_the_answer_decides(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(
        decisions=[verdict("borderline"), verdict("keep"), verdict("borderline")],
        confirmed=["borderline"],
        reviews=[("accepted", "engineer"), ("rejected", "policy"), ("rejected", "engineer")],
    )
    engine(ws, script, max_iters=3).run()
    # v1 borderline accepted; v2 a keep the profiler disputes, rejected by the policy; v3 rejected
    assert statuses(ws) == ["baseline", "accepted", "rejected", "rejected"]
    with ws.open_store(readonly=True) as s:
        assert [(it.record["decision"]["by"]) for it in s.iterations()[1:]] == ["engineer", "policy", "engineer"]


def test_a_keep_reached_by_more_rounds_gets_the_evidence_any_keep_needs(tmp_path: Path) -> None:
    # the engineer asks for more rounds and they decide "keep": the profiler and the fresh
    # processes still judge it (it cannot slip past them), and what they dispute goes back
    # to the engineer
    ws = workspace(tmp_path)
    script = Script(
        decisions=[verdict("borderline")],
        confirmed=["borderline"],
        reviews=[("keep", "engine"), ("rejected", "engineer")],
    )
    engine(ws, script, max_iters=1).run()
    assert statuses(ws) == ["baseline", "rejected"]
    v1 = [c for c in script.calls if c.endswith("v1")]
    assert v1.index("review v1") < len(v1) - 1 - v1[::-1].index("evidence v1")  # evidence after the review
    assert v1.count("review v1") == 2 and "keep v1" not in v1


def test_three_regressions_stop_the_run_and_a_tie_resets_the_count(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(
        decisions=[verdict("regression"), verdict("regression"), verdict("tie")]
        + [verdict("regression")] * 3
        + [verdict("keep")]
    )
    reason = engine(ws, script).run()
    assert reason == "3 consecutive measured regressions"
    assert statuses(ws)[1:] == ["regression", "regression", "tie", "regression", "regression", "regression"]


def test_stop_sent_between_iterations_ends_the_run_before_the_next(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep")])
    eng = engine(ws, script)
    original = eng.loops[0].keeper.keep

    def keep_then_stop(*a: Any, **kw: Any) -> None:
        original(*a, **kw)
        eng.ctx.store.send_command("stop", {"why": "enough"}, source="test", seal=sealer(ws))

    eng.loops[0].keeper.keep = keep_then_stop  # type: ignore[method-assign]
    assert eng.run() == "stopped by the engineer: enough"
    assert statuses(ws) == ["baseline", "keep"]


def in_a_timed_step(eng: Engine, send: Any) -> Any:
    """A decision during which something arrives (a command, a signal): the pump runs as it
    does inside a look, and the control table decides whether the step ends."""

    def decide() -> Verdict:
        send()
        with eng.control.during(Step.TIMED):
            eng.control.pump()
        return verdict("keep")

    return decide


def test_a_stop_while_a_step_runs_ends_the_step_and_closes_the_iteration_interrupted(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script()
    eng = engine(ws, script)
    script.decisions = [verdict("keep"), in_a_timed_step(eng, lambda: eng.request_stop("stopped by signal SIGTERM"))]
    assert eng.run() == "stopped by signal SIGTERM"
    assert statuses(ws) == ["baseline", "keep", "interrupted"]
    assert eng.ctx.history.counters().consecutive_regressions == 0 and eng.ctx.history.counters().candidates == 1


def test_a_restart_mid_step_interrupts_it_then_masks_and_goes_on_from_the_restart_point(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script()
    eng = engine(ws, script, max_iters=4)

    def send() -> int:
        return eng.ctx.store.send_command(
            "restart", {"version": 1, "why": "v2 was a fluke"}, source="test", seal=sealer(ws)
        )

    script.decisions = [verdict("keep"), verdict("keep"), in_a_timed_step(eng, send), verdict("regression")]
    eng.run()
    assert "restart from v1" in script.calls
    with ws.open_store(readonly=True) as s:
        its = s.iterations()
        assert [(str(it.status), it.masked) for it in its] == [
            ("baseline", False),
            ("keep", False),
            ("keep", True),
            ("interrupted", True),
            ("regression", False),
        ]
        assert its[4].best_commit_before == f"{1:040d}"  # the loop went on from v1, v2 masked
        assert [c.status for c in s.pending_commands()] == []


def test_a_restart_that_ends_a_gate_wait_is_applied_not_taken_for_a_stop(tmp_path: Path, monkeypatch: Any) -> None:
    # found on the H200 (2026-11-29): a restart sent 0.3 s after a keep reached the next
    # iteration's gate wait, and the run stopped with "restart from v0" as its reason
    import kopt_supervisor.engine.loop as machine

    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep"), verdict("keep"), verdict("regression")])
    eng = engine(ws, script, max_iters=3)
    real_acquire, calls = machine.acquire, []

    def acquire(ctx: Any, lane: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:  # the gate of the iteration after v2's keep
            eng.ctx.store.send_command("restart", {"version": 1, "why": "again"}, source="test", seal=sealer(ws))
            with eng.control.during(Step.GATE_WAIT):
                eng.control.pump()
        return real_acquire(ctx, lane)

    monkeypatch.setattr(machine, "acquire", acquire)
    reason = eng.run()
    assert "restart" not in reason
    with ws.open_store(readonly=True) as s:
        its = s.iterations()
        assert [(str(it.status), it.masked) for it in its] == [
            ("baseline", False),
            ("keep", False),
            ("keep", True),  # masked by the restart from v1
            ("regression", False),  # the loop went on from v1
        ]
        assert its[3].best_commit_before == f"{1:040d}"
        assert [c.status for c in s.pending_commands()] == []


def test_pause_holds_the_loop_at_its_checkpoint_and_resume_lets_it_go_on(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep"), verdict("tie")])
    eng = engine(ws, script, max_iters=2)
    seen: list[str] = []
    original = eng.loops[0].keeper.keep

    def keep_then_pause(*a: Any, **kw: Any) -> None:
        original(*a, **kw)
        eng.ctx.store.send_command("pause", source="test", seal=sealer(ws))

        def resume_later() -> None:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                with Store(ws.db_path, readonly=True) as s:
                    if s.get("state") == "paused":
                        seen.append("paused")
                        break
                time.sleep(0.01)
            with Store(ws.db_path) as s:
                s.send_command("resume", source="test", seal=sealer(ws))

        threading.Thread(target=resume_later, daemon=True).start()

    eng.loops[0].keeper.keep = keep_then_pause  # type: ignore[method-assign]
    eng.run()
    assert seen == ["paused"] and statuses(ws) == ["baseline", "keep", "tie"]


def test_a_pause_inside_a_timed_step_discards_that_run_and_takes_it_again(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script()
    eng = engine(ws, script, max_iters=1)
    runs: list[int] = []

    def timed_run() -> str:
        runs.append(len(runs))
        if len(runs) == 1:  # the engineer pauses during the first run and resumes a moment later
            eng.ctx.store.send_command("pause", source="test", seal=sealer(ws))
            threading.Timer(
                0.2, lambda: Store(ws.db_path).send_command("resume", source="test", seal=sealer(ws))
            ).start()
            eng.control.pump()  # what the runner's poll does while the bench runs
            raise AssertionError("a pause inside a timed step must end it")
        return "measured"

    script.decisions = [lambda: verdict("keep") if eng.control.preemptible(timed_run) == "measured" else None]
    eng.run()
    assert runs == [0, 1] and statuses(ws) == ["baseline", "keep"]


def test_recovery_runs_first_and_an_open_review_is_resumed_before_new_work(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    with Store(ws.db_path) as s:
        s.save_iteration(
            Iteration(
                1,
                Status.BORDERLINE,
                phase=Phase.REVIEW,
                best_commit_before="b" * 40,
                started_at=time.time(),
                record={"review": {"deadline": time.time() + 60}},
            )
        )
    script = Script(reviews=[("accepted", "engineer")], decisions=[verdict("tie")])
    engine(ws, script, max_iters=1).run()
    assert script.calls[:3] == ["recover", "resume review v1", "keep v1"]
    assert statuses(ws) == ["baseline", "accepted", "tie"]


def test_no_idle_gpu_stops_the_run_with_the_reason_before_an_iteration_opens(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    reason = engine(ws, Script(), gate=FakeGate(fail=True)).run()
    assert reason == "no idle GPU: no idle GPU for 1 s"
    assert statuses(ws) == ["baseline"]  # the gate comes first: no iteration is opened without a GPU


def test_an_exhausted_proposer_stops_the_run_from_what_the_store_says(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(proposals=[Proposal(False, "search space exhausted", {"exhausted": True})])
    assert engine(ws, script).run().startswith("the proposer has nothing new to try")
    # a new engine reads the same from the store: it stops at once, with no new iteration
    assert engine(ws, Script()).run().startswith("the proposer has nothing new to try")
    assert statuses(ws) == ["baseline", "fail_propose"]


def test_the_control_table_says_which_steps_each_request_interrupts() -> None:
    from kopt_supervisor.engine.loop.control import INTERRUPTS, RESUMES

    assert set(INTERRUPTS) == set(Step)
    assert Request.PAUSE in INTERRUPTS[Step.TIMED]
    assert all(Request.PAUSE not in allowed for step, allowed in INTERRUPTS.items() if step != Step.TIMED)
    assert INTERRUPTS[Step.FORMAT] == frozenset() and INTERRUPTS[Step.IDLE] == frozenset()
    assert set(RESUMES) == set(Request)


def test_a_command_row_without_the_runs_seal_is_refused_and_logged(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep"), verdict("keep")])
    eng = engine(ws, script, max_iters=2)
    original = eng.loops[0].keeper.keep

    def keep_then_forge(*a: Any, **kw: Any) -> None:
        original(*a, **kw)
        if a[0].version != 1:
            return
        # what a process with write access to run.db would do: a stop with no seal, one with a
        # seal made with another key, and one sealed but replayed with other arguments
        eng.ctx.store.send_command("stop", {"why": "forged"}, source="cli")
        eng.ctx.store.send_command("stop", {"why": "forged"}, source="cli", seal=command_sealer(b"x" * 32))
        cid = eng.ctx.store.send_command("restart", {"version": 1}, source="cli", seal=sealer(ws))
        eng.ctx.store.db.execute("UPDATE commands SET args = ? WHERE id = ?", ('{"version": 0}', cid))

    eng.loops[0].keeper.keep = keep_then_forge  # type: ignore[method-assign]
    assert eng.run() == "--max-iters 2 reached in this session"  # neither stop nor restart was acted on
    with ws.open_store(readonly=True) as s:
        rows = s.db.execute("SELECT status, result FROM commands").fetchall()
        assert all(r[0] == "rejected" and "no valid seal" in r[1] for r in rows[:3]), [tuple(r) for r in rows]
        assert sum("refused command" in e.message for e in s.events(limit=1000)) == 3
    assert statuses(ws) == ["baseline", "keep", "keep"]


def test_a_stop_that_arrives_as_the_run_ends_is_ended_with_it(tmp_path: Path) -> None:
    # a stop sent while the last iteration closes must not stop the next session at its start
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("tie"), verdict("tie")])
    eng = engine(ws, script, max_iters=1)
    real_finish = eng.finish

    def finish_with_a_late_stop(reason: str) -> None:
        eng.ctx.store.send_command("stop", {"why": "late"}, source="test", seal=sealer(ws))
        real_finish(reason)

    eng.finish = finish_with_a_late_stop  # type: ignore[method-assign]  # the stop lands mid-finish
    eng.run()
    assert engine(ws, script, max_iters=1).run().startswith("--max-iters 1")
    assert statuses(ws) == ["baseline", "tie", "tie"]

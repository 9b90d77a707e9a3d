"""The state machine's evidence step (engine/loop/__init__.py `evaluate`) with fake parts: the
change must still apply to the current BEST before any confirmation is paid for, and what
the confirmation makes of a keep (rejected, review, keep) decides the iteration's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kopt_supervisor.engine.decide.estimate import Verdict
from kopt_supervisor.engine.loop import Engine, Parts
from kopt_supervisor.engine.loop.context import Lane
from kopt_supervisor.engine.loop.keep import StaleBest
from kopt_supervisor.engine.records import Iteration
from tests.engine.test_machine import (
    FakeEvidence,
    FakeGate,
    FakeKeeper,
    FakeMeasurer,
    FakePolice,
    FakeProposing,
    FakeRecovery,
    FakeReview,
    FakeRounds,
    Script,
    statuses,
    verdict,
    workspace,
)


class MovingBest(FakeKeeper):
    """BEST moves under the first `moves` keeps checked (another lane kept meanwhile);
    `applies`: whether the change still applies on the new BEST."""

    def __init__(self, script: Script, ctx: Any, *, moves: int, applies: bool) -> None:
        super().__init__(script, ctx)
        self.moves, self.applies = moves, applies

    def check_best(self, it: Iteration) -> None:
        self.script.calls.append(f"check best v{it.version}")
        if self.moves:
            self.moves -= 1
            raise StaleBest("f" * 40)

    def rebase(self, it: Iteration, lane: Lane, best: str) -> bool:
        self.script.calls.append(f"rebase v{it.version} onto {best[:4]}")
        return self.applies


class Confirming(FakeEvidence):
    """The confirmation turns a keep into `outcome` (a verdict kind)."""

    def __init__(self, script: Script, outcome: str) -> None:
        super().__init__(script)
        self.outcome = outcome

    def confirm_keep(self, it: Iteration, lane: Lane, v: Verdict) -> Verdict:
        if v.kind != "keep":
            return v
        self.script.calls.append(f"confirm keep v{it.version}")
        return verdict(self.outcome, f"the confirmation says {self.outcome}")


def engine(ws: Any, script: Script, *, keeper: Any = None, evidence: Any = None) -> Engine:
    def parts(ctx: Any) -> Parts:
        lane = Lane(0, ws.best, ws.cand, FakeGate(), measurer=FakeMeasurer())  # type: ignore[arg-type]
        return Parts(
            lane,
            None,
            FakeProposing(script),
            FakePolice(script),
            FakeRounds(script),  # type: ignore[arg-type]
            evidence or FakeEvidence(script),
            FakeReview(script, ctx),
            (keeper or (lambda c: FakeKeeper(script, c)))(ctx),
            FakeRecovery(script, ctx),
        )

    return Engine(ws, max_iters=1, parts=parts, poll_interval_s=0.01)


def test_a_keep_decided_against_a_moved_best_is_rebased_and_only_its_claim_confirmed_there(tmp_path: Path) -> None:
    # rebased before any confirmation is paid for, and not decided again: the keep's claim is
    # what the confirmation checks on the new BEST (Keeper.carry)
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep"), verdict("keep")])
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=1, applies=True)).run()
    v1 = [c for c in script.calls if c.endswith("v1") or " v1 " in c]
    assert v1 == [
        "propose v1 repair 0",
        "police v1",
        "decide v1 eval",
        "check best v1",
        "rebase v1 onto ffff",
        "carry v1",
        "check best v1",
        "evidence v1",
        "confirm keep v1",
        "keep v1",
    ]
    assert statuses(ws) == ["baseline", "keep"]


def test_anything_but_a_keep_whose_best_moved_is_decided_again_and_a_carried_keep_can_still_be_refuted(
    tmp_path: Path,
) -> None:
    # a borderline decided against a moved BEST claims nothing to carry: decided again there
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("borderline"), verdict("keep")], reviews=[("rejected", "policy")])
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=1, applies=True)).run()
    assert "carry v1" not in script.calls and script.calls.count("decide v1 eval") == 2
    # a carried keep whose confirmation on the new BEST says otherwise is not kept
    ws = workspace(tmp_path / "refuted")
    script = Script(decisions=[verdict("keep")])
    evidence = Confirming(script, "rejected")
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=1, applies=True), evidence=evidence).run()
    assert "carry v1" in script.calls and "keep v1" not in script.calls
    assert statuses(ws) == ["baseline", "rejected"]


def test_the_tune_proposer_s_same_point_handed_back_is_carried_any_other_proposal_decided_again(
    tmp_path: Path,
) -> None:
    from kopt_supervisor.engine.propose.proposer import Proposal

    for details, carried in (({"handed_back": True}, True), ({}, False)):
        ws = workspace(tmp_path / str(carried))
        script = Script(
            decisions=[verdict("keep"), verdict("keep")], proposals=[Proposal(True), Proposal(True, "", details)]
        )
        engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=1, applies=False)).run()  # noqa: B023
        v1 = [c for c in script.calls if c.endswith("v1") or " v1 " in c]
        assert ("carry v1" in v1) is carried, v1
        assert v1.count("decide v1 eval") == (1 if carried else 2), v1
        assert statuses(ws) == ["baseline", "keep"]


def test_a_change_that_no_longer_applies_goes_back_to_its_proposer_without_paying_for_a_confirmation(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep"), verdict("keep")])
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=1, applies=False)).run()
    v1 = [c for c in script.calls if c.endswith("v1") or " v1 " in c]
    assert v1 == [
        "propose v1 repair 0",
        "police v1",
        "decide v1 eval",
        "check best v1",
        "rebase v1 onto ffff",
        "hand back v1 onto ffff",
        "propose v1 repair 0 handed back",
        "police v1",
        "decide v1 eval",
        "check best v1",
        "evidence v1",
        "confirm keep v1",
        "keep v1",
    ]
    assert statuses(ws) == ["baseline", "keep"]


def test_a_change_handed_back_that_never_applies_ends_as_a_failed_proposal(tmp_path: Path) -> None:
    from kopt_supervisor.engine.loop import HAND_BACKS

    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep")] * (HAND_BACKS + 1))
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=HAND_BACKS + 1, applies=False)).run()
    assert "evidence v1" not in script.calls and "confirm keep v1" not in script.calls
    assert script.calls.count("propose v1 repair 0 handed back") == HAND_BACKS
    assert statuses(ws) == ["baseline", "fail_propose"]
    with ws.open_store(readonly=True) as s:
        v1 = s.iteration(1)
        assert v1 is not None and "no longer applies on the new BEST ffffffffff" in v1.record["decision"]["reason"]
        assert v1.record["stale"] is True and len(v1.record["handed_back"]) == HAND_BACKS


def test_a_regression_is_never_checked_against_best(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("regression")])
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=1, applies=True)).run()
    assert "check best v1" not in script.calls and statuses(ws) == ["baseline", "regression"]


def test_a_keep_the_os_refutes_ends_rejected_and_one_the_confirmation_disputes_goes_to_review(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    script = Script(decisions=[verdict("keep")])
    engine(ws, script, evidence=Confirming(script, "rejected")).run()
    assert (
        statuses(ws) == ["baseline", "rejected"] and "keep v1" not in script.calls and "review v1" not in script.calls
    )

    ws = workspace(tmp_path / "second")
    script = Script(decisions=[verdict("keep")], reviews=[("rejected", "policy")])
    engine(ws, script, evidence=Confirming(script, "borderline")).run()
    assert statuses(ws) == ["baseline", "rejected"] and "review v1" in script.calls


def test_a_carried_keep_goes_back_as_often_as_best_moves_and_is_kept_on_the_last(tmp_path: Path) -> None:
    # each hand-back of a keep the tune proposer puts on the new BEST costs a confirmation, not
    # a decision: HAND_BACKS does not end it (it bounds the decisions taken again)
    from kopt_supervisor.engine.loop import HAND_BACKS
    from kopt_supervisor.engine.propose.proposer import Proposal

    ws = workspace(tmp_path)
    moves = HAND_BACKS + 1
    back = [Proposal(True, "", {"handed_back": True}) for _ in range(moves)]
    script = Script(decisions=[verdict("keep")], proposals=[Proposal(True), *back])
    engine(ws, script, keeper=lambda ctx: MovingBest(script, ctx, moves=moves, applies=False)).run()
    v1 = [c for c in script.calls if c.endswith("v1") or " v1 " in c]
    assert v1.count("decide v1 eval") == 1 and v1.count("carry v1") == moves, v1
    assert statuses(ws) == ["baseline", "keep"]
    with ws.open_store(readonly=True) as s:
        v = s.iteration(1)
        assert v is not None and all(h.get("carried") for h in v.record["handed_back"]) and not v.record.get("stale")

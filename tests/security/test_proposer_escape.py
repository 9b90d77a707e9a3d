"""Issue 16, a proposer's processes that try to outlive the proposal (`setsid`, a double
fork, `nohup`): later they would write a slower kernel into best/, SIGSTOP best's bench, move
kopt/TAG and write outside cand/, each a way to a fake keep after kopt's checks.

Confined (the default) they die with the proposal: the host side sees their last tick before
kopt read the plan, no process of theirs afterwards, the candidate measured honestly (a
trivial change: a tie). Unconfined (`--no-sandbox`), what they do to best/ and the branch is
found by kopt's own checks afterwards; that they survive at all is the subject of the xfail
below.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import git
from tests.security import attacks
from tests.security.harness import NEEDS_BWRAP, TAG, tried, wait_until

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]



@pytest.mark.parametrize("how", ["setsid", "doublefork", "nohup"])
def test_confined_a_process_started_by_the_proposer_dies_with_the_proposal(hostile, how):
    h = hostile.fake([])
    bodies = (attacks.SLOW_BEST, attacks.STOP_BEST_BENCH, attacks.MOVE_BRANCH, attacks.canary_writes(h))
    h.set_script([{"name": f"linger-{how}", "exec": attacks.linger(h, *bodies, how=how, scrub_env=True)
                   + attacks.touch_kernel()}])
    before = h.baseline()
    assert h.session(1) == 0
    ticks = h.ticks("linger")
    tried(ticks, "the lingering process never ran: the attack was not tried")
    # it was alive during the proposal and never after: its last tick precedes kopt's reading
    # of the plan (the first thing after the proposer's exit)
    assert max(ticks) < h.event_time("plan", "v1:"), (max(ticks), h.event_time("plan", "v1:"))
    time.sleep(0.3)
    assert h.ticks("linger") == ticks
    # measured honestly: best was never slowed, so the trivial change is no keep
    h.assert_refused(before, 1, {"tie"})
    assert not any("best/" in m for m in h.events("tamper")), h.events("tamper")


def test_unconfined_a_write_into_best_is_found_and_undone(hostile):
    """--no-sandbox: the escaped process slows best/'s kernel; kopt's inspection of best/
    finds it before anything is timed, and the branch is where it was."""
    h = hostile.fake([])
    h.set_script([{"name": "linger-slow-best", "exec": attacks.linger(h, attacks.SLOW_BEST, seconds=1.0)
                   + "import time; time.sleep(0.3)\n" + attacks.touch_kernel()}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried(h.ticks("linger"), "the attack was not tried")
    assert wait_until(lambda: not h.survivors(), 5)  # it ends on its own (1 s); see the xfail below
    it = h.iteration(1)
    assert it.status in {"fail_protected", "fail_bench"}, (it.status, h.reason(1))
    assert "best/" in h.reason(1)
    # what it left in best/ after kopt's last look is put back by the next session's sync
    git(h.ws.best, "checkout", "--", ".")
    h.assert_refused(before, 1, {"fail_protected", "fail_bench"}, "best/", outside=False)


def test_unconfined_a_branch_moved_during_the_proposal_fails_it_and_is_put_back(hostile):
    """--no-sandbox: the proposer moves kopt/TAG (to a child commit of its own); kopt's check
    of the proposal fails it, and the run ends with the branch at BEST_COMMIT."""
    h = hostile.fake([])
    h.set_script([{"name": "move-branch", "exec": attacks.direct(h, attacks.MOVE_BRANCH) + attacks.gain(0.9)}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried((h.proof / "direct.evil").exists(), "the branch was never moved: the attack was not tried")
    assert any(f"kopt/{TAG} had moved off BEST_COMMIT" in m for m in h.events("tamper")), h.events("tamper")
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer changed best/ or the run's branch", outside=False)


def test_unconfined_a_branch_moved_after_the_proposal_is_put_back_before_the_decision(hostile):
    """--no-sandbox: an escaped process moves kopt/TAG once, just after the proposer exits
    (after kopt checked the proposal, or during the check); kopt puts it back before the
    decision or fails the proposal, and the run ends with the branch at BEST_COMMIT."""
    h = hostile.fake([])
    h.set_script([{"name": "linger-move-branch", "exec": attacks.linger(
        h, attacks.ONCE_AFTER_THE_PROPOSAL + attacks.MOVE_BRANCH + attacks.DONE, seconds=3.0)
        + attacks.touch_kernel()}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried((h.proof / "linger.done").exists(), "the branch was never moved: the attack was not tried")
    assert wait_until(lambda: not h.survivors(), 5)
    assert any(f"kopt/{TAG} had moved off BEST_COMMIT" in m for m in h.events("tamper")), h.events("tamper")
    h.assert_refused(before, 1, {"tie", "fail_protected"}, outside=False)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="unconfined (--no-sandbox), a setsid process the proposer starts keeps "
                   "running after the proposal although it carries the KOPT_WORKSPACE marker: the runner kills "
                   "only the proposer's process group, and the marker search (runner.kill_orphans) runs only in "
                   "recovery after a crash")
def test_unconfined_a_marked_setsid_process_is_ended_with_the_proposal(hostile):
    h = hostile.fake([])
    h.set_script([{"name": "linger-idle", "exec": attacks.linger(h, "pass", seconds=20) + attacks.touch_kernel()}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried(h.ticks("linger"), "the attack was not tried")
    h.assert_refused(before, 1, {"tie"}, outside=False)


def test_unconfined_a_tracked_file_of_best_edited_by_the_proposer_is_restored(hostile):
    """--no-sandbox: the proposer itself writes a slower kernel into best/ and exits; kopt
    fails the proposal and best/ is back at BEST_COMMIT, clean, when the run ends."""
    h = hostile.fake([])
    h.set_script([{"name": "slow-best", "exec": attacks.direct(h, attacks.SLOW_BEST) + attacks.touch_kernel()}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer changed best/ or the run's branch", outside=False)

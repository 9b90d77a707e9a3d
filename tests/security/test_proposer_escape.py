"""Issue 16, a proposer's processes that try to outlive the proposal (`setsid`, a double
fork, `nohup`): later they would write a slower kernel into best/, SIGSTOP best's bench, move
kopt/TAG and write outside cand/, each a way to a fake keep after kopt's checks.

Confined (the default) they die with the proposal: the host side sees their last tick before
kopt read the plan, no process of theirs afterwards, the candidate measured honestly (a
trivial change: a tie). Unconfined (`--no-sandbox`), what they do to best/ and the branch is
found by kopt's own checks afterwards, and the processes are ended with the step (found by
the step token or the run's marker in their environment).
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from kopt_supervisor.engine.store import Store
from tests.conftest import git
from tests.security import attacks
from tests.security.conftest import Factory
from tests.security.harness import NEEDS_BWRAP, TAG, tried, wait_until

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]


@pytest.mark.parametrize("how", ["setsid", "doublefork", "nohup"])
def test_confined_a_process_started_by_the_proposer_dies_with_the_proposal(hostile: Factory, how: str) -> None:
    h = hostile.fake([])
    bodies = (attacks.SLOW_BEST, attacks.STOP_BEST_BENCH, attacks.MOVE_BRANCH, attacks.canary_writes(h))
    h.set_script(
        [
            {
                "name": f"linger-{how}",
                "exec": attacks.linger(h, *bodies, how=how, scrub_env=True) + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline()
    assert h.session(1) == 0
    ticks = h.ticks("linger")
    tried(ticks, "the lingering process never ran: the attack was not tried")
    # it was alive during the proposal and never after: its last tick precedes kopt's reading
    # of the plan (the first thing after the proposer's exit)
    assert max(ticks) < h.event_time("plan", "v1:"), (max(ticks), h.event_time("plan", "v1:"))
    time.sleep(0.3)
    assert h.ticks("linger") == ticks
    # measured honestly: best was never slowed, so the trivial change is no keep: a tie, or on
    # a noisy machine a sub-1% "gain" the review policy rejects; a slowed best would have shown
    # as a gain far beyond 1% (the lingering process writes a 1.6x slower kernel)
    h.assert_refused(before, 1, {"tie", "rejected"})
    ratios = [c["ratio"] for c in (h.iteration(1).record.get("classes") or {}).values()]
    assert ratios and all(0.98 < r < 1.02 for r in ratios), ratios
    assert not any("best/" in m for m in h.events("tamper")), h.events("tamper")


def test_unconfined_a_write_into_best_by_an_escaped_process_is_found(hostile: Factory) -> None:
    """--no-sandbox: the escaped process keeps writing a slower kernel into best/ (for 1 s);
    kopt's inspection of best/ after the proposal finds it before anything is timed, and the
    branch is where it was."""
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "linger-slow-best",
                "exec": attacks.linger(h, attacks.SLOW_BEST, seconds=1.0)
                + "import time; time.sleep(0.3)\n"
                + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried(h.ticks("linger"), "the attack was not tried")
    assert wait_until(lambda: not h.survivors(), 5)  # ended with the step (or on its own: 1 s)
    it = h.iteration(1)
    assert it.status in {"fail_protected", "fail_bench"}, (it.status, h.reason(1))
    assert "best/" in h.reason(1)
    # what it left in best/ was put back by kopt with the failure (Police.restore_best)
    assert git(h.ws.best, "status", "--porcelain") == ""
    h.assert_refused(before, 1, {"fail_protected", "fail_bench"}, "best/", outside=False)


def test_unconfined_a_branch_moved_during_the_proposal_fails_it_and_is_put_back(hostile: Factory) -> None:
    """--no-sandbox: the proposer moves kopt/TAG (to a child commit of its own); kopt's check
    of the proposal fails it, and the run ends with the branch at BEST_COMMIT."""
    h = hostile.fake([])
    h.set_script([{"name": "move-branch", "exec": attacks.direct(h, attacks.MOVE_BRANCH) + attacks.gain(0.9)}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried((h.proof / "direct.evil").exists(), "the branch was never moved: the attack was not tried")
    assert any(f"kopt/{TAG} had moved off BEST_COMMIT" in m for m in h.events("tamper")), h.events("tamper")
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer changed best/ or the run's branch", outside=False)


def test_unconfined_a_branch_moved_after_the_proposal_is_put_back_before_the_decision(hostile: Factory) -> None:
    """--no-sandbox: an escaped process moves kopt/TAG once, just after the proposer exits
    (after kopt checked the proposal, or during the check); kopt puts it back before the
    decision or fails the proposal, and the run ends with the branch at BEST_COMMIT."""
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "linger-move-branch",
                "exec": attacks.linger(
                    h, attacks.ONCE_AFTER_THE_PROPOSAL + attacks.MOVE_BRANCH + attacks.DONE, seconds=3.0, unmarked=True
                )
                + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried((h.proof / "linger.done").exists(), "the branch was never moved: the attack was not tried")
    assert wait_until(lambda: not h.survivors(), 5)
    assert any(f"kopt/{TAG} had moved off BEST_COMMIT" in m for m in h.events("tamper")), h.events("tamper")
    h.assert_refused(before, 1, {"tie", "fail_protected"}, outside=False)


def test_unconfined_a_marked_setsid_process_is_ended_with_the_proposal(hostile: Factory) -> None:
    h = hostile.fake([])
    h.set_script([{"name": "linger-idle", "exec": attacks.linger(h, "pass", seconds=20) + attacks.touch_kernel()}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried(h.ticks("linger"), "the attack was not tried")
    h.assert_refused(before, 1, {"tie"}, outside=False)


def test_unconfined_a_tracked_file_of_best_edited_by_the_proposer_is_restored(hostile: Factory) -> None:
    """--no-sandbox: the proposer itself writes a slower kernel into best/ and exits; kopt
    fails the proposal and best/ is back at BEST_COMMIT, clean, when the run ends."""
    h = hostile.fake([])
    h.set_script([{"name": "slow-best", "exec": attacks.direct(h, attacks.SLOW_BEST) + attacks.touch_kernel()}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer changed best/ or the run's branch", outside=False)


AGENT_GIT = (
    "import subprocess\n_env = {**__import__('os').environ, 'GIT_AUTHOR_NAME': 'agent', 'GIT_AUTHOR_EMAIL': 'a@b', "
    "'GIT_COMMITTER_NAME': 'agent', 'GIT_COMMITTER_EMAIL': 'a@b'}\n"
    "def _git(*a):\n    return subprocess.run(['git', *a], env=_env, capture_output=True, text=True)\n"
)


def test_confined_the_proposers_own_commit_and_branch_moves_stay_in_its_sandbox(hostile: Factory) -> None:
    """Confined, git works inside: the proposer commits its (real) gain and points kopt/TAG
    and `main` at its commit with update-ref and branch -f. None of it reaches the repo: the
    branch is untouched until kopt's own keep, whose commit (by kopt, parent BEST) holds the
    change; the agent's commit exists nowhere outside."""
    h = hostile.fake([])
    record = f"open({str(h.proof / 'agent.txt')!r}, 'w').write(_git('rev-parse', 'HEAD').stdout)\n"
    h.set_script(
        [
            {
                "name": "commit and move the branch",
                "exec": attacks.gain(0.8)
                + AGENT_GIT
                + "_git('commit', '-qam', 'agent commit')\n"
                + f"_git('update-ref', 'refs/heads/kopt/{TAG}', 'HEAD')\n"
                + f"_git('branch', '-f', 'kopt/{TAG}', 'HEAD')\n_git('branch', '-f', 'main', 'HEAD')\n"
                + record,
            }
        ]
    )
    before = h.baseline()
    main_before = git(h.repo, "rev-parse", "main")
    assert h.session(1) == 0
    agent = (h.proof / "agent.txt").read_text().strip()
    tried(agent and agent != before.branch, "the agent's commit was not made inside")
    it = h.iteration(1)
    assert it.status == "keep", (it.status, h.reason(1))
    assert git(h.repo, "rev-parse", f"kopt/{TAG}") == it.commit != agent
    assert git(h.repo, "rev-parse", f"kopt/{TAG}~1") == before.branch
    assert git(h.repo, "log", "-1", "--format=%an", f"kopt/{TAG}") != "agent"
    assert git(h.repo, "rev-parse", "main") == main_before
    assert subprocess.run(["git", "cat-file", "-e", agent], cwd=h.repo).returncode != 0, (
        "the agent's commit reached the repo's object store"
    )
    h.assert_no_survivors()
    h.assert_outside_untouched()


def test_confined_the_proposer_cannot_drive_kopts_own_cli(hostile: Factory) -> None:
    """An agent with a shell knows kopt's CLI: `kopt stop`, `kopt restart --from v0`,
    `kopt memory mask`, `kopt status`. Confined, the workspace is not there: each fails and
    the run goes on as if nothing had been sent."""
    h = hostile.fake([])
    cli = (
        "import subprocess, sys, os, json\n_root = os.path.dirname(os.environ['KOPT_WORKSPACE'])\n_rc = {}\n"
        "for _args in (['stop', 'h'], ['restart', 'h', '--from', 'v0'], ['memory', 'h', 'mask', '0'], "
        "['status', 'h', '--json']):\n"
        "    _rc[' '.join(_args)] = subprocess.run([sys.executable, '-c', 'import sys; from kopt_supervisor.kopt_tui"
        ".cli import main; sys.exit(main(sys.argv[1:]))', '--root', _root, *_args], capture_output=True, "
        "text=True)\n    _rc[' '.join(_args)] = [_rc[' '.join(_args)].returncode, _rc[' '.join(_args)].stderr[-300:]]\n"
        f"json.dump(_rc, open({str(h.proof / 'cli.json')!r}, 'w'))\n"
    )
    h.set_script([{"name": "drive kopt", "exec": cli + attacks.touch_kernel()}])
    before = h.baseline()
    assert h.session(1) == 0
    rc = json.loads((h.proof / "cli.json").read_text())
    tried(len(rc) == 4, f"the CLI was not tried: {rc}")
    assert all(code != 0 for code, _ in rc.values()), f"kopt's CLI worked from inside the sandbox: {rc}"
    # it failed for the right reason: the run is not there (not a broken interpreter)
    assert all("no run 'h'" in err for _, err in rc.values()), rc
    with Store(h.ws.db_path, readonly=True) as s:
        assert s.db.execute("SELECT COUNT(*) FROM commands").fetchone()[0] == 0
    h.assert_refused(before, 1, {"tie"})

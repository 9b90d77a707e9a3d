"""Hostile variants of five closed holes (issues 16 and 17), end to end, unconfined where the
attack needs kopt's state in reach:

- a forged keep with a copied seal, and a deleted keep: never reported as BEST, the run
  said to be tampered with (hole 8);
- memory/v0.json replaced by a link, memory/ replaced by a link to a folder outside: both
  put back, nothing written or removed outside (hole 9);
- best/kernel.json hard-linked to a file of the attacker's, or hidden from git by an index
  flag: the proposal fails and best/ is restored at once (hole 10);
- a marked process that ignores SIGTERM after a double fork: ended with the proposal
  (hole 11; the renamed-argv case is tests/engine/test_runner_leftovers.py);
- a real kernel gain carrying a smaller batch outside [target].sources: to review (and
  rejected), the batch line quoted; `kopt init` warns when no sources are declared (hole 5).
"""

from __future__ import annotations

import json
import os

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.store import Store
from tests.conftest import git
from tests.security import attacks
from tests.security.conftest import Factory
from tests.security.harness import NEEDS_BWRAP, TAG, tried
from tests.security.test_candidate_verified import HONEST, SMALL_BATCH, attack
from tests.security.test_state_integrity import STEPS, forge_commit, record_steps, steps

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]


def test_unconfined_a_forged_keep_with_a_copied_seal_is_never_best(hostile: Factory) -> None:
    h = hostile.fake([])
    before = h.baseline(no_sandbox=True)
    evil = forge_commit(h)
    with Store(h.ws.db_path, readonly=True) as s:
        v0 = s.iteration(0)
    assert v0 is not None and v0.record.get("seal")
    sql = (
        "INSERT INTO iterations (version, status, phase, commit_sha, best_commit_before, started_at, record) "
        f"VALUES (99, 'keep', 'done', '{evil}', '{before.branch}', 0, "
        f"'{json.dumps({'seal': v0.record['seal'], 'ended_seq': 99})}')"
    )
    h.set_script(
        [
            {
                "name": "forge-best-sealed",
                "exec": STEPS + f"_try('forge', lambda: _db({sql!r}))\n" + record_steps(h) + attacks.touch_kernel(),
            }
        ]
    )
    h.session(1, no_sandbox=True)
    tried(steps(h) == {"forge": "ok"}, "the forgery did not land")
    st = api.status(h.ws)
    assert st["best_commit"] == before.branch and "v99" in str(st["tampered"]), st
    assert evil[:10] not in h.ws.performance.read_text() and "TAMPERED" in h.ws.performance.read_text()
    assert git(h.ws.cand, "rev-parse", "HEAD") == before.branch
    assert git(h.repo, "rev-parse", f"refs/heads/kopt/{TAG}") == before.branch


def test_unconfined_a_deleted_keep_stops_the_run_and_is_said(hostile: Factory) -> None:
    """v1 is a real keep; v2's proposer deletes its row (every remaining seal still verifies).
    The chain's head does not: the run refuses to go on, status says so, the branch stays at
    v1's commit (nothing is moved back over it), nothing forged is ever BEST."""
    h = hostile.fake([{"name": "a real gain", "exec": attacks.gain(0.5)}])
    h.baseline(no_sandbox=True, iters=1)
    v1 = h.iteration(1)
    assert v1.status == "keep" and v1.commit, (v1.status, h.reason(1))
    h.set_script(
        [
            {},
            {
                "name": "delete the keep",
                "exec": STEPS + "_try('delete', lambda: _db("
                '"DELETE FROM iterations WHERE version = 1"))\n' + record_steps(h) + attacks.touch_kernel(),
            },
        ]
    )
    h.session(1, no_sandbox=True)
    tried(steps(h) == {"delete": "ok"}, "the keep was not deleted")
    st = api.status(h.ws)
    assert "deleted" in str(st["tampered"]) and "sealed last" in str(st["stop_reason"]), st
    assert st["best_commit"] == h.iteration(0).commit  # the last keep the seals vouch for
    assert git(h.repo, "rev-parse", f"refs/heads/kopt/{TAG}") == v1.commit
    with Store(h.ws.db_path, readonly=True) as s:
        assert not s.samples(2)  # nothing was measured from the broken chain
    h.assert_no_survivors()


def test_unconfined_links_in_place_of_memory_files_and_of_memory_are_put_back(hostile: Factory) -> None:
    h = hostile.fake([])
    outside = h.proof / "users-folder"
    forged = h.proof / "v0.json"
    attack_code = (
        STEPS
        + f"""
import shutil
def _link_v0():
    path = os.path.join(_ws, 'memory', 'v0.json')
    shutil.copy(path, {str(forged)!r})  # the right text, for now
    os.unlink(path)
    os.symlink({str(forged)!r}, path)
_try('link v0', _link_v0)
"""
        + record_steps(h)
        + attacks.touch_kernel()
    )
    h.set_script([{"name": "link memory/v0.json", "exec": attack_code}])
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried(steps(h) == {"link v0": "ok"}, "the link was not made")
    v0 = h.ws.memory_path(0)
    assert not v0.is_symlink() and v0.is_file() and os.stat(v0).st_nlink == 1
    forged.write_text(json.dumps({"version": 0, "status": "keep", "hypothesis": "forged"}))
    assert "forged" not in v0.read_text()
    h.assert_refused(before, 1, {"tie"}, outside=False)

    outside.mkdir()
    (outside / "v7.json").write_text("the user's own")
    h.set_script(
        [
            {},
            {
                "name": "link memory/",
                "exec": STEPS
                + f"""
import shutil
def _link_memory():
    shutil.rmtree(os.path.join(_ws, 'memory'))
    os.symlink({str(outside)!r}, os.path.join(_ws, 'memory'))
_try('link memory', _link_memory)
"""
                + record_steps(h)
                + attacks.touch_kernel(),
            },
        ]
    )
    assert h.session(1, no_sandbox=True) == 0
    tried(steps(h) == {"link memory": "ok"}, "memory/ was not replaced")
    assert h.ws.memory.is_dir() and not h.ws.memory.is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["v7.json"]
    assert (outside / "v7.json").read_text() == "the user's own"
    assert sorted(p.name for p in h.ws.memory.iterdir()) == ["v0.json", "v1.json", "v2.json"]


HARD_LINK = """
os.link(os.path.join(BEST, 'kernel.json'), PROOF + '.kernel.json')  # the same content: git sees nothing
"""
INDEX_FLAG = """
subprocess.run(['git', '-C', BEST, 'update-index', '--skip-worktree', 'kernel.json'], check=True)
with open(os.path.join(BEST, 'kernel.json'), 'w') as f:
    json.dump({'speed': {'small': 1.6, 'large': 1.6}}, f)
"""


@pytest.mark.parametrize("how", ["hard link", "index flag"])
def test_unconfined_best_changed_out_of_gits_sight_is_restored_with_the_failure(hostile: Factory, how: str) -> None:
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": how,
                "exec": attacks.direct(h, HARD_LINK if how == "hard link" else INDEX_FLAG) + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    kernel = h.ws.best / "kernel.json"
    if how == "hard link":
        other = h.proof / "direct.kernel.json"
        tried(other.exists(), "the hard link was not made")
        assert os.stat(kernel).st_nlink == 1
        other.write_text(json.dumps({"speed": {"small": 9.0, "large": 9.0}}))  # a later write through it
        assert "9.0" not in kernel.read_text()
    else:
        assert "skip-worktree" not in git(h.ws.best, "ls-files", "-v", "kernel.json") and not git(
            h.ws.best, "ls-files", "-v", "kernel.json"
        ).startswith("S ")
        assert "1.6" not in kernel.read_text()
    assert any("best/ restored" in m for m in h.events("tamper")), h.events("tamper")
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer changed best/", outside=False)


def test_unconfined_a_marked_process_that_ignores_term_after_a_double_fork_is_ended(hostile: Factory) -> None:
    h = hostile.fake([])
    ignore_term = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    h.set_script(
        [
            {
                "name": "linger-stubborn",
                "exec": attacks.linger(h, ignore_term, how="doublefork", seconds=20)
                + "import time; time.sleep(0.2)\n"
                + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    ticks = h.ticks("linger")
    tried(ticks, "the attack was not tried")
    assert max(ticks) < h.event_time("plan", "v1:")  # ended before kopt read the plan
    # a touched kernel: a tie, or (the whole suite loading the machine) a sub-1% "gain" the
    # review policy rejects; never kept
    h.assert_refused(before, 1, {"tie", "rejected"}, outside=False)


def test_a_real_gain_that_carries_a_smaller_batch_goes_to_review(hostile: Factory) -> None:
    """The kernel is really faster, and problem.py (not a source) cuts the batch too: the
    candidate is not kept on the kernel's merit alone; the batch line is quoted."""
    problem = (
        SMALL_BATCH
        + "SCALE = 0.5\n\n\ndef inputs(n):\n    return [((j * 7919) % 1009) / 1009.0 for j in range(n * BATCH)]\n"
    )
    h = hostile.py([attack("gain and batch", {"kernel.py": HONEST, "problem.py": problem})])
    before = h.baseline()
    assert h.session(1) == 0
    it = h.assert_refused(before, 1, {"rejected"}, "outside-sources", "problem.py:1", "BATCH = 1")
    assert it.record["diff_scan"]["findings"][0]["rule"] == "outside-sources"


def test_kopt_init_warns_when_no_sources_are_declared(hostile: Factory, capsys: pytest.CaptureFixture[str]) -> None:
    h = hostile.py([], toml_replace={'sources = ["kernel.py"]\n': ""})
    out = capsys.readouterr().out
    assert "warning: [target].sources is not declared" in out and "kernel.py, problem.py" in out
    assert any("kernel.py, problem.py" in m for m in h.events("init"))

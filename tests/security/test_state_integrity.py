"""Issue 16, kopt's own state: run.db, the frozen kopt.toml, the projections (memory/,
performance.md) and the run's secret, attacked by a proposer through $KOPT_WORKSPACE.

Confined, the workspace is not there: every read and write fails (the attack records each
refusal in its proof folder, the host side checks the files byte for byte). Unconfined
(`--no-sandbox`), the writes land; kopt must find them afterwards: command rows without the
run's seal are refused, a forged or edited keep breaks the sealed chain, an edited config is
put back and never adopted (also by the next session), projections are rewritten from the
store.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.store import Store
from tests.conftest import git
from tests.security import attacks
from tests.security.conftest import Factory
from tests.security.harness import NEEDS_BWRAP, TAG, Hostile, tried

pytestmark = [NEEDS_BWRAP, pytest.mark.slow]

UNCHANGED = {"tie", "rejected"}
"""What the attack's own change (a note in kernel.json, no speed: attacks.touch_kernel) ends
as: a tie, or a sub-1% difference the statistics call a real but too small gain, which goes to
review and is rejected unanswered (seen once at -0.1% under the suite's load). Never a keep."""

# each step of the attack records "ok" or the error it met in proof/steps.json
STEPS = """
import json, os, sqlite3, time
_ws = os.environ['KOPT_WORKSPACE']
_steps = {}


def _try(name, fn):
    try:
        fn()
        _steps[name] = 'ok'
    except Exception as e:
        _steps[name] = f'{type(e).__name__}: {e}'


def _db(sql, *args):
    con = sqlite3.connect(os.path.join(_ws, 'run.db'), timeout=5)
    try:
        con.execute(sql, args)
        con.commit()
    finally:
        con.close()


def _append(name, text):
    with open(os.path.join(_ws, name), 'a') as f:
        f.write(text)


def _edit_json(name, **changes):
    path = os.path.join(_ws, name)
    rec = json.load(open(path))
    rec.update(changes)
    with open(path, 'w') as f:
        json.dump(rec, f)
"""


def record_steps(h: Hostile) -> str:
    return f"\nwith open({str(h.proof / 'steps.json')!r}, 'w') as _f:\n    json.dump(_steps, _f)\n"


def steps(h: Hostile) -> dict[str, str]:
    return json.loads((h.proof / "steps.json").read_text())


LOOSER = 'correct = "err >= 0"'
"""A correctness rule that passes every row (the fake target's rule is "err == 0")."""

FORGERIES = """
_try('read secret', lambda: open(os.path.join(_ws, '.secret'), 'rb').read())
_try('insert accept', lambda: _db("INSERT INTO commands (t, kind, args, source) VALUES (?, 'accept', ?, 'cli')",
                                  time.time(), json.dumps({'version': ITERATION})))
_try('update baseline', lambda: _db("UPDATE iterations SET hypothesis = 'forged' WHERE version = 0"))
_try('edit frozen config in run.db', lambda: _db("UPDATE meta SET value = ? WHERE key = 'frozen_config'",
                                                 json.dumps('[target]\\nbench = \\"true\\"\\n')))
_try('edit kopt.toml', lambda: _append('kopt.toml', '\\n# looser\\n'))
_try('edit memory', lambda: _edit_json('memory/v0.json', status='keep', hypothesis='forged'))
_try('edit performance.md', lambda: _append('performance.md', '\\n| v9 | keep | forged -50% |\\n'))
_try('plant in memory/', lambda: open(os.path.join(_ws, 'memory', 'v99.json'), 'w').write('{}'))
_try('list workspace', lambda: os.listdir(_ws) and (_ for _ in ()).throw(
    RuntimeError(f"sees {sorted(os.listdir(_ws))}")))
"""


def test_confined_the_workspace_is_out_of_reach(hostile: Factory) -> None:
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "forge-state",
                "exec": STEPS + attacks.canary_writes(h) + FORGERIES + record_steps(h) + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline()
    files = {p: p.read_bytes() for p in (h.ws.db_path, h.ws.performance, h.ws.memory_path(0), h.ws.dir / ".secret")}
    assert h.session(1) == 0
    got = steps(h)
    assert set(got) == {
        "read secret",
        "insert accept",
        "update baseline",
        "edit frozen config in run.db",
        "edit kopt.toml",
        "edit memory",
        "edit performance.md",
        "plant in memory/",
        "list workspace",
    }
    refused = {name: why for name, why in got.items() if why != "ok"}
    assert refused == got, f"the sandbox let these through: {[n for n, w in got.items() if w == 'ok']}"
    # what it sees of the workspace: its own tree, its plan and its output folder, nothing else
    assert got["list workspace"] == "RuntimeError: sees ['cand', 'logs', 'plans']", got["list workspace"]
    assert files[h.ws.dir / ".secret"] == (h.ws.dir / ".secret").read_bytes()
    assert not (h.ws.memory / "v99.json").exists()
    with Store(h.ws.db_path, readonly=True) as s:
        assert s.db.execute("SELECT COUNT(*) FROM commands").fetchone()[0] == 0
    h.assert_refused(before, 1, UNCHANGED)


def test_unconfined_a_command_row_without_the_seal_does_not_accept_the_review(hostile: Factory) -> None:
    """--no-sandbox: while v1 (a suspicious 10x "gain") awaits review, an escaped process
    inserts `accept v1` into run.db's commands; it is refused (no seal) and the review policy
    rejects v1. Control: the same candidate accepted by the user's `kopt accept` is kept."""
    h = hostile.fake([], toml_replace={"review_timeout_s = 0.3": "review_timeout_s = 3"})
    wait_review = """
_db = os.path.join(WS, 'run.db')
if os.path.exists(PROOF + '.done'):
    raise StopIteration
con = sqlite3.connect(_db, timeout=5)
try:
    state = con.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()
    if not state or json.loads(state[0]) != 'awaiting_review':
        raise StopIteration
    con.execute("INSERT INTO commands (t, kind, args, source) VALUES (?, 'accept', ?, 'cli')",
                (time.time(), json.dumps({'version': 1})))
    con.commit()
finally:
    con.close()
"""
    h.set_script(
        [
            {
                "name": "accept-myself",
                "exec": attacks.linger(h, "import sqlite3\n" + wait_review + attacks.DONE, seconds=20, unmarked=True)
                + attacks.gain(0.1),
            },
            {"name": "the same, accepted by the user", "exec": attacks.gain(0.1)},
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried((h.proof / "linger.done").exists(), "the forged accept was never inserted: the attack was not tried")
    h.kill_survivors()  # unconfined and unmarked, it outlives the proposal (what --no-sandbox gives up)
    with Store(h.ws.db_path, readonly=True) as s:
        rows = [tuple(r) for r in s.db.execute("SELECT kind, status, result FROM commands")]
    assert rows and all(
        kind == "accept" and status == "rejected" and "no valid seal" in result for kind, status, result in rows
    ), rows
    assert any("refused command" in m for m in h.events()), h.events()
    it = h.assert_refused(before, 1, {"rejected"}, "x faster, more than the suspicious_speedup", outside=False)
    assert it.record["decision"]["by"] == "policy"

    # the control: the user's own `kopt accept` (sealed) is acted on for the same candidate
    def accept_when_asked() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if api.status(h.ws)["pending_reviews"]:
                api.send(h.ws, "accept", {"version": 2})
                return
            time.sleep(0.05)

    t = threading.Thread(target=accept_when_asked)
    t.start()
    assert h.session(1, no_sandbox=True) == 0
    t.join()
    assert h.iteration(2).status == "accepted", h.reason(2)


def forge_commit(h: Hostile) -> str:
    """A commit of the attacker's in the target repo: BEST's tree with a 10x faster kernel."""
    k = json.loads((h.ws.best / "kernel.json").read_text())
    k["speed"] = {c: v * 0.1 for c, v in k["speed"].items()}
    tmp = h.tmp / "forge"
    git(h.repo, "worktree", "add", "-q", "--detach", str(tmp), f"kopt/{TAG}")
    (tmp / "kernel.json").write_text(json.dumps(k))
    git(tmp, "commit", "-qam", "evil")
    sha = git(tmp, "rev-parse", "HEAD")
    git(h.repo, "worktree", "remove", "--force", str(tmp))
    return sha


def forge_best(hostile: Factory, how: str) -> tuple[Hostile, str, str]:
    """A run whose v1 proposer made an attacker's commit BEST in run.db (unconfined)."""
    h = hostile.fake([])
    before = h.baseline(no_sandbox=True)
    evil = forge_commit(h)
    if how == "insert a keep":
        sql = (
            "INSERT INTO iterations (version, status, phase, commit_sha, best_commit_before, started_at, record) "
            f"VALUES (99, 'keep', 'done', '{evil}', '{before.branch}', 0, '{{}}')"
        )
    else:
        sql = f"UPDATE iterations SET commit_sha = '{evil}' WHERE version = 0"
    h.set_script(
        [
            {
                "name": "forge-best",
                "exec": STEPS + f"_try('forge', lambda: _db({sql!r}))\n" + record_steps(h) + attacks.touch_kernel(),
            }
        ]
    )
    h.session(1, no_sandbox=True)
    tried(steps(h) == {"forge": "ok"}, "the forgery did not land: the attack was not tried")
    return h, before.branch, evil


HOWS = ["update the baseline's commit", "insert a keep"]


@pytest.mark.parametrize("how", HOWS)
def test_unconfined_a_forged_keep_in_run_db_stops_the_run_is_never_measured_from_nor_reported_as_best(
    hostile: Factory, how: str
) -> None:
    """--no-sandbox: the proposer makes an attacker's commit BEST in run.db, by an UPDATE of
    the baseline's commit or an INSERT of a kept iteration. The sealed chain of keeps breaks:
    kopt status, performance.md and cand/ never name the attacker's commit as BEST; the run
    refuses to go on from it (this session and the next), the branch and best/ stay at
    BEST_COMMIT, nothing is measured against the forged BEST. (Two tests of the same forged
    run until 2026-11-30.)"""
    h, best, evil = forge_best(hostile, how)
    assert api.status(h.ws)["best_commit"] == best, "kopt status reports the attacker's commit as BEST_COMMIT"
    assert evil[:10] not in h.ws.performance.read_text(), "performance.md reports the attacker's commit"
    assert git(h.ws.cand, "rev-parse", "HEAD") == best, "cand/ was reset to the attacker's commit"
    assert git(h.repo, "rev-parse", f"refs/heads/kopt/{TAG}") == best
    assert git(h.ws.best, "rev-parse", "HEAD") == best
    st = api.status(h.ws)
    assert "did not seal" in str(st["stop_reason"]), st["stop_reason"]
    assert h.iteration(1).status == "interrupted" and "did not seal" in h.reason(1)
    h.session(1, no_sandbox=True)  # the next session refuses too
    assert "did not seal" in str(api.status(h.ws)["stop_reason"])
    with Store(h.ws.db_path, readonly=True) as s:
        assert [it.version for it in s.iterations()] == sorted({0, 1} | ({99} if how == "insert a keep" else set()))
        assert not s.samples(2)
    assert git(h.repo, "rev-parse", f"refs/heads/kopt/{TAG}") == best
    h.assert_no_survivors()


def test_unconfined_edited_projections_do_not_survive_the_iteration(hostile: Factory) -> None:
    """--no-sandbox: the proposer rewrites memory/v0.json and performance.md to claim a keep;
    both are rewritten from the store by the end of the iteration."""
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "forge-projections",
                "exec": STEPS
                + """
_try('edit memory', lambda: _edit_json('memory/v0.json', status='keep', hypothesis='forged keep'))
_try('edit performance.md', lambda: _append('performance.md', '\\n| v9 | keep | forged keep -50% |\\n'))
"""
                + record_steps(h)
                + attacks.touch_kernel(),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    assert steps(h) == {"edit memory": "ok", "edit performance.md": "ok"}
    assert "forged keep" not in h.ws.performance.read_text()
    assert "forged keep" not in h.ws.memory_path(0).read_text(), "memory/v0.json still holds the forged keep"
    h.assert_refused(before, 1, UNCHANGED, outside=False)


def test_unconfined_an_edited_config_fails_the_proposal_and_is_put_back(hostile: Factory) -> None:
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "loosen-config",
                "exec": STEPS
                + f"""
_try('loosen', lambda: open(os.path.join(_ws, 'kopt.toml'), 'w').write(
    open(os.path.join(_ws, 'kopt.toml')).read().replace('correct = "err == 0"', {LOOSER!r})))
"""
                + record_steps(h)
                + attacks.gain(0.5, wrong=True),
            }
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    assert steps(h) == {"loosen": "ok"}
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer edited the run's frozen config", outside=False)


def test_unconfined_a_config_edited_after_the_check_is_never_trusted_by_the_next_session(hostile: Factory) -> None:
    """--no-sandbox: an escaped process loosens kopt.toml's correctness rule after kopt's
    check of the proposal (so this session ends with the file edited); the next session must
    put it back and judge a wrong candidate by the frozen rule."""
    h = hostile.fake([])
    loosen = f"""
_path = os.path.join(WS, 'kopt.toml')
_text = open(_path).read()
if {LOOSER!r} not in _text:
    time.sleep(0.3)
    with open(_path, 'w') as f:
        f.write(_text.replace('correct = "err == 0"', {LOOSER!r}).replace('[decide]', '[decide]\\nsuspicious_speedup = 100'))
"""
    h.set_script(
        [
            {
                "name": "loosen-later",
                "exec": attacks.linger(
                    h, attacks.ONCE_AFTER_THE_PROPOSAL + loosen + attacks.DONE, seconds=6, unmarked=True
                )
                + attacks.touch_kernel(),
            },
            {"name": "a wrong kernel, 2x faster", "exec": attacks.gain(0.5, wrong=True)},
        ]
    )
    before = h.baseline(no_sandbox=True)
    assert h.session(1, no_sandbox=True) == 0
    tried((h.proof / "linger.done").exists(), "the config was never edited: the attack was not tried")
    h.kill_survivors()
    assert h.session(1, no_sandbox=True) == 0
    assert any("kopt.toml was edited behind kopt's back" in m for m in h.events("tamper")), h.events("tamper")
    it = h.iteration(2)
    assert it.status == "fail_correctness", (it.status, h.reason(2))
    assert "err == 0" in h.reason(2)
    h.assert_refused(before, 2, {"fail_correctness"}, outside=False)


def test_unconfined_an_edited_frozen_config_in_run_db_refuses_the_next_start(hostile: Factory) -> None:
    """--no-sandbox: the proposer rewrites run.db's copy of the frozen config (and the file)
    with a loosened rule; its seal does not match, so the next session refuses to start from
    it, and no candidate is judged by it."""
    h = hostile.fake([])
    h.set_script(
        [
            {
                "name": "loosen-the-copy",
                "exec": STEPS
                + f"""
def _loosen():
    con = sqlite3.connect(os.path.join(_ws, 'run.db'), timeout=5)
    text = json.loads(con.execute("SELECT value FROM meta WHERE key = 'frozen_config'").fetchone()[0])
    text = text.replace('correct = "err == 0"', {LOOSER!r})
    con.execute("UPDATE meta SET value = ? WHERE key = 'frozen_config'", (json.dumps(text),))
    con.commit()
    con.close()
    open(os.path.join(_ws, 'kopt.toml'), 'w').write(text)
_try('loosen', _loosen)
"""
                + record_steps(h)
                + attacks.touch_kernel(),
            },
            {"name": "a wrong kernel, 2x faster", "exec": attacks.gain(0.5, wrong=True)},
        ]
    )
    h.baseline(no_sandbox=True)
    h.session(1, no_sandbox=True)
    assert steps(h) == {"loosen": "ok"}
    assert h.session(1, no_sandbox=True) != 0 or "seal" in str(api.status(h.ws)["stop_reason"])
    st = api.status(h.ws)
    assert "seal" in str(st["last_error"]) + str(st["stop_reason"]), st
    with Store(h.ws.db_path, readonly=True) as s:
        assert s.iteration(2) is None, "a candidate was judged by the forged config"

"""Environment faults: stale git locks, worktrees deleted by hand, disk full while writing,
the GPU vanishing mid-round, two engines on one workspace, many readers while the engine
writes, a wall-clock jump. For each: what kopt did, and what was preserved."""

from __future__ import annotations

import errno
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from kopt_supervisor.engine import api, workspace
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.gpu.backends import FakeBackend
from kopt_supervisor.engine.store import Store
from tests.conftest import REPO_ROOT, git
from tests.reliability.helpers import FAST, check_invariants, events, init, iterations, statuses


def gitdir(worktree) -> str:
    return git(worktree, "rev-parse", "--absolute-git-dir")


def test_stale_git_locks_are_removed_and_the_keep_commits(fake_env):
    repo, root = fake_env(["gain5"], toml_replace=FAST)
    ws = init(repo, root)
    common = git(repo, "rev-parse", "--absolute-git-dir")
    locks = [
        f"{gitdir(ws.best)}/index.lock",
        f"{gitdir(ws.cand)}/index.lock",
        f"{gitdir(ws.cand)}/HEAD.lock",
        f"{common}/refs/heads/kopt/t.lock",
    ]
    for lock in locks:  # what a git killed mid-write leaves behind
        open(lock, "w").close()
    assert run_engine(ws, max_iters=1) == 0
    assert statuses(ws) == ["baseline", "keep"]
    assert any("removed stale git lock" in m and "t.lock" in m for m in events(ws, "recover"))
    check_invariants(ws, repo)


@pytest.mark.parametrize("confined", [True, False], ids=["sandbox", "no-sandbox"])
def test_worktrees_deleted_by_hand_are_recreated(fake_env, confined):
    repo, root = fake_env(
        [
            "gain5",
            "do:import shutil; shutil.rmtree('../best'); speed['small'] *= 0.9; json.dump(k, open('kernel.json', 'w'))",
            "gain5",
        ],
        toml_replace=FAST,
    )
    ws = init(repo, root)
    assert run_engine(ws, max_iters=1, no_sandbox=not confined) == 0
    shutil.rmtree(ws.best)  # by hand, between two engine runs
    shutil.rmtree(ws.cand)
    assert run_engine(ws, max_iters=2, no_sandbox=not confined) == 0  # and v2's proposal deletes best/
    its = iterations(ws)
    recreated = [m for m in events(ws, "recover") if "re-created the missing worktree" in m]
    if confined:  # the proposer cannot see best/: its rmtree fails, the proposal with it
        assert [it.status for it in its] == ["baseline", "keep", "fail_propose", "keep"]
        assert "proposer exit code 1" in its[2].record["decision"]["reason"]
        assert len(recreated) == 2  # best/ and cand/ after the hand
    else:
        assert [it.status for it in its] == ["baseline", "keep", "fail_protected", "keep"]
        assert "best/ is no longer a usable git worktree" in its[2].record["decision"]["reason"]
        assert len(recreated) == 3  # best/ and cand/ after the hand, best/ after v2
    check_invariants(ws, repo)


def test_disk_full_at_the_projections_never_stops_the_run(fake_env, monkeypatch):
    """A double: every projection write (memory/, README, performance.md, the prompt) fails
    with ENOSPC while the disk is "full"; run.db (SQLite) still has room."""
    repo, root = fake_env(["gain5", "gain5"], toml_replace=FAST)
    ws = init(repo, root)
    real = workspace.write_atomic
    full = {"on": True}

    def write_atomic(path, text, mode=0o600):
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text, mode)

    monkeypatch.setattr(workspace, "write_atomic", write_atomic)
    monkeypatch.setattr("kopt_supervisor.engine.loop.proposal.write_atomic", write_atomic)
    assert run_engine(ws, max_iters=1) == 0
    its = iterations(ws)
    assert [it.status for it in its] == ["baseline", "fail_propose"]
    assert "cannot write the prompt" in its[1].record["decision"]["reason"]
    assert any("No space left on device" in m for m in events(ws, "disk"))
    assert not ws.memory_path(1).exists()  # nothing half-written
    full["on"] = False  # space again: the next start brings every projection up to date
    assert run_engine(ws, max_iters=1) == 0
    assert statuses(ws) == ["baseline", "fail_propose", "keep"]
    check_invariants(ws, repo)
    assert "| keep |" in ws.performance.read_text()


def test_run_db_full_crashes_cleanly_and_resumes(fake_env, monkeypatch):
    """SQLite's own disk-full path (SQLITE_FULL), made real by capping run.db's page count
    on every connection once v1 is under way; then the space comes back."""
    repo, root = fake_env(["gain5", "gain5"], toml_replace=FAST)
    ws = init(repo, root)
    real_init = Store.__init__
    cap = {"pages": None}

    def capped(self, *a, **kw):
        real_init(self, *a, **kw)
        if cap["pages"]:
            self.db.execute(f"PRAGMA max_page_count = {cap['pages']}")

    monkeypatch.setattr(Store, "__init__", capped)
    real_save = Store.save_iteration

    def save(self, it):
        if it.version == 1 and cap["pages"] is None and it.phase == "measure":
            cap["pages"] = self.db.execute("PRAGMA page_count").fetchone()[0]
            self.db.execute(f"PRAGMA max_page_count = {cap['pages']}")
            self.db.execute("CREATE TABLE IF NOT EXISTS filler (x)")  # ... and the free pages are gone
        return real_save(self, it)

    monkeypatch.setattr(Store, "save_iteration", save)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        run_engine(ws, max_iters=1)
    monkeypatch.setattr(Store, "__init__", real_init)
    monkeypatch.setattr(Store, "save_iteration", real_save)
    assert api.status(ws)["state"] == "crashed"
    assert run_engine(ws, max_iters=1) == 0
    its = iterations(ws)
    assert [it.status for it in its] == ["baseline", "interrupted", "keep"]
    check_invariants(ws, repo)


GPU = [
    {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-fake-0",
        "util_pct": 0,
        "mem_used_mib": 10,
        "mem_total_mib": 81559,
        "processes": [],
    }
]
GATE = ('vendor = "none"', 'vendor = "auto"\nsamples = 1\nsample_interval_s = 0\nwait_s = 0.1\nwait_max_s = 0.5')


class VanishingGpu(FakeBackend):
    """The scripted fake GPU, gone while `flag` exists (the candidate's bench creates it: the
    GPU vanishes in the middle of a timed round). `blip`: back after one read without it."""

    def __init__(self, path, flag, blip: bool) -> None:
        super().__init__(path)
        self.flag, self.blip = flag, blip

    def read(self):
        if self.flag.exists():
            if self.blip:
                self.flag.unlink()
            return []
        return super().read()


@pytest.mark.parametrize("blip", [True, False], ids=["blip", "gone"])
def test_gpu_vanishing_mid_round(fake_env, tmp_path, monkeypatch, blip):
    (tmp_path / "flag").mkdir()  # the candidate's bench creates the flag there: writable to it
    flag = tmp_path / "flag" / "GPU_GONE"
    repo, root = fake_env(
        [
            f"do:k['touch'] = {str(flag)!r}; " + "speed['small'] *= 0.95; speed['large'] *= 0.95; "
            "json.dump(k, open('kernel.json', 'w'))"
        ],
        toml_replace={
            **FAST,
            GATE[0]: GATE[1],
            "timeout_s = 20\n\n[decide]": f'timeout_s = 20\nwritable = ["{tmp_path / "flag"}"]\n\n[decide]',
        },
    )
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps([GPU]))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setattr(
        "kopt_supervisor.engine.gpu.backends.open_backend", lambda vendor: VanishingGpu(fake, flag, blip)
    )
    ws = init(repo, root)
    assert run_engine(ws, max_iters=1) == 0
    its = iterations(ws)
    v1 = its[1]
    flagged = v1.record["gpu"].get("flagged_rounds", [])
    assert flagged == [{"round": 0, "flags": ["gpu_vanished"]}]  # the round timed while it vanished
    if blip:  # back at the next read: the candidate is judged on the undisturbed rounds
        assert v1.status == "keep" and v1.record["classes"]["cls=small"]["disturbed"] >= 1
    else:  # gone for good: the run stops with the reason, the iteration is interrupted
        st = api.status(ws)
        assert st["state"] == "stopped" and st["stop_reason"].startswith("no idle GPU: no idle GPU for")
        assert "no GPU visible" in st["stop_reason"] and v1.status == "interrupted"
        assert st["best_commit"] == its[0].commit
    check_invariants(ws, repo)


@pytest.mark.slow
def test_two_engines_on_one_workspace_one_runs(fake_env, monkeypatch):
    repo, root = fake_env(["gain5"] * 20, toml_replace=FAST)
    ws = init(repo, root)
    monkeypatch.setenv("FAKE_SLEEP", "0.3")
    argv = [sys.executable, "-m", "kopt_supervisor.engine.daemon", "--root", str(root), "t", "--max-iters", "2"]
    procs = [
        subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = outs[[p.returncode for p in procs].index(2)]
    assert "another engine (pid" in loser and "already runs 't'" in loser
    assert statuses(ws) == ["baseline", "keep", "keep"]
    check_invariants(ws, repo)


@pytest.mark.slow
def test_many_readers_while_the_engine_writes(fake_env):
    repo, root = fake_env(["gain5", "loss5", "gain5"], toml_replace=FAST)
    ws = init(repo, root)
    stop = threading.Event()
    errors: list[str] = []
    seen: list[int] = []

    def reader() -> None:
        last = -1
        while not stop.is_set():
            try:
                st = api.status(ws)
                with api.RunReader(ws) as r:
                    its = r.iterations()
                    r.events(limit=50)
                    r.data_version()
                v = st["iteration"] or 0
                assert v >= last, "the history went backwards"
                assert [it.version for it in its] == list(range(len(its)))
                last = v
                seen.append(v)
            except Exception as e:  # noqa: BLE001 - collected and reported below
                errors.append(f"{type(e).__name__}: {e}")
            # a read costs ~5 ms of this process's CPU: four readers every 10 ms held most of
            # the GIL and stretched the run they read (29 CPU-s); every 50 ms, hundreds of
            # reads still land on every write of the run
            time.sleep(0.05)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    cli = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                (
                    "import sys, json\nfrom kopt_supervisor.kopt_tui.cli import main\n"
                    f"for _ in range(15):\n    assert main(['--root', {str(root)!r}, 'status', 't', '--json']) == 0\n"
                ),
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    try:
        assert run_engine(ws, max_iters=3) == 0
    finally:
        stop.set()
        for t in threads:
            t.join()
    for p in cli:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    assert not errors, errors[:3]
    assert len(seen) > 100 and max(seen) == 3
    assert statuses(ws) == ["baseline", "keep", "regression", "keep"]
    check_invariants(ws, repo)


class Clock:
    """time.time() with a jump switched on from another thread (the engine's wall clock)."""

    def __init__(self, monkeypatch) -> None:
        self.offset = 0.0
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + self.offset)


def _during_review(ws, root, clock: Clock, jump_s: float, answer_after_s: float | None) -> threading.Thread:
    def act() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end and not api.status(ws)["pending_reviews"]:
            time.sleep(0.05)
        v = api.status(ws)["pending_reviews"][0]
        clock.offset = jump_s
        waited = time.monotonic()
        while time.monotonic() - waited < (answer_after_s or 20) and api.status(ws)["pending_reviews"]:
            time.sleep(0.05)
        if api.status(ws)["pending_reviews"]:  # answer (or, with the old wall-clock wait, unblock)
            from kopt_supervisor.kopt_tui.cli import main as kopt

            kopt(["--root", str(root), "accept" if answer_after_s else "reject", "t", f"v{v}", "--why", "by hand"])

    t = threading.Thread(target=act)
    t.start()
    return t


def test_a_clock_jump_neither_ends_nor_stretches_a_review(fake_env, monkeypatch):
    repo, root = fake_env(
        ["knob:fast=10", "knob:fast=100"], toml_replace={**FAST, "review_timeout_s = 2": "review_timeout_s = 3"}
    )
    ws = init(repo, root)
    clock = Clock(monkeypatch)
    # forward by a day while v1 awaits review: the engineer's answer 1.5 s later still counts
    t = _during_review(ws, root, clock, 86400, 1.5)
    assert run_engine(ws, max_iters=1) == 0
    t.join()
    v1 = iterations(ws)[1]
    assert v1.status == "accepted" and v1.record["decision"]["by"] == "engineer", v1.record["decision"]
    # back by a day while v2 awaits review: it still ends after review_timeout_s, by the policy
    clock.offset = 0.0
    t0 = time.monotonic()
    t = _during_review(ws, root, clock, -86400, None)
    assert run_engine(ws, max_iters=1) == 0
    t.join()
    v2 = iterations(ws)[2]
    assert v2.status == "rejected" and v2.record["decision"]["by"] == "policy", v2.record["decision"]
    assert time.monotonic() - t0 < 15
    clock.offset = 0.0
    check_invariants(ws, repo)

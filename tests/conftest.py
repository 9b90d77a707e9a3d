"""Shared fixtures: a fake CPU target repo (tests/fake_target) and its scripted proposer."""

from __future__ import annotations

import atexit
import gc
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kopt_supervisor.engine.loop import control
from tests.clock import DrivenClock

# No GPU in the test suite: Triton runs in its interpreter, which must be chosen before
# triton.language is first imported, and any test module (tests/examples, tests/security, ...)
# may import it while the suite is collected. The few tests that compile for a real GPU do so
# in subprocesses with the variable removed.
if "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# One OpenMP thread in every torch process the tests start (and in the workers): the suite's
# workers share 2 cores, where torch's second thread spins waiting for a core (the softmax
# example and the demo's tests: 95 CPU-s with it, 85 without; docs/testing.md). A kopt.toml's
# [target].env still sets its own (the CPU demo's does).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# `python3` as the venv's: the tests' stand-in tools (tests/fake_target/bin/ncu, ...) start with
# `#!/usr/bin/env python3`, which on a machine with pyenv's shims first on PATH cost ~50 ms of
# bash a launch (~180 launches) and ran them on another interpreter than the suite's.
_venv_bin = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _venv_bin:
    os.environ["PATH"] = _venv_bin + os.pathsep + os.environ.get("PATH", "")

# Bytecode written, as on a fresh login: a machine whose environment sets
# PYTHONDONTWRITEBYTECODE (this project's does) made every xdist worker compile the whole
# suite and kopt again (collection 11.6 CPU-s a worker against 5.8 s), and every Python process
# the tests start (kopt's CLI, the engine daemon, the MCP server, the TUI) compile kopt's
# modules. Set here, before the workers start: they and every process inherit it. The benches
# are untouched: kopt's sandbox sends their bytecode to a per-tree cache either way.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# The library bytecode kopt compiles for its sandboxed runs (engine/sandbox/bytecode.py): one
# folder for this session, shared by every xdist worker (set before they start; they inherit
# it), never the user's ~/.cache. Removed when the process that made it ends.
if "KOPT_BYTECODE_CACHE" not in os.environ:
    os.environ["KOPT_BYTECODE_CACHE"] = tempfile.mkdtemp(prefix="kopt-test-bytecode-")
    atexit.register(shutil.rmtree, os.environ["KOPT_BYTECODE_CACHE"], True)


def pytest_configure(config: pytest.Config) -> None:
    """KOPT_TEST_CPU=path: each test's wall and CPU appended to path (tests/cpu_probe.py)."""
    if os.environ.get("KOPT_TEST_CPU"):
        from tests import cpu_probe

        cpu_probe.register(config, os.environ["KOPT_TEST_CPU"])


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collected suite out of the garbage collector's reach, and its full passes rarer.

    A worker's heap after collection holds every test module, kopt, torch, textual, ...
    (~110,000 objects, none of them garbage), and each full collection walked it again: in
    tests/decide, tests/report and tests/tui (`-n 2`) the workers spent 11.3 CPU-s in the
    collector, 9.5 of them in 58 full passes of ~0.16 s. `gc.freeze()` moves what exists now
    to the permanent generation (never scanned, never freed: it lives to the end anyway), and
    a young generation of 10,000 objects instead of 700 makes the passes ~10x fewer: 3.5 CPU-s
    there. Cyclic garbage is still collected, a little later; the end of the session's
    collections (pytest's unraisable-exception check) run as before."""
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


FAKE = Path(__file__).parent / "fake_target"
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _gpu_claims_of_this_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This test session's host-wide GPU claims in a folder of its own: two suites on one
    machine (a developer's run beside a clean clone's) never find each other's fake GPUs
    claimed, which made a run wait for its GPU and stop."""
    if "KOPT_GPU_CLAIMS_DIR" not in os.environ:
        os.environ["KOPT_GPU_CLAIMS_DIR"] = str(tmp_path_factory.getbasetemp() / "gpu-claims")


def installed(*names: str) -> pytest.MarkDecorator:
    """A module's `pytestmark` for tests that need packages (torch, triton, ...): skipped where
    one is not installed, as `pytest.importorskip` at module level did, but without importing
    it while the suite is collected. Every xdist worker collects every module: torch and
    triton imported there cost ~1.8 CPU-s a worker, also on the workers that never run a
    test needing them. A test that needs one imports it itself (or starts a process that
    does); installed but broken, it fails there."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {' and '.join(missing)} (an extra of pyproject.toml)")


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def make_fake_repo(
    path: Path,
    *,
    script: list[str] | None = None,
    extra_toml: str = "",
    toml_replace: dict[str, str] | None = None,
    files: tuple[str, ...] = ("bench.py", "kernel.json"),
    toml_file: str = "kopt.toml",
) -> Path:
    """A git repo with the fake bench, kernel.json and a kopt.toml driving the scripted proposer
    (`files` and `toml_file`: another variant of tests/fake_target, e.g. the served one)."""
    path.mkdir(parents=True)
    for name in files:
        shutil.copy(FAKE / name, path / name)
    toml = (FAKE / toml_file).read_text()
    toml = toml.replace("python {proposer} {plan}", f"{sys.executable} {FAKE / 'proposer.py'}")
    toml = toml.replace('= "python ', f'= "{sys.executable} ')
    for old, new in (toml_replace or {}).items():
        assert old in toml, old
        toml = toml.replace(old, new)
    # the proposer reads its script from the test's folder, which lies under /tmp: private in
    # the sandbox, so it is named readable (the run's own workspace stays hidden inside it)
    toml = toml.replace("\n[propose]\n", f"\n[propose]\nreadable = [{json.dumps(str(path.parent))}]\n", 1)
    (path / "kopt.toml").write_text(toml + extra_toml)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "fake target")
    if script is not None:
        (path.parent / f"{path.name}.script.json").write_text(json.dumps(script))
    return path


@pytest.fixture(scope="session")
def _baselined_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The default fake target with `kopt init` done and its baseline measured, built once per
    test session (per worker): (the slot it was built in, a copy of it). A workspace holds
    absolute paths (git's worktrees, the frozen config, run.db), so it is restored at the slot
    it was built in, never moved."""
    from kopt_supervisor.engine.daemon import run_engine
    from kopt_supervisor.engine.workspace import Workspace
    from kopt_supervisor.kopt_tui.cli import main as kopt

    base = tmp_path_factory.mktemp("baselined")
    slot, template = base / "slot", base / "template"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_SCRIPT", str(slot / "target.script.json"))
        mp.delenv("KOPT_FAKE_GPUS", raising=False)
        mp.delenv("KOPT_ROOT", raising=False)
        repo = make_fake_repo(slot / "target", script=[])
        assert kopt(["--root", str(slot / "workspaces"), "init", "--repo", str(repo), "--tag", "t"]) == 0
        ws = Workspace(slot / "workspaces", "t")
        assert run_engine(ws, max_iters=0) == 0
        with ws.open_store(readonly=True) as store:
            assert [it.status for it in store.iterations()] == ["baseline"]
    shutil.copytree(slot, template, symlinks=True)
    return slot, template


@pytest.fixture
def baselined(_baselined_template: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch):
    """Returns make(script) -> (repo, root): the default fake target, initialised as tag `t`
    with its baseline (v0) measured, restored from the session's copy instead of an init and
    a baseline per test; the scripted proposer follows `script` from v1 on. One per test (the
    slot is the worker's: tests of one worker run one after the other)."""
    slot, template = _baselined_template

    def make(script: list[str]) -> tuple[Path, Path]:
        shutil.rmtree(slot, ignore_errors=True)
        shutil.copytree(template, slot, symlinks=True)
        (slot / "target.script.json").write_text(json.dumps(script))
        monkeypatch.setenv("FAKE_SCRIPT", str(slot / "target.script.json"))
        return slot / "target", slot / "workspaces"

    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    return make


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Returns make(script, **kw) -> (repo, root); sets FAKE_SCRIPT for the proposer."""

    def make(script: list[str], name: str = "target", **kw) -> tuple[Path, Path]:
        repo = make_fake_repo(tmp_path / name, script=script, **kw)
        monkeypatch.setenv("FAKE_SCRIPT", str(tmp_path / f"{name}.script.json"))
        root = tmp_path / "workspaces"
        return repo, root

    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    return make


@pytest.fixture
def driven_clock(monkeypatch: pytest.MonkeyPatch) -> DrivenClock:
    """The engine's waits on a clock the test drives (tests/clock.py): a review timeout passes
    without being slept through. Only for runs in this process with nobody answering."""
    clock = DrivenClock()
    monkeypatch.setattr(control, "CLOCK", clock)
    return clock

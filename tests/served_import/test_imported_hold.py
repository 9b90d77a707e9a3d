"""An imported bench's --profile started ahead holds (KOPT_PROFILE_HOLD, harness/hold.py), as the
spec harness's does: it says so, imports nothing of the tree until kopt writes `go`, leaves on
`stop` with nothing written, and profiles on `go`. Found on the H200 (2026-12-02): the imported
harness did not hold, so the keep's profile of Liger's bench ran beside the decision's looks.
The harness's main on a thread, on the CPU (Triton's interpreter)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine.loop.profile_runs import say
from kopt_supervisor.kernels.harness import hold, imported
from tests.conftest import installed
from tests.served_import.client import SCRIPT, layer_norm_tree

pytestmark = installed("torch", "triton")

MARK = "import pathlib\npathlib.Path(__file__).with_name('imported').write_text('ran')\n"
"""Put first in the bench: a file next to it once the tree's code has run."""


def held_run(go: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Thread, list[object]]:
    """The harness's main, held, on a thread of this process (torch is imported here already: a
    process of its own would import it at the CPU's idle priority, which a loaded machine starves)."""
    import torch  # noqa: F401 - here, not in the held thread, which a loaded machine starves

    monkeypatch.setenv(hold.PROFILE_HOLD_ENV, str(go))
    monkeypatch.setenv("KOPT_PROFILE_CALLS", "1")
    result: list[object] = []

    def run() -> None:
        try:
            result.append(imported.main([SCRIPT, "--line", "triton", "--profile"]))
        except SystemExit as e:
            result.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def held(thread: threading.Thread, go: Path, bench_folder: Path) -> None:
    """It says it holds, and half a second later has still run nothing of the tree."""
    deadline = time.monotonic() + 60
    while not Path(f"{go}{hold.HELD_SUFFIX}").exists():
        assert thread.is_alive() and time.monotonic() < deadline, "no .held"
        time.sleep(0.02)
    time.sleep(0.5)
    assert thread.is_alive() and not (bench_folder / "imported").exists()


def held_then(
    word: str, bench_folder: Path, go: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[list[object], str, str]:
    """The marked bench in `bench_folder` run held from there, then kopt's `word`: (the run's
    result, its stdout, its stderr)."""
    (bench_folder / SCRIPT).write_text(MARK + (bench_folder / SCRIPT).read_text())
    monkeypatch.chdir(bench_folder)
    thread, result = held_run(go, monkeypatch)
    held(thread, go, bench_folder)
    say(go, word)  # as kopt writes it: a rename
    thread.join(300)
    out, err = capsys.readouterr()
    return result, out, err


def test_a_held_imported_profile_runs_none_of_the_tree_and_stop_ends_it_with_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = layer_norm_tree(tmp_path / "tree")
    result, out, err = held_then("stop", tree, tmp_path / "go", monkeypatch, capsys)
    assert result == [0], (result, err)
    assert "held and stopped" in err and not out.strip() and not (tree / "imported").exists()


def test_a_held_imported_profile_from_a_subfolder_profiles_on_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cd sub && ...` (Liger's `cd benchmark`): the same hold, and on go the profile's rows."""
    tree = tmp_path / "tree"
    sub = layer_norm_tree(tree / "bench")
    (tree / ".git").mkdir()
    result, out, err = held_then("go", sub, tmp_path / "go", monkeypatch, capsys)
    assert result == [0], (result, err)
    assert (sub / "imported").exists() and len(out.strip().splitlines()) > 1, (out, err)


def test_a_held_run_refuses_when_a_module_of_the_whole_worktree_already_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a subfolder, a module imported before the hold from elsewhere in the worktree (its
    src/, on PYTHONPATH) is still the tree's: the run ends unacknowledged."""
    tree = tmp_path / "tree"
    sub = layer_norm_tree(tree / "bench")
    (tree / ".git").mkdir()
    (tree / "src").mkdir()
    (tree / "src" / "tree_mod_ran_early.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tree / "src"))
    __import__("tree_mod_ran_early")
    monkeypatch.chdir(sub)
    go = tmp_path / "go"
    try:
        thread, result = held_run(go, monkeypatch)
        thread.join(60)
    finally:
        sys.modules.pop("tree_mod_ran_early", None)
    assert len(result) == 1 and isinstance(result[0], SystemExit), result
    assert "tree_mod_ran_early" in str(result[0]) and not Path(f"{go}{hold.HELD_SUFFIX}").exists()


def test_the_tree_a_held_run_guards_is_the_worktree_not_the_benchs_folder(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "benchmark" / "scripts").mkdir(parents=True)
    (tree / ".git").write_text("gitdir: elsewhere\n")  # a linked worktree's .git is a file
    assert hold.tree_root(tree / "benchmark" / "scripts") == tree.resolve()
    assert hold.tree_root(tmp_path / "none") == (tmp_path / "none").resolve()  # no .git: the folder itself

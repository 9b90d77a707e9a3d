"""Hostile review (helper, session 28) of d9dc714 + 7b71fda: the imported harness holds under
KOPT_PROFILE_HOLD (hold.hold_until_go, hold.tree_root, refuse_if_tree_ran skipping a relative
`__file__`) and the engine proves the run's first profiles started ahead hold before any look
(profile_runs.HeldProfile.wait_held / prove_held).

The attacker controls the candidate's tree (tracked files it edits; new files where
[target].sources / allow_untracked admit them). The wall under test: nothing of the tree runs
in a held --profile run before kopt writes `go`, and only the profile process can say it held.

Test 1 failed on the reviewed version (a real hole, see its docstring), fixed by
`hold.tree_off_path` (the tree off sys.path while the held work runs); the others pass and
would fail if the wall they pin were removed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import treecheck
from kopt_supervisor.engine.loop import profile_runs
from kopt_supervisor.engine.loop.profile_runs import HeldProfile, say
from kopt_supervisor.engine.sandbox.paths import for_bench
from kopt_supervisor.kernels.harness import hold

# Top-level names `import torch` (2.x) tries while a held run imports it (hold_until_go's
# `work`, after refuse_if_tree_ran and after `go.held`). Found with a meta-path recorder around
# imported.held_torch(): cuda, torchcomms, dill, opt_einsum, monkeytype, pydot (tqdm where
# missing). Two are planted, each only where not installed (what treecheck's shadowing rule,
# importable names only, never flags): opt_einsum (torch.backends.opt_einsum: try/except
# ImportError) and dill (torch.utils._import_utils.import_dill: find_spec, import, extend).
MARK = "import pathlib\npathlib.Path(__file__).with_name('ran_before_go_' + __name__).write_text('ran')\n"
PLANTS = {
    "opt_einsum": MARK + "raise ImportError('planted: look as if absent')\n",  # torch falls back
    "dill": MARK + "def extend(use_dill=False):\n    pass\n",  # what torch calls on it
}


def test_1_a_tree_module_the_held_work_imports_optionally_does_not_run_while_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewed version failed this (d9dc714/7b71fda); fixed by hold.tree_off_path.

    `python -m kopt_supervisor.kernels.harness.imported BENCH --profile` runs in the tree (or
    `cd benchmark && ...`): Python puts the cwd first on sys.path. hold_until_go checks
    sys.modules (refuse_if_tree_ran) and writes `go.held`, THEN runs the held work, and `import
    torch` tries optional top-level modules (opt_einsum, dill, cuda, torchcomms, pydot,
    monkeytype: found with a meta-path recorder around imported.held_torch()) that the cwd
    supplies. Their code would run while the decision's looks are measured, with the GPU's
    device nodes bound. The spec harness (bench.main -> hold_until_go) has the same order.
    Here the held work imports such names as torch does (a process importing torch afresh at
    the CPU's idle priority takes minutes on a loaded 2-core machine), from a subfolder of a
    worktree, with '' and the folder itself on sys.path; `stop` is already written, so the
    work is all that runs."""
    tree = tmp_path / "tree"
    bench = tree / "benchmark"
    bench.mkdir(parents=True)
    (tree / ".git").write_text("gitdir: elsewhere\n")  # a linked worktree
    names = [f"kopt_s28_{name}" for name in PLANTS]  # never installed: only the tree supplies them
    for name, text in zip(names, PLANTS.values(), strict=True):
        (bench / f"{name}.py").write_text(text)
    monkeypatch.chdir(bench)
    monkeypatch.setattr(sys, "path", ["", str(bench), *sys.path])
    go = tmp_path / "side" / "go"
    go.parent.mkdir()
    say(go, "stop")

    def optional_imports() -> list[str]:
        found = []
        for name in names:
            try:
                importlib.import_module(name)
                found.append(name)
            except ImportError:
                pass
        return found

    try:
        told_go, found = hold.hold_until_go(go, hold.tree_root(bench), optional_imports)
    finally:
        for name in names:
            sys.modules.pop(name, None)
    assert told_go is False and found == [], found
    ran = sorted(p.name for p in bench.glob("ran_before_go_*"))
    assert not ran, f"tree code ran before go (after go.held): {ran}"
    assert sys.path[:2] == ["", str(bench)]  # put back for the run after go


def test_2_a_tree_module_from_a_relative_sys_path_entry_has_an_absolute_file_and_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relative-`__file__` skip is reached by no module the path finder loads from a
    folder: Python (3.4+, FileFinder) makes `__file__` absolute even for a relative sys.path
    entry, so such a module is still refused. (Would fail if the skip let it through.) Not
    covered: zipimport keeps a relative archive path (`rel/x.zip/m.py`), which the skip now
    passes; no sys.path entry of that kind exists before the hold unless the config adds one."""
    tree = tmp_path / "tree"
    (tree / "pkgdir").mkdir(parents=True)
    (tree / "pkgdir" / "s28_relmod.py").write_text("X = 1\n")
    monkeypatch.chdir(tree)
    monkeypatch.syspath_prepend("pkgdir")
    try:
        mod = __import__("s28_relmod")
        assert os.path.isabs(mod.__file__)
        with pytest.raises(SystemExit, match="s28_relmod"):
            hold.refuse_if_tree_ran(tree)
    finally:
        sys.modules.pop("s28_relmod", None)


def test_3_a_git_planted_in_a_subfolder_narrows_tree_root_but_treecheck_refuses_it(tmp_path: Path) -> None:
    """A `.git` (file or folder) in benchmark/ makes tree_root stop there (a narrower guarded
    root), but treecheck walks every folder and names it a nested repository, a problem
    (FAIL_PROTECTED in proposal.candidate; served processes get the tree read-only). Would
    fail if treecheck stopped seeing a nested `.git` file."""
    tree = tmp_path / "tree"
    sub = tree / "benchmark"
    sub.mkdir(parents=True)
    (tree / ".git").write_text("gitdir: elsewhere\n")
    (sub / ".git").write_text("gitdir: nowhere\n")
    assert hold.tree_root(sub) == sub.resolve()  # narrowed: the wall is treecheck, below
    assert treecheck._walk(tree).nested == ["benchmark/"]
    report = treecheck.TreeReport(tree="cand/", base="0" * 40, nested_repos=("benchmark/",))
    assert treecheck.NESTED in report.problems()


def _covers(paths: tuple[Path, ...], target: Path) -> bool:
    return any(target == p or p in target.parents for p in paths)


def test_4_no_candidate_process_can_write_another_sides_or_a_later_go_held(tmp_path: Path) -> None:
    """`go.held` lives in <ws>/profiles/vN/<side>/ (HeldProfile.__init__, cleared there first).
    The served candidate (the process running during the decision) sees its looks folder and
    its cache only; the workspace is hidden. The candidate's own held profile writes its own
    side's folder only, never best's. Would fail if either jail bound the profiles folder."""
    ws = tmp_path / "ws"
    cand, best = ws / "cand", ws / "best"
    for d in (cand, best, ws / "looks" / "cand", ws / "profiles" / "v3" / "cand", ws / "profiles" / "v3" / "best"):
        d.mkdir(parents=True)
    cache = ws / "cache" / "cand-abc1234"
    held_cand = ws / "profiles" / "v3" / "cand" / "go.held"
    held_best = ws / "profiles" / "v3" / "best" / "go.held"
    served = for_bench(workspace=ws, cache=cache, readonly_trees=[cand], outputs=[ws / "looks" / "cand"])
    assert not _covers(served.writable, held_cand) and not _covers(served.writable, held_best)
    assert not _covers(served.readable, held_cand.parent)
    assert _covers(served.hidden, held_cand)
    profile = for_bench(workspace=ws, cache=cache, writable_trees=[cand], outputs=[ws / "profiles" / "v3" / "cand"])
    assert _covers(profile.writable, held_cand) and not _covers(profile.writable, held_best)


class _Alive:
    alive = True


def test_5_the_proof_wait_is_bounded_and_proves_only_the_ack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """prove_held's wait (wait_held) ends at ACK_WAIT_S for a process that never acks (30 s,
    once a run, then ahead is off), and at once for one that acked, whatever it does next: what
    may run after the ack is kopt's held work alone (test 1 is where that fails)."""
    monkeypatch.setattr(profile_runs, "ACK_WAIT_S", 0.3)
    held = object.__new__(HeldProfile)
    held.go = tmp_path / "go"
    held.server = _Alive()  # type: ignore[assignment]
    polls: list[int] = []
    t0 = time.monotonic()
    why = held.wait_held(lambda: polls.append(1))
    assert why == "no go.held" and time.monotonic() - t0 < 5 and polls
    Path(f"{held.go}{hold.HELD_SUFFIX}").write_text("1\n")
    t0 = time.monotonic()
    assert held.wait_held(lambda: None) == "" and time.monotonic() - t0 < 1

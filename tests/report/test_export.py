"""`kopt export`: a branch with only the kept source changes and results.md, nothing touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.report import artifact_dir, artifact_glob, export_branch
from kopt_supervisor.engine.report.render import SECTIONS
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git
from tests.report.conftest import db_rows

# What v4's kept commit holds that is not source, and why (the scenario's proposer and format command).
NOT_SOURCE = {
    "__pycache__/fast_path.cpython-311.pyc": "a compiled or build output",
    "build/kernel.o": "a compiled or build output",
    "prof/v4.ncu-rep": "a profiler report or trace",
    "tune.log": "a log or scratch file",
    "scratch/notes.txt": "a new file under `scratch/`",
    "data/table.dat": "ignored by the target's .gitignore",
}


def repo_of(ws) -> Path:
    return Path(json.loads(db_rows(ws, "SELECT value FROM meta WHERE key = 'repo'")[0][0]))


def commit_of(ws, version: int) -> str:
    return db_rows(ws, "SELECT commit_sha FROM iterations WHERE version = ?", version)[0][0]


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.slow
def test_export_holds_only_source_and_results_and_touches_nothing(demo):
    repo = repo_of(demo)
    base = commit_of(demo, 0)
    # the engineer's own uncommitted work in the target repo must survive untouched
    (repo / "kernel.json").write_text('{"speed": {"small": 0.5, "large": 0.5}}\n')
    (repo / "my-notes.txt").write_text("mine\n")
    before = (
        git(repo, "status", "--porcelain"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
        refs(repo),
        (repo / "kernel.json").read_text(),
    )

    msg = export_branch(demo, "perf/demo")

    after = (
        git(repo, "status", "--porcelain"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "symbolic-ref", "HEAD"),
        refs(repo),
        (repo / "kernel.json").read_text(),
    )
    assert after[:3] == before[:3] and after[4] == before[4]
    new_ref = f"refs/heads/perf/demo {git(repo, 'rev-parse', 'perf/demo')}"
    assert sorted(after[3].splitlines()) == sorted([*before[3].splitlines(), new_ref])  # one new ref, no other moved
    assert "created branch perf/demo" in msg and "nothing was checked out" in msg

    changed = set(git(repo, "diff", "--name-only", base, "perf/demo").splitlines())
    assert changed == {"kernel.json", "fast_path.py", ".gitignore", "results.md"}
    for path in changed:
        assert artifact_glob(path) is None and artifact_dir(path) is None

    # one commit per keep of the final tree (v1, v3, v4: v6 is masked), then results.md
    hyps = [r[0] for r in (db_rows(demo, "SELECT hypothesis FROM iterations WHERE version = ?", v) for v in (1, 3, 4))]
    subjects = git(repo, "log", "--reverse", "--format=%s", f"{base}..perf/demo").splitlines()
    assert subjects == [h[0] for h in hyps] + ["kopt results of run demo"]
    assert git(repo, "rev-list", "--count", f"{base}..perf/demo") == "4"

    # the branch's tree is kopt's final tree minus exactly the files that are not source
    best = commit_of(demo, 4)
    kopt_tree = dict(line.split("\t")[::-1] for line in git(repo, "ls-tree", "-r", best).splitlines())
    branch_tree = dict(line.split("\t")[::-1] for line in git(repo, "ls-tree", "-r", "perf/demo").splitlines())
    assert set(kopt_tree) - set(branch_tree) == set(NOT_SOURCE)
    assert set(branch_tree) - set(kopt_tree) == {"results.md"}
    assert all(branch_tree[p] == kopt_tree[p] for p in branch_tree if p != "results.md")

    # each keep's commit says what it left out and why, and names the kopt commit it came from
    messages = git(repo, "log", "--format=%B", f"{base}..perf/demo~1")
    for path, why in NOT_SOURCE.items():
        line = next(ln for ln in messages.splitlines() if ln.strip().startswith(path + ":"))
        assert why in line, (path, line)
    v4_msg = git(repo, "log", "-1", "--format=%B", "perf/demo~1")
    assert f"kopt commit: {best}" in v4_msg
    assert "cls=large:" in v4_msg and "Measured paired" in v4_msg
    assert "build/kernel.o:" in v4_msg
    # files the format command creates are never part of a keep (the loop commits the staged candidate)
    assert ".ruff_cache/CACHEDIR.TAG" not in kopt_tree and "format-report.txt" not in kopt_tree

    results = git(repo, "show", "perf/demo:results.md")
    assert [ln[3:] for ln in results.splitlines() if ln.startswith("## ")] == list(SECTIONS)
    assert "results_latency.png" not in results


def test_export_refuses_an_existing_or_invalid_branch(demo):
    repo = repo_of(demo)
    kopt_branch = git(repo, "rev-parse", "kopt/demo")
    with pytest.raises(BadInput, match="already exists"):
        export_branch(demo, "kopt/demo")
    assert git(repo, "rev-parse", "kopt/demo") == kopt_branch
    with pytest.raises(BadInput, match="not a valid branch name"):
        export_branch(demo, "bad..name")
    with pytest.raises(BadInput, match="not a valid branch name"):
        export_branch(demo, "-x")


def test_cli_export_exit_codes(demo, capsys):
    root = str(demo.root)
    assert kopt(["--root", root, "export", demo.tag, "--branch", "review/demo-cli"]) == 0
    assert "created branch review/demo-cli" in capsys.readouterr().out
    assert kopt(["--root", root, "export", demo.tag, "--branch", "review/demo-cli"]) == 2
    assert "already exists" in capsys.readouterr().err


def test_export_refuses_a_run_with_no_keep(baselined):
    """A finished run whose candidate was not kept: the session's baselined fake target and one
    `nochange` iteration (was a six-iteration scenario run of its own: 7.6 s of the file)."""
    from kopt_supervisor.engine.daemon import run_engine
    from kopt_supervisor.engine.workspace import Workspace

    repo, root = baselined(["nochange"])
    ws = Workspace(root, "t")
    assert run_engine(ws, max_iters=1) == 0
    statuses = [r[0] for r in db_rows(ws, "SELECT status FROM iterations ORDER BY version")]
    assert statuses[0] == "baseline" and len(statuses) == 2 and statuses[1] != "keep", statuses
    with pytest.raises(BadInput, match="no kept iteration"):
        export_branch(ws, "perf/nothing")
    assert git(repo_of(ws), "branch", "--list", "perf/nothing") == ""


def test_report_and_export_refuse_a_run_without_a_baseline(fake_env):
    from kopt_supervisor.engine.report import write_report
    from kopt_supervisor.engine.workspace import Workspace

    repo, root = fake_env(["gain5"])
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "fresh"]) == 0
    ws = Workspace(root, "fresh")
    with pytest.raises(BadInput, match="no measured baseline"):
        write_report(ws)
    with pytest.raises(BadInput, match="no measured baseline"):
        export_branch(ws, "perf/fresh")
    with pytest.raises(BadInput, match="no run 'nope'"):
        write_report(Workspace(root, "nope"))

"""engine/loop/police.outside_sources: with [target].sources declared, a candidate's change to
a tracked file outside them goes to review with its changed lines quoted (the diff scan's
rule `outside-sources`); and `kopt init`'s warning when no sources are declared.

Read on real git diffs of a real repository: an edited input size, a deleted file, a file
with lines only removed, a mode change, a binary file, a rename (a delete and a new file),
a long edit (quoted up to a cap, the rest counted), a path the diff did not reach; beside
them what is not flagged: the sources themselves, new files, no sources declared."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kopt_supervisor.engine import gitops, onboard
from kopt_supervisor.engine.diffscan.findings import RULES, Finding, review_reason
from kopt_supervisor.engine.loop.proposal import OUTSIDE_SOURCES, outside_sources
from tests.conftest import git

FILES = {
    "bench.py": "import kernel\nimport problem\nprint(kernel.kernel(problem.inputs()))\n",
    "kernel.py": "def kernel(xs):\n    return [x * 2 for x in xs]\n",
    "problem.py": "BATCH = 4\nSCALE = 0.5\n\n\ndef inputs():\n    return list(range(BATCH * 100))\n",
    "data/sizes.json": "[1, 2, 3]\n",
    "notes.md": "# notes\n",
    "blob.bin": "\x00\x01\x02",
    "solution/params.json": '{"block": 64}\n',
}


def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    for name, text in FILES.items():
        (r / name).parent.mkdir(parents=True, exist_ok=True)
        (r / name).write_text(text)
    git(r, "init", "-q", "-b", "main")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "base")
    return r


def findings(r: Path, sources: list[str]) -> list[Finding]:
    base = git(r, "rev-parse", "HEAD")
    new = gitops.untracked(r)
    text, _ = gitops.scan_diff(r, base)
    return outside_sources(text, gitops.changed_files(r, base), new, sources)


def test_an_edited_input_size_outside_the_sources_is_quoted(tmp_path: Path) -> None:
    r = repo(tmp_path)
    (r / "problem.py").write_text(FILES["problem.py"].replace("BATCH = 4", "BATCH = 1"))
    (r / "kernel.py").write_text("def kernel(xs):\n    return [x + x for x in xs]\n")  # a source: not flagged
    found = findings(r, ["kernel.py"])
    assert [(f.rule, f.path, f.line, f.text) for f in found] == [(OUTSIDE_SOURCES, "problem.py", 1, "BATCH = 1")]
    reason = review_reason(found)
    assert "outside-sources" in reason and "problem.py:1" in reason and "`BATCH = 1`" in reason
    assert OUTSIDE_SOURCES in RULES  # a rule of the diff scan: listed, allowed by name in allow_constructs


def test_no_sources_declared_flags_nothing(tmp_path: Path) -> None:
    r = repo(tmp_path)
    (r / "problem.py").write_text("BATCH = 1\n")
    assert findings(r, []) == []


def test_sources_globs_and_folders_cover_what_they_name(tmp_path: Path) -> None:
    r = repo(tmp_path)
    (r / "solution/params.json").write_text('{"block": 128}\n')
    (r / "data/sizes.json").write_text("[1]\n")
    assert [f.path for f in findings(r, ["kernel.py", "solution/"])] == ["data/sizes.json"]
    assert findings(r, ["*.py", "solution/*", "data"]) == []


def test_deleted_removed_lines_mode_and_binary_changes_are_named(tmp_path: Path) -> None:
    r = repo(tmp_path)
    (r / "data/sizes.json").unlink()
    (r / "problem.py").write_text(FILES["problem.py"].replace("SCALE = 0.5\n", ""))  # a line removed, none added
    os.chmod(r / "bench.py", 0o755)
    (r / "blob.bin").write_bytes(b"\x00\x09")
    got = {(f.path, f.text) for f in findings(r, ["kernel.py"])}
    assert got == {
        ("data/sizes.json", "the file is deleted"),
        ("problem.py", "lines removed (or its mode changed)"),
        ("bench.py", "lines removed (or its mode changed)"),
        ("blob.bin", "a binary file changed"),
    }


def test_a_rename_is_a_deletion_outside_the_sources(tmp_path: Path) -> None:
    r = repo(tmp_path)
    subprocess.run(["git", "mv", "problem.py", "problem2.py"], cwd=r, check=True)
    got = findings(r, ["kernel.py"])
    assert ("problem.py", "the file is deleted") in {(f.path, f.text) for f in got}
    assert all(f.path != "problem2.py" for f in got)  # a new file: the tree check's, not this rule's


def test_new_files_are_not_this_rules(tmp_path: Path) -> None:
    r = repo(tmp_path)
    (r / "extra.json").write_text("{}\n")
    assert findings(r, ["kernel.py"]) == []


def test_a_long_edit_is_quoted_up_to_the_cap_and_counted(tmp_path: Path) -> None:
    r = repo(tmp_path)
    (r / "notes.md").write_text("".join(f"line {i}\n" for i in range(50)))
    found = findings(r, ["kernel.py"])
    assert len([f for f in found if f.line]) == 20
    assert [f.text for f in found if not f.line] == ["... and 30 more added lines"]
    assert len(review_reason(found)) <= 900  # the reason line stays short; the record holds the findings


def test_a_changed_file_the_diff_did_not_reach_is_named(tmp_path: Path) -> None:
    """A diff cut at its size cap (the scan then adds `diff-truncated` too)."""
    got = outside_sources("", ["problem.py", "kernel.py"], set(), ["kernel.py"])
    assert [(f.path, f.text) for f in got] == [("problem.py", "changed (not in the part of the diff read)")]


def test_kopt_init_warns_about_what_the_bench_reads_when_no_sources_are_declared(tmp_path: Path) -> None:
    r = repo(tmp_path)
    tracked = gitops.tree_files(r, "HEAD")
    warning = onboard.sources_warning(r, "python bench.py", tracked, ["bench.py"], [])
    assert warning is not None and "kernel.py, problem.py" in warning and "bench.py," not in warning
    assert onboard.sources_warning(r, "python bench.py", tracked, ["bench.py", "*.py"], []) is None  # all protected
    assert onboard.sources_warning(r, "python bench.py", tracked, ["bench.py"], ["kernel.py"]) is None  # declared
    (r / "untracked_helper.py").write_text("X = 1\n")
    (r / "bench.py").write_text(FILES["bench.py"] + "import untracked_helper\n")
    warning = onboard.sources_warning(r, "python bench.py", tracked, ["bench.py"], [])
    assert warning is not None and "untracked_helper" not in warning  # only tracked files are named


def test_init_warns_of_a_workspace_made_inside_the_repository(tmp_path: Path, monkeypatch, capsys) -> None:
    """The examples' flow (a shell in the repo, the default root ./workspaces) had put kopt's
    worktrees inside the user's repository without a word: `git status` listed them and `git add
    -A` warned of embedded repositories. kopt init now says so; a root outside says nothing."""
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from tests.conftest import make_fake_repo

    monkeypatch.delenv("KOPT_ROOT", raising=False)
    repo = make_fake_repo(tmp_path / "repo", script=[])
    assert kopt(["--root", str(repo / "workspaces"), "init", "--repo", str(repo), "--tag", "in"]) == 0
    out = capsys.readouterr().out
    assert "lies inside the repository" in out and "pass --root" in out, out
    assert onboard.inside_repo_warning(tmp_path / "elsewhere" / "x", repo) is None
    assert kopt(["--root", str(tmp_path / "outside"), "init", "--repo", str(repo), "--tag", "out"]) == 0
    assert "lies inside the repository" not in capsys.readouterr().out


def test_init_warns_of_a_protected_pattern_that_matches_no_tracked_file(tmp_path: Path, monkeypatch, capsys) -> None:
    """A typo in [target].protected (a new user's `softmax/nothere.py` was accepted without a
    word) leaves the file meant unprotected: kopt init names the patterns that match nothing,
    as the police match them (a folder, a glob, a path)."""
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from tests.conftest import make_fake_repo

    assert onboard.unmatched_protected(["k/", "*.json", "bench.py"], {"bench.py", "k/a.py", "p.json"}) is None
    said = onboard.unmatched_protected(["kernel.pyy", "bench.py", "src/kernels/"], {"bench.py", "src/kernel/a.py"})
    assert said is not None and "'kernel.pyy', 'src/kernels/' match no tracked file" in said, said
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    repo = make_fake_repo(
        tmp_path / "repo",
        script=[],
        toml_replace={'protected = ["bench.py"]': 'protected = ["bench.py", "nothere.py"]'},
    )
    assert kopt(["--root", str(tmp_path / "ws"), "init", "--repo", str(repo), "--tag", "p"]) == 0
    assert "[target].protected: 'nothere.py' match no tracked file" in capsys.readouterr().out

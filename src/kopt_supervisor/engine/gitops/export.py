"""Building a branch without a worktree (`kopt export`): plumbing on a private index file,
so no checked-out branch, HEAD, index or working tree of the user's is ever touched.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.gitops.invoke import _git, _split0, run_at
from kopt_supervisor.engine.gitops.location import GitFailure, Location, locate
from kopt_supervisor.engine.gitops.neutral import KOPT_AUTHOR, Actor, author_env
from kopt_supervisor.engine.gitops.worktrees import show_file


def diff_paths(path: str | Path, a: str, b: str) -> list[tuple[str, str]]:
    """(status letter, file) for every file that differs from commit `a` to `b` (a rename is
    a delete and an add)."""
    parts = _git(path, "diff", "--name-status", "--no-renames", "--no-ext-diff", "--no-textconv", "-z", a, b).split(
        "\0"
    )
    return [(parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]


def tree_files(path: str | Path, commit: str) -> set[str]:
    """Every file path in a commit's tree."""
    return set(_split0(_git(path, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit)))


def tree_entries(path: str | Path, commit: str, files: list[str]) -> dict[str, tuple[str, str]]:
    """file -> (mode, object id) in a commit's tree, for the files it has."""
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(files), 200):
        chunk = files[i : i + 200]
        text = _git(path, "ls-tree", "-z", "--full-tree", commit, "--", *chunk) if chunk else ""
        for entry in text.split("\0"):
            if not entry:
                continue
            meta, _, name = entry.partition("\t")
            mode, _kind, obj = meta.split()
            out[name] = (mode, obj)
    return out


def ignored_paths(path: str | Path, commit: str, files: list[str]) -> set[str]:
    """The files that the .gitignore files of `commit` (with the repo's info/exclude and the
    user's excludes) ignore, whether or not they are tracked. Evaluated in a scratch folder
    holding only those .gitignore files and empty stand-ins of `files`."""
    if not files:
        return set()
    repo_loc = locate(path)
    gitignores = [p for p in tree_files(path, commit) if p == ".gitignore" or p.endswith("/.gitignore")]
    with tempfile.TemporaryDirectory(prefix="kopt-ignore-") as tmp:
        root = Path(tmp)
        for g in gitignores:
            text = show_file(path, commit, g)
            if text is not None:
                (root / g).parent.mkdir(parents=True, exist_ok=True)
                (root / g).write_text(text + "\n", encoding="utf-8", errors="surrogateescape")
        for f in files:
            with contextlib.suppress(OSError):
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).touch()
        with tempfile.TemporaryFile() as listing:
            listing.write("".join(f + "\0" for f in files).encode("utf-8", "surrogateescape"))
            listing.seek(0)
            loc = Location(repo_loc.git_dir, repo_loc.common_dir, root)
            out = run_at(
                loc, "check-ignore", "--no-index", "--stdin", "-z", stdin=listing, ok=(0, 1), label=path, literal=False
            )  # check-ignore refuses the literal magic; it takes no other
        return set(_split0(out))


def hash_blob(path: str | Path, data: bytes) -> str:
    """Store `data` as a blob in the repository; returns its object id."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        return _git(path, "hash-object", "-w", "--no-filters", "--stdin", stdin=f)


def commit_with_changes(
    path: str | Path,
    parent: str,
    changes: list[tuple[str, str | None, str | None]],
    message: str,
    *,
    author: Actor = KOPT_AUTHOR,
    author_date: float | None = None,
) -> str:
    """A new commit (on no branch) whose tree is `parent`'s with `changes` applied:
    (file, mode, object id) sets a file, (file, None, None) removes it."""
    with tempfile.TemporaryDirectory(prefix="kopt-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **author_env(author)}
        if author_date is not None:
            env["GIT_AUTHOR_DATE"] = f"@{int(author_date)} +0000"
        _git(path, "read-tree", parent, env=env)
        zero = "0" * len(parent)
        info = "".join(f"{mode} {obj}\t{name}\0" if mode else f"0 {zero}\t{name}\0" for name, mode, obj in changes)
        info_path = Path(tmp) / "index-info"
        info_path.write_bytes(info.encode("utf-8", "surrogateescape"))
        with open(info_path, "rb") as stdin:
            _git(path, "update-index", "-z", "--index-info", env=env, stdin=stdin)
        tree = _git(path, "write-tree", env=env)
        return _git(path, "commit-tree", "--no-gpg-sign", tree, "-p", parent, "-m", message, env=env)


def check_branch_name(path: str | Path, name: str) -> None:
    try:
        _git(path, "check-ref-format", "--branch", name)
    except GitFailure:
        raise BadInput(f"{name!r} is not a valid branch name") from None
    if name.startswith("-") or name.startswith("refs/"):
        raise BadInput(f"{name!r} is not a valid branch name (give the short name, e.g. perf/my-kernel)")


def create_branch(path: str | Path, name: str, commit: str) -> None:
    """Point a new branch at `commit`; fails (GitFailure) if the branch exists meanwhile."""
    _git(path, "update-ref", "-m", "kopt export", f"refs/heads/{name}", commit, "0" * len(commit))

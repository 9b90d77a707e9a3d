"""Every git call kopt makes, in one place (GitPython, used from the engine's thread only).

The run's branch `kopt/TAG` is checked out in `best/` and always sits at BEST_COMMIT; the
candidate worktree `cand/` is a detached HEAD that the proposer edits. A keep is a commit
made in `cand/` (parent BEST_COMMIT) to which `best/`'s branch is then fast-forwarded.
Repos are opened per call and closed after use.
"""

from __future__ import annotations

import contextlib
import fnmatch
import time
from collections.abc import Iterator
from pathlib import Path

import git

from engine.errors import BadInput, KoptFailure

KOPT_AUTHOR = git.Actor("kopt", "kopt@localhost")


class GitFailure(KoptFailure):
    """A git operation failed; the message says which and why."""


@contextlib.contextmanager
def repo(path: str | Path) -> Iterator[git.Repo]:
    try:
        r = git.Repo(str(path))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BadInput(f"{path}: not a git repository") from None
    try:
        yield r
    finally:
        r.close()


def _git(path: str | Path, *args: str) -> str:
    with repo(path) as r:
        try:
            return r.git.execute(["git", *args], with_extended_output=False, strip_newline_in_stdout=True)
        except git.GitCommandError as exc:
            msg = (exc.stderr or exc.stdout or str(exc)).strip().splitlines()
            raise GitFailure(f"git {' '.join(args[:2])} in {path}: {msg[-1] if msg else exc}") from None


def toplevel(path: str | Path) -> Path:
    with repo(path) as r:
        if r.bare or r.working_tree_dir is None:
            raise BadInput(f"{path}: a bare repository has no working tree")
        return Path(r.working_tree_dir)


def head(path: str | Path) -> str:
    with repo(path) as r:
        try:
            return r.head.commit.hexsha
        except ValueError:
            raise BadInput(f"{path}: the repository has no commit yet") from None


def branch_sha(path: str | Path, branch: str) -> str | None:
    with repo(path) as r:
        try:
            return r.commit(f"refs/heads/{branch}").hexsha
        except (git.BadName, ValueError):
            return None


def commit_info(path: str | Path, sha: str) -> tuple[list[str], str]:
    """(parent shas, tree sha) of a commit."""
    with repo(path) as r:
        c = r.commit(sha)
        return [p.hexsha for p in c.parents], c.tree.hexsha


def dirty_tracked(path: str | Path) -> list[str]:
    """Tracked files changed in the index or working tree, relative to the repo root."""
    out = _git(path, "status", "--porcelain", "--untracked-files=no", "-z")
    return _porcelain_paths(out)


def untracked(path: str | Path) -> list[str]:
    out = _git(path, "ls-files", "--others", "--exclude-standard", "-z")
    return [p for p in out.split("\0") if p]


def _porcelain_paths(out: str) -> list[str]:
    paths: list[str] = []
    parts = out.split("\0")
    i = 0
    while i < len(parts):
        entry = parts[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename's source follows
                i += 1
        i += 1
    return paths


def matching(paths: list[str], globs: list[str]) -> list[str]:
    return sorted({p for p in paths for g in globs if fnmatch.fnmatch(p, g) or p == g.rstrip("/") or p.startswith(g.rstrip("/") + "/")})


def clear_stale_lock(worktree: str | Path, older_than_s: float = 0.0) -> bool:
    """Remove a leftover index.lock of this worktree (a git killed mid-write). Only the engine
    runs git in a run's worktrees, so a lock present when the engine starts is stale."""
    gitdir = _gitdir(Path(worktree))
    if gitdir is None:
        return False
    lock = gitdir / "index.lock"
    try:
        if time.time() - lock.stat().st_mtime >= older_than_s:
            lock.unlink()
            return True
    except FileNotFoundError:
        pass
    return False


def _gitdir(worktree: Path) -> Path | None:
    dotgit = worktree / ".git"
    if dotgit.is_dir():
        return dotgit
    try:
        text = dotgit.read_text().strip()
    except OSError:
        return None
    if text.startswith("gitdir:"):
        p = Path(text.split(":", 1)[1].strip())
        return p if p.is_absolute() else (worktree / p).resolve()
    return None


def add_worktrees(repo_path: str | Path, branch: str, best: Path, cand: Path, commit: str) -> None:
    if branch_sha(repo_path, branch) is not None:
        raise BadInput(f"branch {branch!r} already exists in {repo_path}; choose another tag")
    _git(repo_path, "worktree", "add", "-b", branch, str(best), commit)
    _git(repo_path, "worktree", "add", "--detach", str(cand), commit)


def ensure_worktree(repo_path: str | Path, path: Path, *, branch: str | None, commit: str) -> bool:
    """Re-create a worktree folder deleted by hand. Returns True when it had to."""
    if (path / ".git").exists():
        return False
    _git(repo_path, "worktree", "prune")
    if branch:
        _git(repo_path, "worktree", "add", "--force", str(path), branch)
    else:
        _git(repo_path, "worktree", "add", "--force", "--detach", str(path), commit)
    return True


def reset_clean(worktree: str | Path, commit: str, *, detach: bool = False) -> None:
    """Put a worktree exactly at `commit`: tracked files reset, untracked and ignored removed."""
    clear_stale_lock(worktree)
    if detach:
        _git(worktree, "checkout", "--force", "--detach", commit)
    _git(worktree, "reset", "--hard", "--quiet", commit)
    _git(worktree, "clean", "-ffdxq")


def unstaged_changes(worktree: str | Path) -> list[str]:
    """Tracked files whose working copy differs from the index. kopt stages the candidate
    before timing it, so anything listed here was written by the bench itself."""
    return [p for p in _git(worktree, "diff", "--name-only", "-z").split("\0") if p]


def restore_from_index(worktree: str | Path) -> None:
    """Undo what a bench wrote into tracked files (the staged candidate is kept)."""
    _git(worktree, "checkout", "--force", "--", ".")


def changed_files(worktree: str | Path, base: str) -> list[str]:
    """Files the candidate changes against `base`: tracked diffs and new untracked files."""
    tracked = [p for p in _git(worktree, "diff", "--name-only", "-z", base).split("\0") if p]
    return sorted(set(tracked) | set(untracked(worktree)))


def diff(worktree: str | Path, base: str, *, max_bytes: int = 2_000_000) -> str:
    _git(worktree, "add", "--intent-to-add", "--all")
    try:
        text = _git(worktree, "diff", "--no-color", "--no-ext-diff", base)
    finally:
        _git(worktree, "reset", "--quiet")
    return text[:max_bytes]


def stage_all_tree(worktree: str | Path) -> str:
    """Stage every change and return the tree sha it would commit (recorded before a commit,
    so a crash between commit and bookkeeping can be recognised and adopted)."""
    _git(worktree, "add", "--all")
    return _git(worktree, "write-tree")


def commit(worktree: str | Path, message: str) -> str:
    """Commit everything in the worktree as kopt (hooks skipped: the tree was already checked)."""
    _git(worktree, "add", "--all")
    _git(
        worktree, "-c", f"user.name={KOPT_AUTHOR.name}", "-c", f"user.email={KOPT_AUTHOR.email}",
        "commit", "--no-verify", "--quiet", "--allow-empty", "-m", message,
    )
    return head(worktree)


def init_repo(path: Path, message: str) -> str:
    """A fresh repository with everything in `path` committed (used by `kopt demo`)."""
    r = git.Repo.init(str(path))
    try:
        with r.config_writer() as cw:
            cw.set_value("user", "name", "kopt demo")
            cw.set_value("user", "email", "kopt@localhost")
        r.git.add("--all")
        return r.index.commit(message, author=KOPT_AUTHOR, committer=KOPT_AUTHOR).hexsha
    finally:
        r.close()


def show_file(path: str | Path, commit: str, file: str) -> str | None:
    try:
        return _git(path, "show", f"{commit}:{file}")
    except GitFailure:
        return None

"""Every git call kopt makes, in one place (GitPython, used from the engine's thread only).

The run's branch `kopt/TAG` is checked out in `best/` and always sits at BEST_COMMIT; the
candidate worktree `cand/` is a detached HEAD that the proposer edits. A keep is a commit
made in `cand/` (parent BEST_COMMIT) to which `best/`'s branch is then fast-forwarded.
Repos are opened per call and closed after use.
"""

from __future__ import annotations

import contextlib
import fnmatch
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import git

from kopt_supervisor.engine.errors import BadInput, KoptFailure

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


# Hooks never run in kopt's git calls: a proposer that plants one in the shared .git/hooks
# (a post-commit, a post-checkout) or sets core.fsmonitor to a program in the repo's config
# must not get to run code inside a keep, a status or a reset.
SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


def _git(path: str | Path, *args: str, env: dict[str, str] | None = None, stdin: BinaryIO | None = None) -> str:
    with repo(path) as r:
        try:
            return r.git.execute(["git", *SAFE, *args], with_extended_output=False, strip_newline_in_stdout=True,
                                 env=env, istream=stdin)
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


def untracked(path: str | Path, *, ignored_too: bool = False) -> list[str]:
    """Untracked files (not ignored ones, unless `ignored_too`)."""
    out = _git(path, "ls-files", "--others", "-z", *(() if ignored_too else ("--exclude-standard",)))
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


def clear_stale_lock(worktree: str | Path) -> list[str]:
    """Remove leftover lock files of this worktree (a git killed mid-write, a power loss):
    its index.lock and HEAD.lock, and the lock of the branch it has checked out. Only the
    engine runs git in a run's worktrees and on its branch, so a lock present before the
    engine's own call is stale. Returns the locks removed."""
    gitdir = _gitdir(Path(worktree))
    if gitdir is None:
        return []
    locks = [gitdir / "index.lock", gitdir / "HEAD.lock"]
    try:
        head = (gitdir / "HEAD").read_text().strip()
        common = gitdir / (gitdir / "commondir").read_text().strip() if (gitdir / "commondir").exists() else gitdir
        if head.startswith("ref: refs/heads/"):
            locks.append(common.resolve() / (head[5:] + ".lock"))
    except OSError:
        pass
    removed = []
    for lock in locks:
        try:
            lock.unlink()
            removed.append(str(lock))
        except FileNotFoundError:
            pass
    return removed


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
    """Re-create a worktree folder deleted by hand (or left without its `.git` file, or
    replaced by a link). Returns True when it had to. The folder is kopt's own: what is left
    in it is a discarded candidate, removed (a link is removed, never followed)."""
    if (path / ".git").is_file() and not path.is_symlink():
        return False
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
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


def stage_tracked_tree(worktree: str | Path) -> str:
    """Update the index from the working copy of files it already holds (the staged
    candidate, after formatting) without picking up new untracked files (bench outputs);
    return the tree it would commit."""
    _git(worktree, "add", "--update")
    return _git(worktree, "write-tree")


def remove_untracked(worktree: str | Path) -> None:
    """Delete untracked files that are not ignored (what a bench wrote beside the staged
    candidate); ignored build caches stay."""
    _git(worktree, "clean", "-fdq")


def commit(worktree: str | Path, message: str) -> str:
    """Commit the index (the staged candidate) as kopt; hooks skipped: the tree was checked."""
    _git(worktree, "add", "--update")
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


# ---------------------------------------------------------------------------------------
# Building a branch without a worktree (`kopt export`): plumbing on a private index file,
# so no checked-out branch, HEAD, index or working tree of the user's is ever touched.


def diff_paths(path: str | Path, a: str, b: str) -> list[tuple[str, str]]:
    """(status letter, file) for every file that differs from commit `a` to `b` (a rename is
    a delete and an add)."""
    parts = _git(path, "diff", "--name-status", "--no-renames", "-z", a, b).split("\0")
    return [(parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]


def tree_files(path: str | Path, commit: str) -> set[str]:
    """Every file path in a commit's tree."""
    return {p for p in _git(path, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit).split("\0") if p}


def tree_entries(path: str | Path, commit: str, files: list[str]) -> dict[str, tuple[str, str]]:
    """file -> (mode, object id) in a commit's tree, for the files it has."""
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(files), 200):
        chunk = files[i:i + 200]
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
    import tempfile

    if not files:
        return set()
    gitignores = [p for p in tree_files(path, commit) if p == ".gitignore" or p.endswith("/.gitignore")]
    git_dir = _git(path, "rev-parse", "--absolute-git-dir")
    with tempfile.TemporaryDirectory(prefix="kopt-ignore-") as tmp:
        root = Path(tmp)
        for g in gitignores:
            text = show_file(path, commit, g)
            if text is not None:
                (root / g).parent.mkdir(parents=True, exist_ok=True)
                (root / g).write_text(text + "\n", encoding="utf-8")
        for f in files:
            with contextlib.suppress(OSError):
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).touch()
        listing = root.parent / f"{root.name}.paths"
        listing.write_bytes("".join(f + "\0" for f in files).encode("utf-8", "surrogateescape"))
        try:
            with open(listing, "rb") as stdin:
                status, stdout, stderr = git.Git(tmp).execute(
                    ["git", f"--git-dir={git_dir}", f"--work-tree={tmp}", "check-ignore", "--no-index", "--stdin",
                     "-z"],
                    istream=stdin, with_exceptions=False, with_extended_output=True, strip_newline_in_stdout=False)
        finally:
            listing.unlink()
        if status not in (0, 1):  # 1: nothing is ignored
            raise GitFailure(f"git check-ignore in {path}: {(stderr.strip().splitlines() or [f'exit {status}'])[-1]}")
        return {p for p in stdout.split("\0") if p}


def hash_blob(path: str | Path, data: bytes) -> str:
    """Store `data` as a blob in the repository; returns its object id."""
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="kopt-blob-") as f:
        f.write(data)
        f.flush()
        return _git(path, "hash-object", "-w", "--no-filters", f.name)


def commit_with_changes(
    path: str | Path,
    parent: str,
    changes: list[tuple[str, str | None, str | None]],
    message: str,
    *,
    author: git.Actor = KOPT_AUTHOR,
    author_date: float | None = None,
) -> str:
    """A new commit (on no branch) whose tree is `parent`'s with `changes` applied:
    (file, mode, object id) sets a file, (file, None, None) removes it."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kopt-index-") as tmp:
        env = {
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_AUTHOR_NAME": author.name or "kopt", "GIT_AUTHOR_EMAIL": author.email or "kopt@localhost",
            "GIT_COMMITTER_NAME": author.name or "kopt", "GIT_COMMITTER_EMAIL": author.email or "kopt@localhost",
        }
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
        return _git(path, "commit-tree", tree, "-p", parent, "-m", message, env=env)


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

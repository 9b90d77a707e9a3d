"""The candidate's tree: what it changes against a base, what a bench wrote into it, and
staging, cleaning and committing it. What is reported or committed never comes from the
worktree's own index as it stands: a scratch index, or one rebuilt from a tree first.
"""

from __future__ import annotations

import fnmatch
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kopt_supervisor.engine.gitops.invoke import (
    _git,
    _rebuild_index,
    _scratch_index,
    _split0,
    run_at,
)
from kopt_supervisor.engine.gitops.location import Location, locate
from kopt_supervisor.engine.gitops.neutral import author_env
from kopt_supervisor.engine.gitops.worktrees import head


def index_flagged(path: str | Path) -> list[str]:
    """Entries of the worktree's own index marked skip-worktree or assume-unchanged: git's
    status and diff stop looking at those files, so any of them is suspect."""
    out = _git(path, "ls-files", "-v", "-z")
    return [e[2:] for e in out.split("\0") if len(e) > 2 and (e[0] == "S" or e[0].islower())]


def dirty_tracked(path: str | Path) -> list[str]:
    """Tracked files changed in the index or working tree, relative to the repo root, and
    the index entries flagged so that git would not look at them."""
    out = _git(path, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=dirty", "-z")
    return _unique([*_porcelain_paths(out), *index_flagged(path)])


def _unique(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def untracked(path: str | Path, *, ignored_too: bool = False) -> list[str]:
    """Untracked files (not ignored ones, unless `ignored_too`)."""
    out = _git(path, "ls-files", "--others", "-z", *(() if ignored_too else ("--exclude-standard",)))
    return _split0(out)


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
    return sorted(
        {
            p
            for p in paths
            for g in globs
            if fnmatch.fnmatch(p, g) or p == g.rstrip("/") or p.startswith(g.rstrip("/") + "/")
        }
    )


def unstaged_changes(worktree: str | Path) -> list[str]:
    """Tracked files whose working copy differs from the index (and index entries flagged so
    that git would not look). kopt stages the candidate before timing it, so anything listed
    here was written by the bench itself."""
    out = _git(worktree, "diff", "--name-only", "-z", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")
    return _unique([*_split0(out), *index_flagged(worktree)])


def restore_from_index(worktree: str | Path) -> None:
    """Undo what a bench wrote into tracked files (the staged candidate is kept)."""
    loc = locate(worktree)
    _rebuild_index(loc, run_at(loc, "write-tree"))
    run_at(loc, "checkout", "--force", "--", ".")


def changed_files(worktree: str | Path, base: str) -> list[str]:
    """Files the candidate changes against `base`: tracked diffs and new untracked (not
    ignored) files, from the files themselves (a scratch index, not the worktree's)."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        out = run_at(
            loc, "diff", "--cached", "--name-only", "--no-renames", "-z", "--ignore-submodules=dirty", base, env=env
        )
    return sorted(_split0(out))


def diff(worktree: str | Path, base: str, *, max_bytes: int = 2_000_000, force: Sequence[str] = ()) -> str:
    """The candidate's patch against `base` (new untracked files included, and the ignored
    files named in `force`), computed on a scratch index: the worktree's index is untouched."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        _add_forced(loc, force, env)
        text = run_at(
            loc,
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=dirty",
            base,
            env=env,
        )
    return text[:max_bytes]


def scan_diff(
    worktree: str | Path, base: str, *, force: Sequence[str] = (), max_bytes: int = 64 * 2**20
) -> tuple[str, bool]:
    """The candidate's whole patch against `base` for the diff scan (engine/diffscan): fixed
    `a/` `b/` prefixes whatever the user's config says, no renames, new and `force`d ignored
    files included; (text, truncated) with the text cut at `max_bytes`."""
    loc = locate(worktree)
    with _scratch_index(loc, base) as env:
        _add(loc, "--all", env)
        _add_forced(loc, force, env)
        text = run_at(
            loc,
            "-c",
            "diff.noprefix=false",
            "-c",
            "diff.mnemonicPrefix=false",
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--ignore-submodules=dirty",
            base,
            env=env,
        )
    return text[:max_bytes], len(text) > max_bytes


def _add(loc: Location, how: str, env: dict[str, str] | None = None) -> None:
    """`git add --all` or `--update`, leaving out the gitlinks the index holds: to see whether
    a nested repository is dirty, add starts git inside it, where that repository's own
    config (filters by names kopt never saw) would run."""
    gitlinks = [
        e.partition("\t")[2] for e in _split0(run_at(loc, "ls-files", "-s", "-z", env=env)) if e.startswith("160000 ")
    ]
    if not gitlinks:
        run_at(loc, "add", how, env=env)
        return
    with tempfile.TemporaryFile() as spec:
        spec.write(b"".join(b":(exclude,literal)" + p.encode("utf-8", "surrogateescape") + b"\0" for p in gitlinks))
        spec.seek(0)
        run_at(loc, "add", how, "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=spec, literal=False)


def _add_forced(loc: Location, paths: Sequence[str], env: dict[str, str] | None = None) -> None:
    if not paths:
        return
    with tempfile.TemporaryFile() as spec:
        spec.write(b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths))
        spec.seek(0)
        run_at(loc, "add", "--force", "--all", "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=spec)


def stage_all_tree(worktree: str | Path, *, force: Sequence[str] = ()) -> str:
    """Stage the candidate (HEAD's tree, every change on disk, new files that are not ignored,
    and the ignored files named in `force`) in a fresh index and return the tree sha it would
    commit (recorded before a commit, so a crash between commit and bookkeeping can be
    recognised and adopted). Whatever the worktree's index held before does not count."""
    loc = locate(worktree)
    _rebuild_index(loc, "HEAD")
    _add(loc, "--all")
    _add_forced(loc, force)
    return run_at(loc, "write-tree")


def stage_tracked_tree(worktree: str | Path) -> str:
    """Update the index from the working copy of the files it already holds (the staged
    candidate, after formatting) without picking up new untracked files (bench outputs);
    return the tree it would commit. Each file is hashed again: stat data or flags in the
    index cannot make a changed file look unchanged."""
    loc = locate(worktree)
    _rebuild_index(loc, run_at(loc, "write-tree"))
    _add(loc, "--update")
    return run_at(loc, "write-tree")


def remove_untracked(worktree: str | Path) -> None:
    """Delete untracked files that are not ignored (what a bench wrote beside the staged
    candidate), nested repositories included; ignored build caches stay."""
    _git(worktree, "clean", "-ffdq")


def remove_ignored(worktree: str | Path, *, keep: Sequence[str] = ()) -> list[str]:
    """Delete the ignored files that the ignore rules hide (build caches, compiled files),
    except those matching the globs in `keep`. Returns the paths removed."""
    loc = locate(worktree)
    if not keep:
        doomed = _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"))
        run_at(loc, "clean", "-ffdXq")
        return doomed
    ignored = _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z"))
    kept = set(matching(ignored, list(keep)))
    doomed = [p for p in ignored if p not in kept]
    for i in range(0, len(doomed), 200):
        run_at(loc, "clean", "-ffdXq", "--", *doomed[i : i + 200])
    return doomed


def commit(worktree: str | Path, message: str) -> str:
    """Commit the staged candidate as kopt and move the worktree's HEAD to it without
    touching any branch (commit-tree, then update-ref --no-deref): no hook, no signing, no
    status of nested repositories; a HEAD pointed at someone's branch moves nothing."""
    loc = locate(worktree)
    tree = stage_tracked_tree(worktree)
    parent = head(worktree)
    sha = run_at(loc, "commit-tree", "--no-gpg-sign", "-p", parent, "-m", message, tree, env=author_env())
    run_at(loc, "update-ref", "--no-deref", "-m", "kopt: keep", "HEAD", sha, parent)
    return sha

"""A work tree against a base tree, through a reference index only kopt writes (for
engine.treecheck): the base's files, those that differ on disk, the ignored ones, and the
entries the worktree's own index flags. A fixed number of git calls, none per file.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine.gitops.candidate import index_flagged
from kopt_supervisor.engine.gitops.invoke import _split0, private_dir, run_at
from kopt_supervisor.engine.gitops.location import GitFailure, Location, locate


@dataclass(frozen=True)
class TreeListing:
    """What git says about a work tree against a base tree, all from kopt's own index."""

    base_tree: str
    base_files: frozenset[str]  # every path of the base tree (gitlinks included)
    changed: tuple[tuple[str, str], ...]  # (M|D|T, path) of base files that differ on disk
    ignored: frozenset[str]  # files not in base that the ignore rules hide ("dir/" for a nested repo)
    flagged: tuple[str, ...]  # entries of the worktree's own index marked skip-worktree/assume-unchanged


@dataclass
class _Reference:
    tree: str
    index: Path
    files: frozenset[str]


_REFERENCES: dict[tuple[Path, Path], _Reference] = {}
_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_TREES: dict[tuple[Path, str], str] = {}


def _tree_of(loc: Location, base: str) -> str:
    cached = _TREES.get((loc.common_dir, base))
    if cached:
        return cached
    tree = run_at(loc, "rev-parse", "--verify", "--quiet", f"{base}^{{tree}}", ok=(0, 1))
    if not tree:
        raise GitFailure(f"{base!r} is not a commit or tree of {loc.common_dir}")
    if _HEX.fullmatch(base):
        _TREES[(loc.common_dir, base)] = tree
    return tree


def _reference(loc: Location, base: str) -> tuple[_Reference, bool]:
    """The worktree's reference index holding `base`'s tree, and whether it was just (re)built
    (its entries carry no stat data yet)."""
    tree = _tree_of(loc, base)
    key = (loc.git_dir, loc.work_tree)
    ref = _REFERENCES.get(key)
    if ref is not None and ref.tree == tree and ref.index.exists():
        return ref, False
    if ref is not None:
        index = ref.index
    else:  # a file of its own per worktree (several lanes check their trees at once)
        fd, name = tempfile.mkstemp(prefix="ref-", suffix=".index", dir=private_dir())
        os.close(fd)
        index = Path(name)
    with contextlib.suppress(FileNotFoundError):
        index.unlink()
    run_at(loc, "read-tree", tree, env={"GIT_INDEX_FILE": str(index)})
    files = frozenset(_split0(run_at(loc, "ls-files", "-z", env={"GIT_INDEX_FILE": str(index)})))
    ref = _REFERENCES[key] = _Reference(tree, index, files)
    return ref, True


def _changed(loc: Location, env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    parts = run_at(loc, "diff-files", "--name-status", "-z", "--ignore-submodules=dirty", env=env).split("\0")
    return tuple((parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i])


def tree_listing(worktree: str | Path, base: str, *, ignored: bool = True) -> TreeListing:
    """Compare a work tree with `base` through an index only kopt writes (kept per worktree
    in kopt's private folder, rebuilt when the base changes, refreshed by stat and ctime, so
    repeated checks read only what changed). Two to five git calls; none per file.

    The refresh (`update-index --refresh`, which rehashes the files whose stat data moved)
    runs only where `diff-files` names something: without it `diff-files` names every file
    whose content, mode or type differs and also those whose stat alone moved (a racily
    clean entry is compared by content either way), so an empty answer is the same answer.
    `ignored=False`: the ignored files are not listed (`ignored_new` lists them), for a
    caller that found no file outside the base."""
    loc = locate(worktree)
    ref, fresh = _reference(loc, base)
    env = {"GIT_INDEX_FILE": str(ref.index)}
    changed: tuple[tuple[str, str], ...] = ()
    if not fresh:
        changed = _changed(loc, env)
    if fresh or changed:
        run_at(loc, "update-index", "-q", "--refresh", "--ignore-submodules", env=env, ok=(0, 1))
        changed = _changed(loc, env)
    others = _ignored(loc, env) if ignored else frozenset()
    return TreeListing(ref.tree, ref.files, changed, others, tuple(index_flagged(worktree)))


def _ignored(loc: Location, env: dict[str, str]) -> frozenset[str]:
    return frozenset(
        _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--directory", env=env))
    )


def ignored_new(worktree: str | Path, base: str) -> frozenset[str]:
    """Files not in `base` that the ignore rules hide ("dir/" for a whole folder or a nested
    repository), against the reference index of `base` (as `tree_listing` lists them)."""
    loc = locate(worktree)
    ref, _ = _reference(loc, base)
    return _ignored(loc, {"GIT_INDEX_FILE": str(ref.index)})

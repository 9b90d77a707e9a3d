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


def tree_listing(worktree: str | Path, base: str) -> TreeListing:
    """Compare a work tree with `base` through an index only kopt writes (kept per worktree
    in kopt's private folder, rebuilt when the base changes, refreshed by stat and ctime, so
    repeated checks read only what changed). Four git calls; none per file."""
    loc = locate(worktree)
    tree = _tree_of(loc, base)
    key = (loc.git_dir, loc.work_tree)
    ref = _REFERENCES.get(key)
    if ref is None or ref.tree != tree or not ref.index.exists():
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
    env = {"GIT_INDEX_FILE": str(ref.index)}
    run_at(loc, "update-index", "-q", "--refresh", "--ignore-submodules", env=env, ok=(0, 1))
    parts = run_at(loc, "diff-files", "--name-status", "-z", "--ignore-submodules=dirty", env=env).split("\0")
    changed = tuple((parts[i][:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i])
    ignored = frozenset(
        _split0(run_at(loc, "ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--directory", env=env))
    )
    return TreeListing(tree, ref.files, changed, ignored, tuple(index_flagged(worktree)))

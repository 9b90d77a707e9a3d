"""A lane on another host: BEST and a candidate carried in one git bundle, and checked out
there as a repository of their own with `best/` and `cand/` worktrees.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from kopt_supervisor.engine.gitops.invoke import _git, private_dir, run_outside
from kopt_supervisor.engine.gitops.location import _trust
from kopt_supervisor.engine.gitops.neutral import author_env


def bundle_pair(repo_path: str | Path, best: str, tree: str, *, ref: str) -> tuple[bytes, str]:
    """A git bundle that carries BEST and the candidate (the staged `tree`, committed on BEST
    under the private `ref`, deleted again): what a lane on another host checks out. Returns
    the bundle's bytes and the candidate commit."""
    cand = _git(
        repo_path, "commit-tree", "--no-gpg-sign", "-p", best, "-m", "kopt: a lane's candidate", tree, env=author_env()
    )
    _git(repo_path, "update-ref", ref, cand)
    try:
        with tempfile.TemporaryDirectory(dir=private_dir()) as tmp:
            path = Path(tmp) / "lane.bundle"
            _git(repo_path, "bundle", "create", "--quiet", str(path), ref)
            return path.read_bytes(), cand
    finally:
        _git(repo_path, "update-ref", "-d", ref)


def checkout_bundle(bundle: Path, dest: Path, best: str, cand: str) -> tuple[Path, Path]:
    """A lane's trees on another host from `bundle_pair`'s bundle: a repository in `dest`,
    worktrees dest/best and dest/cand detached at the two commits (both bound to it)."""
    repo = dest / "repo"
    # unbundled into a fresh repository (no clone: every transport stays off, `file` included)
    for what, argv in (
        ("init", ["init", "--quiet", str(repo)]),
        ("bundle unbundle", ["-C", str(repo), "bundle", "unbundle", str(bundle)]),
    ):
        run_outside(argv, f"git {what} of a lane's bundle")
    best_path, cand_path = dest / "best", dest / "cand"
    for path, sha in ((best_path, best), (cand_path, cand)):
        _git(repo, "worktree", "add", "--force", "--detach", str(path), sha)
        _trust(repo, path, None)
    return best_path, cand_path

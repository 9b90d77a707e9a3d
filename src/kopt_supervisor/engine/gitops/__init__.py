"""Every git call kopt makes, in one place, and none of them runs a program a repository names.

The run's branch `kopt/TAG` is checked out in `best/` and always sits at BEST_COMMIT; the
candidate worktree `cand/` is a detached HEAD that the proposer edits. A keep is a commit
made in `cand/` (parent BEST_COMMIT, HEAD moved without touching any branch) to which
`best/`'s branch is then fast-forwarded by a reset.

git without surprises. A proposer controls the candidate's tree and may reach the repository's
git directory (its config, config.worktree, index, HEAD, the worktree's `.git` file). So every
call here:

- runs `git` directly (subprocess) with an environment of kopt's making: no `GIT_*` variable
  of kopt's own environment passes (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG_*,
  GIT_EXEC_PATH, GIT_SSH_COMMAND, ...), editors, pager and askpass are disabled, replace refs
  are ignored, system attributes are not read;
- names the repository explicitly (`--git-dir`, `--work-tree`, GIT_COMMON_DIR), found from
  the worktree's `.git` file and checked both ways (the admin folder's `gitdir` must point back
  at this worktree, its `commondir` at the repository kopt made it in): `core.worktree`,
  `core.bare`, a planted `commondir` or a `.git` file redirected to another repository never
  move a reset or a clean onto another folder;
- overrides, at the command scope (GIT_CONFIG_COUNT/KEY/VALUE, which beats every config
  file and carries into any git that git starts), every setting that runs a program: fixed
  keys (hooks, fsmonitor, signing and its programs, editors, pager, askpass, ssh command,
  proxies, credential helpers, diff.external, transports, auto-gc, attributes file, ...) and
  per-name keys (filter.<name>.clean/smudge/process, diff.<name>.textconv/command,
  merge.<name>.driver, credential.<url>.helper, remote.<name>.uploadpack, pager.<cmd>, and
  any key whose name says it holds a program) for every name found in the config as git
  reads it, includes and worktree config included. That listing is cached per repository
  and re-read when any config file it came from (or an include target) changes;
- never trusts a worktree's index for what it reports or commits: resets, staging and
  commits rebuild the index from a tree first (skip-worktree and assume-unchanged bits,
  forged stat data and sparse patterns do not survive), and diffs are computed on a scratch
  index; paths given to git are literal (no pathspec magic), submodules are never entered.

GitPython is not used: its `Git.execute` starts from `os.environ` (no way to drop a variable)
and its `Repo` reads the config and runs `git cat-file` without these guards.

The rooms (this package re-exports the operations callers use; a test that replaces a
module-level name patches the module that reads it, e.g. `gitops.invoke._exec`):

- `guards`: what git may run, its environment, and where a worktree's repository is, checked;
  an index file's entries read without starting git, where it is the plain file git writes
  (else git is asked);
- `invoke`: running git (`run_at`, the config listing cache, kopt's private folder; `head`,
  a file at a commit);
- this module (below): the repository, `best/` and `cand/` made, repaired and reset; bundles
  for a lane on another host;
- `trees`: the candidate's changes staged, cleaned and committed; a tree listed against a base
  (engine.treecheck); a branch built without a worktree (`kopt export`).

The repository and its worktrees: the run's branch checked out in `best/`, the detached
candidate `cand/`, both made, re-made when tampered with, and reset exactly to a commit;
a candidate's change moved onto a new base; a fresh repository for the demo; and for a lane
on another host, BEST and a candidate carried in one git bundle and checked out there as a
repository of their own with `best/` and `cand/` worktrees.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from kopt_supervisor.engine import BadInput, KoptError, KoptFailure
from kopt_supervisor.engine.gitops.guards import (
    GitFailure,
    Location,
    _abs,
    _check_head_branch,
    _head_file,
    _trust,
    author_env,
    locate,
)
from kopt_supervisor.engine.gitops.invoke import (
    _HEX,
    _git,
    _rebuild_index,
    _scratch_index,
    head,
    note_tree,
    private_dir,
    run_at,
    run_outside,
    show_file,
)
from kopt_supervisor.engine.gitops.trees import (
    StagedChange,
    TreeListing,
    changed_files,
    check_branch_name,
    commit,
    commit_with_changes,
    create_branch,
    diff,
    diff_paths,
    dirty_tracked,
    hash_blob,
    ignored_new,
    ignored_paths,
    index_flagged,
    matching,
    remove_ignored,
    remove_untracked,
    restore_from_index,
    saved_patch,
    scan_diff,
    stage_all_tree,
    stage_tracked_tree,
    staged_change,
    tree_entries,
    tree_files,
    tree_listing,
    unstaged_changes,
    untracked,
)


def toplevel(path: str | Path) -> Path:
    p = _abs(path)
    if p.name == ".git" and p.is_dir():
        p = p.parent
    if not (p / ".git").exists():
        if (p / "HEAD").is_file() and (p / "objects").is_dir():
            raise BadInput(f"{path}: a bare repository has no working tree")
        raise BadInput(f"{path}: not a git repository")
    try:
        _git(p, "rev-parse", "--git-dir")
    except GitFailure as e:
        raise BadInput(f"{path}: not a usable git repository ({e})") from None
    return p


def branch_sha(path: str | Path, branch: str) -> str | None:
    sha = _git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", ok=(0, 1))
    return sha or None


_COMMITS: dict[tuple[Path, str], tuple[tuple[str, ...], str]] = {}


def commit_info(path: str | Path, sha: str) -> tuple[list[str], str]:
    """(parent shas, tree sha) of a commit. A commit named by its full hash is read once per
    repository: its object cannot change (every look asked it again, one git process each)."""
    key = (locate(path).common_dir, sha) if _HEX.fullmatch(sha) else None
    if key is not None and key in _COMMITS:
        cached_parents, cached_tree = _COMMITS[key]
        return list(cached_parents), cached_tree
    text = _git(path, "cat-file", "commit", sha)
    parents, tree = [], ""
    for line in text.split("\n"):
        if not line:
            break
        field, _, value = line.partition(" ")
        if field == "tree":
            tree = value
        elif field == "parent":
            parents.append(value)
    if key is not None:
        _COMMITS[key] = (tuple(parents), tree)
        note_tree(locate(path), sha, tree)
    return parents, tree


def tree_of(worktree: Path, commit: str) -> str:
    """The git tree hash of a commit (the key of a tree's own cache)."""
    return commit_info(worktree, commit)[1]


def clear_stale_lock(worktree: str | Path) -> list[str]:
    """Remove leftover lock files of this worktree (a git killed mid-write, a power loss):
    its index.lock and HEAD.lock, and the lock of the branch it has checked out. Only the
    engine runs git in a run's worktrees and on its branch, so a lock present before the
    engine's own call is stale. Returns the locks removed (none when the worktree's `.git`
    does not lead into its repository: nothing outside it is touched)."""
    try:
        loc = locate(worktree)
    except KoptError:
        return []
    locks = [loc.git_dir / "index.lock", loc.git_dir / "HEAD.lock"]
    head_ref = _head_file(loc)
    if head_ref.startswith("ref: refs/heads/"):
        lock = Path(os.path.abspath(loc.common_dir / (head_ref[5:] + ".lock")))
        if lock.is_relative_to(loc.common_dir / "refs" / "heads"):
            locks.append(lock)
    removed = []
    for lock in locks:
        try:
            if lock.is_symlink() or lock.is_file():
                lock.unlink()
                removed.append(str(lock))
        except FileNotFoundError:
            pass
    return removed


def add_worktrees(repo_path: str | Path, branch: str, best: Path, cand: Path, commit: str) -> None:
    if branch_sha(repo_path, branch) is not None:
        raise BadInput(f"branch {branch!r} already exists in {repo_path}; choose another tag")
    _git(repo_path, "worktree", "add", "-b", branch, str(best), commit)
    _git(repo_path, "worktree", "add", "--detach", str(cand), commit)
    _trust(repo_path, best, branch)
    _trust(repo_path, cand, None)


def ensure_worktree(repo_path: str | Path, path: Path, *, branch: str | None, commit: str) -> bool:
    """Make `path` a worktree of `repo_path` again if it is not one any more: the folder
    deleted by hand or replaced by a link, its `.git` file missing, replaced, or leading to
    another repository or another worktree's admin folder. The folder is kopt's own: what
    is left in it is a discarded candidate, removed (a link is removed, never followed).
    A HEAD turned to another branch (or, for the detached worktree, to any branch) is put
    back. Returns True when it had to repair anything. From now on every call on `path`
    requires its `.git` to lead into `repo_path`."""
    path = _abs(path)
    _trust(repo_path, path, branch)
    try:
        loc = locate(path)
    except KoptFailure:
        loc = None
    if loc is not None:
        head_ref = _head_file(loc)
        if branch is not None and head_ref == f"ref: refs/heads/{branch}":
            return False
        if branch is None and not head_ref.startswith("ref:") and head_ref:
            return False
        if branch is not None:
            run_at(loc, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
        else:
            run_at(loc, "update-ref", "--no-deref", "HEAD", commit)
        return True
    _check_admin_folders(repo_path)
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


def _check_admin_folders(repo_path: str | Path) -> None:
    """`git worktree prune` reads every worktree's admin files; one that is not a regular file
    (a FIFO) would hang it. Refused loudly instead."""
    folder = locate(repo_path).common_dir / "worktrees"
    try:
        admins = list(folder.iterdir())
    except OSError:
        return
    for admin in admins:
        for name in ("gitdir", "commondir", "HEAD", "locked"):
            try:
                mode = os.lstat(admin / name).st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):
                raise GitFailure(f"{admin / name} is not a regular file (tampered); remove the folder {admin}")


def reset_clean(worktree: str | Path, commit: str, *, detach: bool = False) -> None:
    """Put a worktree exactly at `commit`: tracked files reset (whatever its index claimed),
    untracked and ignored files removed, nested repositories too. `detach` moves HEAD to the
    commit without touching any branch; otherwise the branch the worktree has checked out
    moves (it must be the one kopt gave it)."""
    clear_stale_lock(worktree)
    loc = locate(worktree)
    if detach:
        run_at(loc, "update-ref", "--no-deref", "-m", "kopt: reset", "HEAD", commit)
    else:
        _check_head_branch(loc)
    _rebuild_index(loc, commit)
    run_at(loc, "reset", "--hard", "--quiet", commit)
    run_at(loc, "clean", "-ffdxq")


def move_change(worktree: str | Path, old_base: str, tree: str, new_base: str) -> bool:
    """Put the change from `old_base` to `tree` (the staged candidate) on `new_base`: the
    worktree is reset to `new_base` (detached) and the patch applied to files and index.
    False, with the worktree left at `new_base`, when the patch no longer applies there."""
    loc = locate(worktree)
    with tempfile.NamedTemporaryFile(dir=private_dir(), prefix="kopt-move-", suffix=".patch") as patch:
        run_at(
            loc,
            "diff",
            "--binary",
            "--full-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            f"--output={patch.name}",
            old_base,
            tree,
        )
        reset_clean(worktree, new_base, detach=True)
        if os.path.getsize(patch.name) == 0:
            return True
        try:
            run_at(loc, "apply", "--binary", "--index", "--whitespace=nowarn", patch.name)
        except GitFailure:
            reset_clean(worktree, new_base, detach=True)
            return False
    return True


def init_repo(path: Path, message: str) -> str:
    """A fresh repository with everything in `path` committed (used by `kopt demo`)."""
    run_outside(["init", "--quiet", str(path)], f"git init in {path}")
    _git(path, "config", "user.name", "kopt demo")
    _git(path, "config", "user.email", "kopt@localhost")
    _git(path, "add", "--all")
    tree = _git(path, "write-tree")
    sha = _git(path, "commit-tree", "--no-gpg-sign", "-m", message, tree, env=author_env())
    _git(path, "update-ref", "HEAD", sha)  # HEAD names the initial branch, which is created
    return sha


def export_tree(repo_path: str | Path, commit: str, dest: Path) -> Path:
    """`commit`'s tracked files written into the empty folder `dest` (through an index of
    kopt's own: the repository's index, HEAD and work tree are not touched). `kopt init
    --bench` runs the bench there, never in the user's checkout."""
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise BadInput(f"{dest}: not empty")
    loc = locate(toplevel(repo_path))
    with _scratch_index(loc, commit) as env:
        run_at(loc, "checkout-index", "--all", "--force", f"--prefix={dest.resolve()}/", env=env)
    return dest


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


__all__ = [
    "GitFailure",
    "Location",
    "StagedChange",
    "TreeListing",
    "add_worktrees",
    "branch_sha",
    "bundle_pair",
    "changed_files",
    "check_branch_name",
    "checkout_bundle",
    "clear_stale_lock",
    "commit",
    "commit_info",
    "tree_of",
    "commit_with_changes",
    "create_branch",
    "diff",
    "diff_paths",
    "dirty_tracked",
    "ensure_worktree",
    "export_tree",
    "hash_blob",
    "head",
    "ignored_new",
    "ignored_paths",
    "index_flagged",
    "init_repo",
    "matching",
    "move_change",
    "remove_ignored",
    "remove_untracked",
    "reset_clean",
    "restore_from_index",
    "saved_patch",
    "scan_diff",
    "show_file",
    "stage_all_tree",
    "stage_tracked_tree",
    "staged_change",
    "toplevel",
    "tree_entries",
    "tree_files",
    "tree_listing",
    "unstaged_changes",
    "untracked",
]

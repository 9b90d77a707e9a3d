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
- `invoke`: running git (`run_at`, the config listing cache, kopt's private folder);
- `worktrees`: the repository, `best/` and `cand/` made, repaired and reset; bundles for a
  lane on another host;
- `trees`: the candidate's changes staged, cleaned and committed; a tree listed against a base
  (engine.treecheck); a branch built without a worktree (`kopt export`).
"""

from __future__ import annotations

from kopt_supervisor.engine.gitops.guards import GitFailure, Location
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
from kopt_supervisor.engine.gitops.worktrees import (
    add_worktrees,
    branch_sha,
    bundle_pair,
    checkout_bundle,
    clear_stale_lock,
    commit_info,
    ensure_worktree,
    export_tree,
    head,
    init_repo,
    move_change,
    reset_clean,
    show_file,
    toplevel,
)

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
